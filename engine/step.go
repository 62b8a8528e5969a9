package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/dmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
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
// Effects must be written in the order documented on Effects: CloseWaits
// first (a token that leaves a wait and opens a new one for the same
// element, as a retried task or a re-armed cycle timer does, appears in
// both), ResolvedIncidents before Incidents.
//
// Step evaluates expressions under the default limits and no deadline;
// StepContext sets both.
func Step(def *bpmn.Process, in Instance, tr Trigger, now time.Time) (State, Effects, error) {
	return StepContext(context.Background(), def, in, tr, Options{Now: now})
}

// Options are what a step reads besides its definition, instance and
// trigger.
type Options struct {
	// Now is the step's time.
	Now time.Time
	// Limits bound each evaluation of an expression (zero: feel's defaults).
	Limits feel.Limits
	// Decisions are the deployed decisions the process's business rule
	// tasks call (bpmn.Process.CalledDecisions), found by the caller before
	// the step, since the engine reads no database. A task whose decision
	// is missing here stops in an incident.
	Decisions Decisions
}

// Decisions are called decisions by reference.
type Decisions map[bpmn.DecisionRef]Decision

// Decision is a called decision as the caller found it: the deployed
// decision requirements graph that holds it, or why there is none.
type Decision struct {
	// Definitions holds the decision; nil when none is deployed that the
	// reference's binding accepts.
	Definitions *dmn.Definitions
	// Version is the decision's deployed version (0 when missing).
	Version int
	// Missing says why Definitions is nil: the incident's reason.
	Missing string
}

// StepContext is Step under ctx. Once ctx's deadline passes, the
// evaluation under way and every token not yet run stop in an incident
// (fault.IncidentExpressionLimit, naming the step's deadline), so the step
// still ends, quickly, in a state to commit: a relay redelivered after it
// finds the incident, not the work that ran out of time. A cancelled ctx
// abandons the step with an error.
func StepContext(ctx context.Context, def *bpmn.Process, in Instance, tr Trigger, opt Options) (State, Effects, error) {
	s := newStepper(def, &in, opt.Now)
	s.ctx, s.limits, s.decisions = ctx, opt.Limits, opt.Decisions
	if err := s.apply(tr); err != nil {
		return State{}, Effects{}, err
	}
	if err := s.run(); err != nil {
		return State{}, Effects{}, err
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return State{}, Effects{}, fmt.Errorf("step of %s abandoned: %w", in.ID, context.Cause(ctx))
	}
	return s.result(), s.eff, nil
}

// stepper is the working state of one step. Tokens are addressed by index
// because appending may move the slice; a dead token has Element "".
type stepper struct {
	def *bpmn.Process
	in  *Instance
	now time.Time
	// ctx bounds the step (StepContext); limits bound each evaluation.
	ctx       context.Context
	limits    feel.Limits
	decisions Decisions

	tokens []Token
	queue  []int
	vars   map[string]any
	// ownVars is set once vars is a copy this step may write; it is cleared
	// when vars is handed out (task variables) so the next write copies again.
	ownVars bool
	// owned lists the tokens (by index) whose Vars map this step made, and
	// may therefore write; the others' belong to in.State.
	owned []int
	// armed are the process level's waits (State.Armed).
	armed  []Armed
	parent *ParentRef
	seq    int64
	eff    Effects
	// ended is the status the instance ends in this step ("" = still active).
	ended Status
	runs  int
	// retryRetries overrides the retries of the task a retry re-creates.
	retryRetries int
	// seeds counts the evaluations that read a seed (see env).
	seeds int
	// comp are the compensable completions (State.Compensable); the slice
	// is replaced, never written in place: it may be in.State's.
	comp []Compensable
	// then is what the instance does once its terminating tokens have
	// ended (State.Then).
	then *Then
	// fail, once set, fails the step.
	fail error
}

func newStepper(def *bpmn.Process, in *Instance, now time.Time) *stepper {
	s := &stepper{
		def:    def,
		in:     in,
		now:    now,
		ctx:    context.Background(), // StepContext sets the step's own
		tokens: make([]Token, len(in.State.Tokens), len(in.State.Tokens)+2),
		vars:   in.State.Variables,
		armed:  slices.Clip(in.State.Armed),
		parent: in.State.Parent,
		seq:    in.State.Seq,
		comp:   in.State.Compensable,
		then:   in.State.Then,
	}
	copy(s.tokens, in.State.Tokens)
	return s
}

