package engine

import (
	"slices"
	"strconv"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// maxExecutions bounds the elements one step may execute. Only a loop of
// elements none of which waits can reach it; without the bound such a loop
// would hang its lane forever.
const maxExecutions = 10000

// Step applies one trigger to an instance and runs every token it sets moving
// until each token waits or has ended. It is pure and deterministic: the same
// inputs give the same state, token ids and outbox ids. It never modifies
// in.State; on error the caller may reuse it unchanged.
//
// Effects must be written in this order within the commit: CloseWaits first
// (a token that leaves a wait and opens a new one for the same element, as a
// retried task or a re-armed cycle timer does, appears in both), then the new
// subscriptions, timers, tasks, outbox messages and incidents.
func Step(def *bpmn.Process, in Instance, tr Trigger, now time.Time) (State, Effects, error) {
	s := stepper{
		def:    def,
		in:     &in,
		now:    now,
		tokens: make([]Token, len(in.State.Tokens), len(in.State.Tokens)+2),
		vars:   in.State.Variables,
		seq:    in.State.Seq,
	}
	copy(s.tokens, in.State.Tokens)
	if err := s.apply(tr); err != nil {
		return State{}, Effects{}, err
	}
	if err := s.run(); err != nil {
		return State{}, Effects{}, err
	}
	return s.result(), s.eff, nil
}

// stepper is the working state of one step. Tokens are addressed by index
// because appending may move the slice; a dead token has Element "".
type stepper struct {
	def *bpmn.Process
	in  *Instance
	now time.Time

	tokens []Token
	queue  []int
	vars   map[string]any
	// ownVars is set once vars is a copy this step may write; it is cleared
	// when vars is handed out (task variables) so the next write copies again.
	ownVars   bool
	seq       int64
	eff       Effects
	completed bool
	runs      int
}

func (s *stepper) apply(tr Trigger) error {
	if tr.Kind == TriggerStart {
		return s.start(tr)
	}
	if s.in.State.Status != StatusActive {
		return fault.New(fault.NotWaiting, "instance %s is %s", s.in.ID, statusName(s.in.State.Status))
	}
	switch tr.Kind {
	case TriggerMessage:
		return s.message(tr)
	case TriggerTimer:
		return s.timer(tr)
	case TriggerTaskCompleted, TriggerTaskFailed, TriggerTaskError:
		return s.task(tr)
	}
	return fault.New(fault.StepFailed, "unknown trigger kind %q", tr.Kind)
}

func statusName(st Status) string {
	if st == "" {
		return "not started"
	}
	return string(st)
}

func (s *stepper) start(tr Trigger) error {
	if s.in.State.Status != "" || len(s.in.State.Tokens) > 0 || s.in.State.Seq != 0 {
		return fault.New(fault.InstanceExists, "instance %s is already started", s.in.ID)
	}
	// An instance's variables are always an object, even when started without any.
	s.vars, s.ownVars = make(map[string]any, len(tr.Variables)+4), true
	s.merge(tr.Variables)
	s.spawn(s.def.Start, "", "")
	return nil
}

// message resumes the first wait (in token order) subscribed to tr.Message
// with a matching correlation key.
func (s *stepper) message(tr Trigger) error {
	for i := range s.tokens {
		for _, a := range s.tokens[i].Armed {
			el := s.def.Element(a.Element)
			if el == nil || el.Message == nil || el.Message.Name != tr.Message {
				continue
			}
			if tr.CorrelationKey != "" && a.Key != tr.CorrelationKey {
				continue
			}
			s.fire(i, el, tr.Variables)
			return nil
		}
	}
	if tr.CorrelationKey != "" {
		return fault.New(fault.NotWaiting, "instance %s has no subscription to message %q with key %q",
			s.in.ID, tr.Message, tr.CorrelationKey)
	}
	return fault.New(fault.NotWaiting, "instance %s has no subscription to message %q", s.in.ID, tr.Message)
}

// timer fires the timer wait (tr.TokenID, tr.Element).
func (s *stepper) timer(tr Trigger) error {
	el := s.def.Element(tr.Element)
	i, a := s.armed(tr.TokenID, tr.Element)
	if i < 0 || el == nil || el.Timer == nil {
		return fault.New(fault.NotWaiting, "instance %s has no timer %s on token %s", s.in.ID, tr.Element, tr.TokenID)
	}
	if el.Kind == bpmn.KindBoundary && !el.Interrupting {
		s.rearm(i, el, a)
	}
	s.fire(i, el, nil)
	return nil
}

// armed finds the live token id holding an open wait on element.
func (s *stepper) armed(id, element string) (int, Armed) {
	for i := range s.tokens {
		if s.tokens[i].ID != id {
			continue
		}
		for _, a := range s.tokens[i].Armed {
			if a.Element == element {
				return i, a
			}
		}
	}
	return -1, Armed{}
}

// rearm closes a fired non-interrupting timer and, while its cycle has
// firings left, arms the next one under the same (token, element).
func (s *stepper) rearm(i int, el *bpmn.Element, a Armed) {
	s.closeWaits(i, el.ID)
	if a.Left == 0 {
		return
	}
	due, interval, _, err := s.due(el.Timer)
	if err != nil {
		// The value evaluated when the timer was first armed; variables changed
		// since. The cycle stops rather than the firing being lost.
		return
	}
	left := a.Left
	if left > 0 {
		left--
	}
	s.eff.Timers = append(s.eff.Timers, Timer{
		TokenID: s.tokens[i].ID, Element: el.ID, DueAt: due, Repeat: left, Interval: interval,
	})
	s.tokens[i].Armed = append(s.tokens[i].Armed, Armed{Element: el.ID, Left: left})
}

// fire resumes token i through its wait on el (its own element, an event
// after its event-based gateway, or a boundary event of its activity) with
// result as the element's output.
func (s *stepper) fire(i int, el *bpmn.Element, result map[string]any) {
	tok := &s.tokens[i]
	switch {
	case el.Kind != bpmn.KindBoundary:
		flow := tok.Flow
		if tok.Element != el.ID { // an event after an event-based gateway
			flow = incomingFrom(el, tok.Element)
		}
		s.resume(i)
		s.tokens[i].Element, s.tokens[i].Flow = el.ID, flow
		s.complete(i, el, result)
	case el.Interrupting:
		s.interrupt(i, el, result)
	default:
		// A boundary event is never executed: its new token completes it at once.
		s.complete(s.add(el, s.tokens[i].Scope, ""), el, result)
	}
}

func incomingFrom(el *bpmn.Element, source string) string {
	for _, f := range el.Incoming {
		if f.Source.ID == source {
			return f.ID
		}
	}
	return ""
}

// task applies a pull task's completion, failure or BPMN error.
func (s *stepper) task(tr Trigger) error {
	i := -1
	for j := range s.tokens {
		t := &s.tokens[j]
		if t.ID == tr.TokenID && t.Wait == WaitTask && (tr.Element == "" || tr.Element == t.Element) {
			i = j
			break
		}
	}
	if i < 0 {
		return fault.New(fault.NotWaiting, "instance %s has no task on token %s", s.in.ID, tr.TokenID)
	}
	el := s.def.Element(s.tokens[i].Element)
	switch tr.Kind {
	case TriggerTaskCompleted:
		s.resume(i)
		s.complete(i, el, tr.Variables)
	case TriggerTaskFailed:
		s.closeWaits(i, el.ID)
		if tr.Retries <= 0 {
			s.incident(i, fault.IncidentTaskFailed, "task failed with no retries left: "+tr.ErrorMessage)
			return nil
		}
		task, err := s.newTask(s.tokens[i].ID, el)
		if err != nil {
			s.incident(i, fault.IncidentExpression, err.Error())
			return nil
		}
		task.Retries = tr.Retries
		if tr.RetryTimeout > 0 {
			task.NotBefore = s.now.Add(tr.RetryTimeout)
		}
		s.eff.Tasks = append(s.eff.Tasks, task)
		s.tokens[i].Armed = append(s.tokens[i].Armed, Armed{Element: el.ID})
	case TriggerTaskError:
		if b := catcher(el, tr.ErrorCode); b != nil {
			s.interrupt(i, b, tr.Variables)
			return nil
		}
		s.closeWaits(i, el.ID)
		s.throw(i, tr.ErrorCode)
	}
	return nil
}

// run executes queued tokens until every token waits or has ended.
func (s *stepper) run() error {
	for len(s.queue) > 0 {
		i := s.queue[0]
		s.queue = s.queue[1:]
		if s.tokens[i].Element == "" || s.tokens[i].Wait != "" {
			continue // ended or parked since it was queued
		}
		s.runs++
		if s.runs > maxExecutions {
			return fault.New(fault.StepFailed,
				"instance %s executed more than %d elements in one step: a loop without a wait state", s.in.ID, maxExecutions)
		}
		s.execute(i)
	}
	return nil
}

// execute runs the element token i has just reached.
func (s *stepper) execute(i int) {
	el := s.def.Element(s.tokens[i].Element)
	switch el.Kind {
	case bpmn.KindStart:
		s.complete(i, el, nil)
	case bpmn.KindThrow:
		if s.publish(i, el) {
			s.complete(i, el, nil)
		}
	case bpmn.KindEnd:
		if s.publish(i, el) && s.outputs(i, el, nil) {
			s.end(i)
		}
	case bpmn.KindTerminateEnd:
		if s.outputs(i, el, nil) {
			s.terminate(i)
		}
	case bpmn.KindErrorEnd:
		s.throw(i, el.ErrorCode)
	case bpmn.KindMessageCatch:
		s.park(i, el, WaitMessage)
	case bpmn.KindTimerCatch:
		s.park(i, el, WaitTimer)
	case bpmn.KindTask:
		s.park(i, el, WaitTask)
	case bpmn.KindEventGateway:
		s.park(i, el, WaitEvent)
	case bpmn.KindSubProcess:
		if s.park(i, el, WaitScope) {
			s.spawn(el.SubStart, s.tokens[i].ID, "")
		}
	case bpmn.KindExclusive:
		s.exclusive(i, el)
	case bpmn.KindParallel:
		s.parallel(i, el)
	}
}

// spawn creates a token at el in scope and queues it to execute el.
func (s *stepper) spawn(el *bpmn.Element, scope, flow string) {
	s.queue = append(s.queue, s.add(el, scope, flow))
}

// add creates a token at el in scope and returns its index.
func (s *stepper) add(el *bpmn.Element, scope, flow string) int {
	s.tokens = append(s.tokens, Token{ID: s.newID(), Element: el.ID, Scope: scope, Flow: flow})
	return len(s.tokens) - 1
}

func (s *stepper) newID() string {
	s.seq++
	return "t" + strconv.FormatInt(s.seq, 10)
}

// complete applies el's outputs to result and moves token i along el's
// outgoing flows.
func (s *stepper) complete(i int, el *bpmn.Element, result map[string]any) {
	if !s.outputs(i, el, result) {
		return
	}
	s.leave(i, el.Outgoing)
}

// leave moves token i along flows: the token takes the first, new tokens take
// the others (an implicit parallel split); no flow ends the token.
func (s *stepper) leave(i int, flows []*bpmn.Flow) {
	if len(flows) == 0 {
		s.end(i)
		return
	}
	t := &s.tokens[i]
	t.Element, t.Flow, t.Wait, t.Incident = flows[0].Target.ID, flows[0].ID, "", nil
	s.queue = append(s.queue, i)
	scope := t.Scope
	for _, f := range flows[1:] {
		s.spawn(f.Target, scope, f.ID)
	}
}

// resume takes token i off its wait: its rows are closed and it continues
// under a fresh id, so a stale trigger aimed at the old wait can never match
// a wait the token opens later on the same element.
func (s *stepper) resume(i int) {
	s.closeWaits(i, "")
	t := &s.tokens[i]
	t.ID, t.Wait, t.Incident, t.Armed = s.newID(), "", nil, nil
}

// closeWaits closes the waits of token i on element ("" = all of them). Rows
// opened earlier in this step are dropped from the effects; rows that existed
// before it are listed in CloseWaits for the store to delete.
func (s *stepper) closeWaits(i int, element string) {
	t := &s.tokens[i]
	if len(t.Armed) == 0 {
		return
	}
	match := func(tok, el string) bool { return tok == t.ID && (element == "" || el == element) }
	s.eff.Subscriptions = slices.DeleteFunc(s.eff.Subscriptions, func(x Subscription) bool { return match(x.TokenID, x.Element) })
	s.eff.Timers = slices.DeleteFunc(s.eff.Timers, func(x Timer) bool { return match(x.TokenID, x.Element) })
	s.eff.Tasks = slices.DeleteFunc(s.eff.Tasks, func(x Task) bool { return match(x.TokenID, x.Element) })
	if s.hadRows(i, element) {
		s.eff.CloseWaits = append(s.eff.CloseWaits, WaitRef{TokenID: t.ID, Element: element})
	}
	if element == "" {
		t.Armed = nil
		return
	}
	// Copy rather than delete in place: the backing array belongs to in.State.
	kept := make([]Armed, 0, len(t.Armed))
	for _, a := range t.Armed {
		if a.Element != element {
			kept = append(kept, a)
		}
	}
	t.Armed = kept
}

// hadRows reports whether token i had a wait on element ("" = any) in the
// state the step started from, i.e. whether the store holds rows for it.
func (s *stepper) hadRows(i int, element string) bool {
	old := s.in.State.Tokens
	if i >= len(old) || old[i].ID != s.tokens[i].ID {
		return false
	}
	for _, a := range old[i].Armed {
		if element == "" || a.Element == element {
			return true
		}
	}
	return false
}

// end removes token i and completes its scope when it was the scope's last token.
func (s *stepper) end(i int) {
	scope := s.tokens[i].Scope
	s.kill(i)
	for j := range s.tokens {
		if s.tokens[j].Element != "" && s.tokens[j].Scope == scope {
			return
		}
	}
	s.scopeDone(scope)
}

// scopeDone completes the process or the subprocess whose token id is scope.
func (s *stepper) scopeDone(scope string) {
	if scope == "" {
		s.completed = true
		return
	}
	j := s.indexOf(scope)
	el := s.def.Element(s.tokens[j].Element)
	s.resume(j)
	s.complete(j, el, nil)
}

func (s *stepper) indexOf(id string) int {
	for j := range s.tokens {
		if s.tokens[j].ID == id && s.tokens[j].Element != "" {
			return j
		}
	}
	return -1
}

// kill ends token i, closing its waits.
func (s *stepper) kill(i int) {
	s.closeWaits(i, "")
	s.tokens[i] = Token{}
}

// killScope ends every token inside the scope token id, at any depth.
func (s *stepper) killScope(id string) {
	scopes := []string{id}
	for changed := true; changed; {
		changed = false
		for j := range s.tokens {
			t := &s.tokens[j]
			if t.Element != "" && slices.Contains(scopes, t.Scope) {
				scopes = append(scopes, t.ID)
				s.kill(j)
				changed = true
			}
		}
	}
}

// terminate ends every token of token i's scope, then the scope itself.
func (s *stepper) terminate(i int) {
	scope := s.tokens[i].Scope
	s.kill(i)
	if scope == "" {
		for j := range s.tokens {
			if s.tokens[j].Element != "" {
				s.kill(j)
			}
		}
	} else {
		s.killScope(scope)
	}
	s.scopeDone(scope)
}

// interrupt ends activity token i (and everything inside it) and continues it
// from boundary event b.
func (s *stepper) interrupt(i int, b *bpmn.Element, result map[string]any) {
	s.killScope(s.tokens[i].ID)
	s.resume(i)
	s.tokens[i].Element, s.tokens[i].Flow = b.ID, ""
	s.complete(i, b, result)
}

// throw propagates a BPMN error from token i outward through the enclosing
// subprocesses to the first error boundary event that catches code; an
// uncaught error stops token i in an incident.
func (s *stepper) throw(i int, code string) {
	for scope := s.tokens[i].Scope; scope != ""; {
		j := s.indexOf(scope)
		if b := catcher(s.def.Element(s.tokens[j].Element), code); b != nil {
			s.interrupt(j, b, nil)
			return
		}
		scope = s.tokens[j].Scope
	}
	s.incident(i, fault.IncidentError, "BPMN error "+strconv.Quote(code)+" was not caught")
}

// catcher returns activity's error boundary event for code: one naming the
// code wins over a catch-all one.
func catcher(activity *bpmn.Element, code string) *bpmn.Element {
	var all *bpmn.Element
	for _, b := range activity.Boundaries {
		if b.Timer != nil || b.Message != nil {
			continue
		}
		if b.ErrorCode == code {
			return b
		}
		if b.ErrorCode == "" && all == nil {
			all = b
		}
	}
	return all
}

// incident stops token i where it is.
func (s *stepper) incident(i int, code, msg string) {
	t := &s.tokens[i]
	inc := Incident{TokenID: t.ID, Element: t.Element, Code: code, Message: msg}
	t.Wait, t.Incident = WaitIncident, &inc
	s.eff.Incidents = append(s.eff.Incidents, inc)
}

// result assembles the state after the step.
func (s *stepper) result() State {
	st := State{Status: StatusActive, Variables: s.vars, Seq: s.seq}
	for _, t := range s.tokens {
		if t.Element != "" {
			st.Tokens = append(st.Tokens, t)
		}
	}
	if s.completed {
		st.Status = StatusCompleted
		s.eff.Completed = true
	}
	return st
}