func (s *stepper) apply(tr Trigger) error {
	if tr.Kind == TriggerStart {
		return s.start(tr)
	}
	if !s.in.State.Status.Live() {
		return fault.New(fault.NotWaiting, "instance %s is %s", s.in.ID, statusName(s.in.State.Status))
	}
	switch tr.Kind {
	case TriggerMessage:
		return s.message(tr)
	case TriggerTimer:
		return s.timer(tr)
	case TriggerSignal:
		return s.signal(tr)
	case TriggerTaskCompleted, TriggerTaskFailed, TriggerTaskError:
		return s.task(tr)
	case TriggerTaskAssign:
		return s.assign(tr)
	case TriggerTaskUpdate:
		return s.update(tr)
	case TriggerChildCompleted:
		return s.childCompleted(tr)
	case TriggerChildFailed:
		return s.childFailed(tr)
	case TriggerChildEscalated:
		return s.childEscalated(tr)
	case TriggerCancel:
		s.cancel()
		return nil
	case TriggerRetry:
		return s.retry(tr)
	case TriggerModify:
		return s.modify(tr)
	}
	return fault.New(fault.StepFailed, "unknown trigger kind %q", tr.Kind)
}

func statusName(st Status) string {
	if st == "" {
		return "not started"
	}
	return string(st)
}

// start starts the instance at the none start event or, when tr.Element
// names one, at a message start event whose payload tr.Variables is, or at
// a timer start event (whose result tr.Variables is, normally none).
func (s *stepper) start(tr Trigger) error {
	if s.in.State.Status != "" || len(s.in.State.Tokens) > 0 || s.in.State.Seq != 0 {
		return fault.New(fault.InstanceExists, "instance %s is already started", s.in.ID)
	}
	el := s.def.Start
	if tr.Element != "" {
		el = s.def.Element(tr.Element)
		if el == nil || el.Kind != bpmn.KindStart || !el.Armable() || el.Parent != nil {
			return fault.New(fault.NoStartEvent, "process %s has no message, timer or signal start event %q", s.def.ID, tr.Element)
		}
	} else if el == nil {
		return fault.New(fault.NoStartEvent, "process %s has no none start event: it starts by messages, timers or signals", s.def.ID)
	}
	// An instance's variables are always an object, even when started without any.
	s.vars, s.ownVars = make(map[string]any, len(tr.Variables)+4), true
	s.parent = tr.Parent
	i := s.add(el, "", "")
	result := tr.Variables
	if el == s.def.Start {
		s.merge(tr.Variables)
		result = nil
	}
	// The process's start listeners run before its start event.
	if self := s.def.Self(); !s.listen(i, self, bpmn.ListenerStart, result) {
		s.startAt(i, el, result)
	}
	return nil
}

// startAt runs the new instance's token i from start event el: the none
// start event runs; a message, timer or signal start event completes with
// result, which its outputs map.
func (s *stepper) startAt(i int, el *bpmn.Element, result map[string]any) {
	if el == s.def.Start {
		s.queue = append(s.queue, i)
		return
	}
	s.complete(i, el, result)
}

// message resumes the first wait subscribed to tr.Message with a matching
// correlation key: the tokens' waits in token order, then the process level's.
func (s *stepper) message(tr Trigger) error {
	match := func(a Armed) *bpmn.Element {
		el := s.def.Element(a.Element)
		if el == nil || el.Message == nil {
			return nil
		}
		name := a.Message // evaluated when the subscription opened
		if name == "" {
			name = el.Message.Name
		}
		if name != tr.Message {
			return nil
		}
		if tr.CorrelationKey != "" && a.Key != tr.CorrelationKey {
			return nil
		}
		return el
	}
	for i := range s.tokens {
		for _, a := range s.tokens[i].Armed {
			if el := match(a); el != nil {
				s.fire(i, el, tr.Variables)
				return nil
			}
		}
	}
	for _, a := range s.armed {
		if el := match(a); el != nil {
			s.fire(-1, el, tr.Variables)
			return nil
		}
	}
	if tr.CorrelationKey != "" {
		return fault.New(fault.NotWaiting, "instance %s has no subscription to message %q with key %q",
			s.in.ID, tr.Message, tr.CorrelationKey)
	}
	return fault.New(fault.NotWaiting, "instance %s has no subscription to message %q", s.in.ID, tr.Message)
}

// signal resumes the signal wait (tr.TokenID, tr.Element) a broadcast of
// tr.Signal reached; TokenID "" is the process level. A non-interrupting
// boundary event or event subprocess start keeps its wait, so the next
// broadcast reaches it again.
func (s *stepper) signal(tr Trigger) error {
	el := s.def.Element(tr.Element)
	i, a, ok := s.armedAt(tr.TokenID, tr.Element)
	if ok && el != nil && el.Signal != nil {
		name := a.Message // evaluated when the subscription opened
		if name == "" {
			name = el.Signal.Name
		}
		if name == tr.Signal {
			s.fire(i, el, tr.Variables)
			return nil
		}
	}
	return fault.New(fault.NotWaiting, "instance %s has no subscription to signal %q at %s on token %s", s.in.ID, tr.Signal, tr.Element, tr.TokenID)
}

// timer fires the timer wait (tr.TokenID, tr.Element); TokenID "" is the
// process level.
func (s *stepper) timer(tr Trigger) error {
	el := s.def.Element(tr.Element)
	i, a, ok := s.armedAt(tr.TokenID, tr.Element)
	if !ok || el == nil || el.Timer == nil {
		return fault.New(fault.NotWaiting, "instance %s has no timer %s on token %s", s.in.ID, tr.Element, tr.TokenID)
	}
	if (el.Kind == bpmn.KindBoundary || el.IsEventSubStart()) && !el.Interrupting {
		s.rearm(i, el, a)
	}
	s.fire(i, el, nil)
	return nil
}

// armedAt finds the wait on element of the live token id (-1 and the process
// level's wait for id "").
func (s *stepper) armedAt(id, element string) (int, Armed, bool) {
	if id == "" {
		for _, a := range s.armed {
			if a.Element == element {
				return -1, a, true
			}
		}
		return -1, Armed{}, false
	}
	for i := range s.tokens {
		if s.tokens[i].ID != id || s.tokens[i].Element == "" {
			continue
		}
		for _, a := range s.tokens[i].Armed {
			if a.Element == element {
				return i, a, true
			}
		}
	}
	return -1, Armed{}, false
}

// fire resumes through its wait on el: token i's own element, an event after
// its event-based gateway, a boundary event of its activity, or the start
// event of an event subprocess of the scope token i opens (-1 = process
// level). result is the event's output (a message payload).
func (s *stepper) fire(i int, el *bpmn.Element, result map[string]any) {
	switch {
	case el.IsEventSubStart():
		s.triggerEventSub(i, el, result)
	case el.Kind != bpmn.KindBoundary:
		tok := &s.tokens[i]
		flow := tok.Flow
		if tok.Element != el.ID { // an event after an event-based gateway
			flow = incomingFrom(el, tok.Element)
			s.pass(tok.Element)
			s.pass(flow)
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

// task applies a pull task's completion, failure or BPMN error, or one of
// a listener's job.
func (s *stepper) task(tr Trigger) error {
	if i := s.waiting(tr.TokenID, tr.Element, WaitAdHoc); i >= 0 {
		return s.adHocJob(i, s.def.Element(s.tokens[i].Element), tr)
	}
	if i := s.listenerAt(tr.TokenID, tr.Element); i >= 0 {
		s.listenerOutcome(i, tr)
		return nil
	}
	i := s.waiting(tr.TokenID, tr.Element, WaitTask)
	if i < 0 {
		return fault.New(fault.NotWaiting, "instance %s has no task on token %s", s.in.ID, tr.TokenID)
	}
	el := s.def.Element(s.tokens[i].Element)
	switch tr.Kind {
	case TriggerTaskCompleted:
		// A user task's completing listeners hold its completion back: it
		// stays open (completing) until the last of them completes.
		if s.listen(i, el, bpmn.ListenerCompleting, tr.Variables) {
			return nil
		}
		s.resume(i)
		s.complete(i, el, tr.Variables)
	case TriggerTaskFailed:
		s.closeWaits(i, el.ID)
		if tr.Retries <= 0 {
			s.taskIncident(i, "task failed with no retries left: "+tr.ErrorMessage, StageActivate, tr)
			return nil
		}
		s.recreateTask(i, el, tr)
	case TriggerTaskError:
		s.throw(i, tr.ErrorCode, tr.Variables)
	}
	return nil
}

// waiting finds the live token id parked in a wait of kind (at element, if
// set), or -1.
func (s *stepper) waiting(id, element string, kind WaitKind) int {
	for j := range s.tokens {
		t := &s.tokens[j]
		if t.ID == id && t.Wait == kind && (element == "" || element == t.Element) {
			return j
		}
	}
	return -1
}

// recreateTask opens token i's task at el again (it was closed), with
// the retries tr leaves (0 = the definition's) and, after a failure, its
// error and, with a retry timeout, fetchable only later.
func (s *stepper) recreateTask(i int, el *bpmn.Element, tr Trigger) {
	task, err := s.newTask(i, el, s.view(i))
	if err != nil {
		s.exprIncident(i, err, err.Error(), StageActivate)
		return
	}
	if tr.Retries > 0 {
		task.Retries = tr.Retries
	}
	if tr.RetryTimeout > 0 {
		task.NotBefore = s.now.Add(tr.RetryTimeout)
	}
	task.ErrorMessage, task.ErrorDetails = tr.ErrorMessage, tr.ErrorDetails
	s.eff.Tasks = append(s.eff.Tasks, task)
	s.tokens[i].Wait = WaitTask
	if el.Kind == bpmn.KindAdHoc {
		s.tokens[i].Wait = WaitAdHoc // the job of an ad-hoc subprocess, beside its activations
	}
	s.addArmed(i, Armed{Element: el.ID})
}

// run executes queued tokens until every token waits or has ended, or the
// step fails.
func (s *stepper) run() error {
	for len(s.queue) > 0 && s.fail == nil {
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
		if s.ctx.Err() != nil {
			// Past the deadline (or cancelled, which StepContext then
			// abandons): the token stops before its element, which a retry
			// runs.
			s.incident(i, fault.IncidentExpressionLimit, fmt.Sprintf("%s: the step's deadline (%s) passed before it ran",
				s.tokens[i].Element, feel.LimitDeadline), StageActivate)
			continue
		}
		s.execute(i)
	}
	return s.fail
}

// execute activates the element token i has just reached.
func (s *stepper) execute(i int) {
	el := s.def.Element(s.tokens[i].Element)
	if el.Loop != nil && s.tokens[i].Loop == 0 {
		// Its beforeAll listeners run on the body, before its input
		// collection is evaluated.
		if !s.listen(i, el, bpmn.ListenerBeforeAll, nil) {
			s.multi(i, el)
		}
		return
	}
	if len(el.Inputs) > 0 && !bpmn.Publishes(el) && !s.localInputs(i, el) {
		return
	}
	// Start listeners run once the input mappings are applied, before
	// anything of the element's own: then activate.
	if !s.listen(i, el, bpmn.ListenerStart, nil) {
		s.activate(i, el)
	}
}

// activate runs what el does for token i, its inputs applied and its start
// listeners done.
func (s *stepper) activate(i int, el *bpmn.Element) {
	switch el.Kind {
	case bpmn.KindStart:
		s.complete(i, el, nil)
	case bpmn.KindThrow, bpmn.KindEnd:
		if el.Compensation != nil {
			s.compensate(i, el)
			return
		}
		if el.Escalation != nil {
			code, ok := s.thrownCode(i, el, el.Escalation, "escalation code")
			if !ok || !s.escalate(i, code, false) {
				return // an incident, or an interrupting catch ended the thrower
			}
		}
		if s.publish(i, el) {
			s.complete(i, el, nil)
		}
	case bpmn.KindTerminateEnd, bpmn.KindLink:
		s.complete(i, el, nil)
	case bpmn.KindErrorEnd:
		if code, ok := s.thrownCode(i, el, el.Error, "error code"); ok {
			if vars, ok := s.errorVariables(i, el); ok {
				s.pass(el.ID) // it threw: no token completes it
				s.throw(i, code, vars)
			}
		}
	case bpmn.KindMessageCatch:
		s.park(i, el, WaitMessage)
	case bpmn.KindTimerCatch:
		s.park(i, el, WaitTimer)
	case bpmn.KindSignalCatch:
		s.park(i, el, WaitSignal)
	case bpmn.KindTask:
		// A Camunda user task's creating listeners run before it is
		// created, then its assigning listeners if it has an assignee.
		if !s.listen(i, el, bpmn.ListenerCreating, nil) && !s.assignOnCreate(i, el) {
			s.park(i, el, WaitTask)
		}
	case bpmn.KindEventGateway:
		s.park(i, el, WaitEvent)
	case bpmn.KindCallActivity:
		s.park(i, el, WaitChild)
	case bpmn.KindScript:
		s.script(i, el)
	case bpmn.KindDecision:
		s.decide(i, el)
	case bpmn.KindSubProcess:
		if s.park(i, el, WaitScope) {
			s.spawn(el.SubStart, s.tokens[i].ID, "")
		}
	case bpmn.KindEventSubProcess:
		s.activateEventSub(i, el, nil)
	case bpmn.KindAdHoc:
		s.adHoc(i, el)
	case bpmn.KindExclusive:
		s.exclusive(i, el)
	case bpmn.KindInclusive:
		s.inclusive(i, el)
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

// complete applies el's outputs to result and moves token i on, once el's
// end listeners, if it has any, are done.
func (s *stepper) complete(i int, el *bpmn.Element, result map[string]any) {
	if !s.outputs(i, el, result) || s.listen(i, el, bpmn.ListenerEnd, nil) {
		return
	}
	s.after(i, el)
}

// after moves token i on from el once el's outputs are applied.
func (s *stepper) after(i int, el *bpmn.Element) {
	s.pass(el.ID)
	s.compensated(i, el)
	switch {
	case s.tokens[i].Activation:
		s.activationDone(i)
	case s.tokens[i].Loop > 0:
		s.innerDone(i, el)
	case el.Kind == bpmn.KindEnd:
		s.end(i)
	case el.Kind == bpmn.KindTerminateEnd:
		s.terminate(i)
	case el.Kind == bpmn.KindLink:
		t := &s.tokens[i]
		t.Element, t.Flow, t.Vars = el.LinkTarget.ID, "", nil
		s.queue = append(s.queue, i)
	case el.Kind == bpmn.KindStart && el.Parent == nil:
		// The process runs from here: its event subprocesses may start, their
		// correlation keys seeing the start variables.
		if s.armProcess(i) {
			s.leave(i, el.Outgoing)
		}
	default:
		s.leave(i, el.Outgoing)
	}
}

// leave moves token i along flows: the token takes the first, new tokens take
// the others (an implicit parallel split); no flow ends the token. The token
// leaves its element's local variables behind.
func (s *stepper) leave(i int, flows []*bpmn.Flow) {
	if len(flows) == 0 {
		s.end(i)
		return
	}
	t := &s.tokens[i]
	s.pass(t.Element) // a gateway or a multi-instance body leaves without after
	for _, f := range flows {
		s.pass(f.ID)
	}
	t.Element, t.Flow, t.Wait, t.Incident, t.Vars = flows[0].Target.ID, flows[0].ID, "", nil, nil
	s.queue = append(s.queue, i)
	scope := t.Scope
	for _, f := range flows[1:] {
		s.spawn(f.Target, scope, f.ID)
	}
}

// pass records that a token passed element or flow id (Effects.Passed),
// once when it completes an element and then leaves it, up to MaxPassed.
func (s *stepper) pass(id string) {
	p := s.eff.Passed
	switch {
	case len(p) > 0 && p[len(p)-1] == id:
	case len(p) == MaxPassed:
		s.eff.PassedCut = true
	case p == nil:
		s.eff.Passed = append(make([]string, 0, 16), id) // one allocation for most steps' paths
	default:
		s.eff.Passed = append(p, id)
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

// armedOf returns the id and open waits of token i, or of the process level
// for i < 0.
func (s *stepper) armedOf(i int) (string, *[]Armed) {
	if i < 0 {
		return "", &s.armed
	}
	return s.tokens[i].ID, &s.tokens[i].Armed
}

// addArmed records a wait opened for token i (-1 = process level). The slice
// may share its array with in.State, so it is clipped to copy on append.
func (s *stepper) addArmed(i int, a Armed) {
	_, armed := s.armedOf(i)
	*armed = append(slices.Clip(*armed), a)
}

// closeWaits closes the waits of token i (-1 = process level) on element
// ("" = all of them). Rows opened earlier in this step are dropped from the
// effects; rows that existed before it are listed in CloseWaits for the
// store to delete.
func (s *stepper) closeWaits(i int, element string) {
	id, armed := s.armedOf(i)
	if len(*armed) == 0 {
		return
	}
	match := func(tok, el string) bool { return tok == id && (element == "" || el == element) }
	s.eff.Subscriptions = slices.DeleteFunc(s.eff.Subscriptions, func(x Subscription) bool { return match(x.TokenID, x.Element) })
	s.eff.Timers = slices.DeleteFunc(s.eff.Timers, func(x Timer) bool { return match(x.TokenID, x.Element) })
	s.eff.Tasks = slices.DeleteFunc(s.eff.Tasks, func(x Task) bool { return match(x.TokenID, x.Element) })
	if s.hadRows(i, element) {
		s.eff.CloseWaits = append(s.eff.CloseWaits, WaitRef{TokenID: id, Element: element})
	}
	if element == "" {
		*armed = nil
		return
	}
	// Copy rather than delete in place: the backing array belongs to in.State.
	kept := make([]Armed, 0, len(*armed))
	for _, a := range *armed {
		if a.Element != element {
			kept = append(kept, a)
		}
	}
	*armed = kept
}

// hadRows reports whether token i (-1 = process level) had a wait on element
// ("" = any) in the state the step started from, i.e. whether the store
// holds rows for it.
func (s *stepper) hadRows(i int, element string) bool {
	var before []Armed
	if i < 0 {
		before = s.in.State.Armed
	} else {
		old := s.in.State.Tokens
		if i >= len(old) || old[i].ID != s.tokens[i].ID {
			return false
		}
		before = old[i].Armed
	}
	for _, a := range before {
		if element == "" || a.Element == element {
			return true
		}
	}
	return false
}

// end removes token i and completes its scope when it was the scope's
// last token; a compensation handler's end may complete its throw instead.
func (s *stepper) end(i int) {
	scope, comp := s.tokens[i].Scope, s.tokens[i].Comp
	s.kill(i)
	if comp != "" && s.handled(comp) {
		return
	}
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
		if s.processEnd() {
			return
		}
		s.closeWaits(-1, "")
		s.ended = StatusCompleted
		return
	}
	j := s.indexOf(scope)
	if s.tokens[j].Activation {
		s.activationDone(j)
		return
	}
	el := s.def.Element(s.tokens[j].Element)
	s.resume(j)
	s.rekeyCompensable(scope, s.tokens[j].ID)
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

// kill ends token i, closing its waits; what completed inside it can no
// longer be compensated.
func (s *stepper) kill(i int) {
	s.release(i)
	s.dropCompensable(s.tokens[i].ID)
	s.tokens[i] = Token{}
}

// release lets go of what token i holds besides its store rows: the child
// instance of a call activity (cancelled) and an open incident (resolved).
// Its waits are closed.
func (s *stepper) release(i int) {
	s.closeWaits(i, "")
	t := &s.tokens[i]
	if t.Wait == WaitListener {
		s.closeListener(i)
	}
	t.Listener = nil
	switch t.Wait {
	case WaitChild:
		child := s.in.ID + "/" + t.ID
		n := len(s.eff.StartChildren)
		s.eff.StartChildren = slices.DeleteFunc(s.eff.StartChildren, func(c ChildStart) bool { return c.InstanceID == child })
		if len(s.eff.StartChildren) == n {
			s.eff.CancelChildren = append(s.eff.CancelChildren, child)
		}
	case WaitIncident:
		n := len(s.eff.Incidents)
		s.eff.Incidents = slices.DeleteFunc(s.eff.Incidents, func(x Incident) bool { return x.TokenID == t.ID })
		if len(s.eff.Incidents) == n {
			s.eff.ResolvedIncidents = append(s.eff.ResolvedIncidents, t.ID)
		}
	}
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

// killAll ends every token of the instance.
func (s *stepper) killAll() {
	for j := range s.tokens {
		if s.tokens[j].Element != "" {
			s.kill(j)
		}
	}
}

// terminate ends every token of token i's scope, then the scope itself.
func (s *stepper) terminate(i int) {
	scope, j := s.tokens[i].Scope, s.parentOf(i)
	s.kill(i)
	if s.halt(j, Then{Kind: ThenTerminate}) {
		// Nothing starts in the scope while it ends.
		for _, esp := range s.eventSubs(j) {
			s.closeWaits(j, esp.SubStart.ID)
		}
		return
	}
	s.scopeDone(scope)
}

// interrupt ends activity token i (and everything inside it) and continues it
// from boundary event b, once whatever of it cancels through listeners has
// ended.
func (s *stepper) interrupt(i int, b *bpmn.Element, result map[string]any) {
	s.pass(s.tokens[i].Element)
	then := Then{Kind: ThenBoundary, Element: b.ID, Result: result}
	switch {
	case s.halt(i, then):
		s.release(i)
		s.tokens[i].Wait = WaitTerminating
		return
	case s.def.ListensCanceling() && s.cancels(i):
		s.startCanceling(i)
		s.tokens[i].Then = &then
		return
	}
	s.release(i)
	s.interrupted(i, b, result)
}

// interrupted continues activity token i, ended, from boundary event b.
func (s *stepper) interrupted(i int, b *bpmn.Element, result map[string]any) {
	s.dropCompensable(s.tokens[i].ID)
	s.resume(i)
	t := &s.tokens[i]
	t.Element, t.Flow, t.Vars, t.Loop, t.Multi, t.Fulfilled = b.ID, "", nil, 0, Multi{}, false
	s.complete(i, b, result)
}

// incident stops token i where it is; a retry resumes it at stage. A token
// parked at an element whose start listeners ran resumes after them.
func (s *stepper) incident(i int, code, msg string, stage Stage) {
	t := &s.tokens[i]
	if stage == StageActivate && t.Wait != "" && t.Listener == nil && len(s.def.Element(t.Element).ListenersOf(bpmn.ListenerStart)) > 0 {
		stage = StageBehaviour
	}
	inc := Incident{TokenID: t.ID, Element: t.Element, Code: code, Message: msg, Stage: stage}
	t.Wait, t.Incident = WaitIncident, &inc
	s.eff.Incidents = append(s.eff.Incidents, inc)
}

// taskIncident stops token i in an incident for its task (or listener
// job), which tr failed with no retries left, keeping the worker's message
// and details with it.
func (s *stepper) taskIncident(i int, msg string, stage Stage, tr Trigger) {
	s.incident(i, fault.IncidentTaskFailed, msg, stage)
	inc := &s.eff.Incidents[len(s.eff.Incidents)-1]
	inc.ErrorMessage, inc.ErrorDetails = tr.ErrorMessage, tr.ErrorDetails
}

// exprIncident stops token i in an incident for the evaluation that failed
// with err: fault.IncidentExpressionLimit when a limit cut it off,
// fault.IncidentExpression otherwise.
func (s *stepper) exprIncident(i int, err error, msg string, stage Stage) {
	code := fault.IncidentExpression
	if feel.IsLimit(err) {
		code = fault.IncidentExpressionLimit
	}
	s.incident(i, code, msg, stage)
}

// result assembles the state after the step.
func (s *stepper) result() State {
	st := State{Status: StatusActive, Variables: s.vars, Seq: s.seq, Armed: s.armed, Parent: s.parent, Compensable: s.comp,
		Escalated: s.in.State.Escalated, Then: s.then}
	if s.then != nil && s.then.Kind == ThenCancel {
		st.Status = StatusCancelling
	}
	live := 0
	for _, t := range s.tokens {
		if t.Element != "" {
			live++
		}
	}
	if live > 0 {
		st.Tokens = make([]Token, 0, live)
	}
	for _, t := range s.tokens {
		if t.Element != "" {
			st.Tokens = append(st.Tokens, t)
		}
	}
	if s.ended != "" {
		st.Status, st.Compensable, st.Then = s.ended, nil, nil
	}
	s.eff.compact()
	if s.ended == StatusCompleted {
		s.eff.Completed = true
		if s.parent != nil {
			s.eff.NotifyParent = &ChildResult{Parent: *s.parent, Variables: s.shareVars()}
		}
	}
	if p := s.eff.NotifyParent; p != nil {
		p.Escalated = st.Escalated // this step's escalations ride in its relay
	} else if s.eff.EscalateParent != nil {
		st.Escalated++
	}
	return st
}

// compact drops effect lists left empty by rows opened and closed within the
// step, so that "nothing to write" is always nil.
func (e *Effects) compact() {
	if len(e.Subscriptions) == 0 {
		e.Subscriptions = nil
	}
	if len(e.Timers) == 0 {
		e.Timers = nil
	}
	if len(e.Tasks) == 0 {
		e.Tasks = nil
	}
	if len(e.Incidents) == 0 {
		e.Incidents = nil
	}
	if len(e.StartChildren) == 0 {
		e.StartChildren = nil
	}
}
