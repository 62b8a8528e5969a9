package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/dmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/iso8601"
)

// park puts token i in a wait of kind at el and opens the wait's rows: el's
// own subscription, timer or task (or, at an event-based gateway, those of
// the events after it; at a call activity, its child), those of el's
// boundary events and, for a scope, those of its event subprocesses. Every
// value is evaluated before anything is opened, so an expression that fails
// leaves the token in an incident with no row opened.
func (s *stepper) park(i int, el *bpmn.Element, kind WaitKind) bool {
	mark := s.mark()
	armed, err := s.openWaits(i, el, kind)
	if err != nil {
		s.rollback(mark)
		s.exprIncident(i, err, err.Error(), StageActivate)
		return false
	}
	s.tokens[i].Wait, s.tokens[i].Armed = kind, armed
	return true
}

func (s *stepper) openWaits(i int, el *bpmn.Element, kind WaitKind) ([]Armed, error) {
	id, ctx := s.tokens[i].ID, s.view(i)
	armed := make([]Armed, 0, 1+len(el.Boundaries))
	var err error
	switch kind {
	case WaitMessage, WaitTimer, WaitSignal:
		armed, err = s.openEvent(id, el, ctx, armed)
	case WaitEvent:
		for _, f := range el.Outgoing {
			if armed, err = s.openEvent(id, f.Target, ctx, armed); err != nil {
				return nil, err
			}
		}
	case WaitTask:
		var task Task
		if task, err = s.newTask(i, el, ctx); err == nil {
			s.eff.Tasks = append(s.eff.Tasks, task)
			armed = append(armed, Armed{Element: el.ID})
		}
	case WaitChild:
		err = s.startChild(i, el, ctx)
	case WaitAdHoc:
		if el.Task != nil { // its job worker chooses what to activate
			var task Task
			if task, err = s.newTask(i, el, ctx); err == nil {
				s.eff.Tasks = append(s.eff.Tasks, task)
				armed = append(armed, Armed{Element: el.ID})
			}
		}
	case WaitScope:
		for _, esp := range el.EventSubs {
			if start := esp.SubStart; start.Armable() {
				if armed, err = s.openEvent(id, start, ctx, armed); err != nil {
					return nil, err
				}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if s.tokens[i].Loop > 0 {
		return armed, nil // an inner instance: boundary events belong to its body
	}
	for _, b := range el.Boundaries {
		if !b.Armable() {
			continue // error and escalation boundary events have no row: they are found when thrown
		}
		if armed, err = s.openEvent(id, b, ctx, armed); err != nil {
			return nil, err
		}
	}
	return armed, nil
}

// openEvent opens the subscription or timer of message, signal or timer
// event el for token id, evaluating over ctx.
func (s *stepper) openEvent(id string, el *bpmn.Element, ctx map[string]any, armed []Armed) ([]Armed, error) {
	if el.Signal != nil {
		name, err := s.eventName(el, el.Signal.Name, el.Signal.NameExpression, id, ctx)
		if err != nil {
			return nil, fmt.Errorf("signal name of %s: %w", el.ID, err)
		}
		s.eff.Subscriptions = append(s.eff.Subscriptions, Subscription{TokenID: id, Element: el.ID, Message: name, Signal: true})
		a := Armed{Element: el.ID}
		if el.Signal.NameExpression != nil {
			a.Message = name
		}
		return append(armed, a), nil
	}
	if el.Message != nil {
		name, err := s.messageName(el, id, ctx)
		if err != nil {
			return nil, fmt.Errorf("message name of %s: %w", el.ID, err)
		}
		key, err := s.correlationKey(el, id, ctx)
		if err != nil {
			return nil, fmt.Errorf("correlation key of %s: %w", el.ID, err)
		}
		s.eff.Subscriptions = append(s.eff.Subscriptions, Subscription{
			TokenID: id, Element: el.ID, Message: name, CorrelationKey: key,
		})
		a := Armed{Element: el.ID, Key: key}
		if el.Message.NameExpression != nil {
			a.Message = name
		}
		return append(armed, a), nil
	}
	due, interval, left, err := s.due(el, id, ctx)
	if err != nil {
		return nil, fmt.Errorf("timer %s: %w", el.ID, err)
	}
	s.eff.Timers = append(s.eff.Timers, Timer{TokenID: id, Element: el.ID, DueAt: due, Repeat: left, Interval: interval})
	return append(armed, Armed{Element: el.ID, Left: left}), nil
}

// effectsMark records the lengths of the effect lists that park appends to.
type effectsMark struct{ subs, timers, tasks, children int }

func (s *stepper) mark() effectsMark {
	return effectsMark{len(s.eff.Subscriptions), len(s.eff.Timers), len(s.eff.Tasks), len(s.eff.StartChildren)}
}

func (s *stepper) rollback(m effectsMark) {
	s.eff.Subscriptions = s.eff.Subscriptions[:m.subs]
	s.eff.Timers = s.eff.Timers[:m.timers]
	s.eff.Tasks = s.eff.Tasks[:m.tasks]
	s.eff.StartChildren = s.eff.StartChildren[:m.children]
}

// messageName evaluates the name of el's message for token.
func (s *stepper) messageName(el *bpmn.Element, token string, ctx map[string]any) (string, error) {
	return s.eventName(el, el.Message.Name, el.Message.NameExpression, token, ctx)
}

// eventName evaluates the name of el's message or signal for token: its
// static name, or its expression e, which must yield a non-empty string (as
// Zeebe requires a string).
func (s *stepper) eventName(el *bpmn.Element, name string, e *feel.Expr, token string, ctx map[string]any) (string, error) {
	if e == nil {
		return name, nil
	}
	v, err := e.EvalIn(ctx, s.env(e, el, token))
	if err != nil {
		return "", err
	}
	name, ok := v.(string)
	if !ok || name == "" {
		return "", fmt.Errorf("%q evaluated to %s, not a non-empty string", e.Source(), valueName(v))
	}
	return name, nil
}

// valueName names a value's JSON type for messages.
func valueName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "an empty string"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a context"
	}
	return "a number"
}

// correlationKey evaluates the key of el's message for token ("" when the
// message has none).
func (s *stepper) correlationKey(el *bpmn.Element, token string, ctx map[string]any) (string, error) {
	k := el.Message.CorrelationKey
	if k == nil {
		return "", nil
	}
	return k.EvalStringIn(ctx, s.env(k, el, token))
}

// newTask builds the pull task of token i at el from ctx, the variables
// visible at the token (s.view(i)). The task carries its own input only
// (s.input): the worker sees the instance variables beside it, read when it
// fetches the task, as a Zeebe job or a Camunda external task does.
func (s *stepper) newTask(i int, el *bpmn.Element, ctx map[string]any) (Task, error) {
	tok := s.tokens[i].ID
	typ, err := el.Task.Type.EvalStringIn(ctx, s.env(el.Task.Type, el, tok))
	if err != nil {
		return Task{}, fmt.Errorf("task type of %s: %w", el.ID, err)
	}
	retries := s.retryRetries
	if retries <= 0 {
		r, err := el.Task.Retries.EvalIn(ctx, s.env(el.Task.Retries, el, tok))
		if err != nil {
			return Task{}, fmt.Errorf("task retries of %s: %w", el.ID, err)
		}
		var ok bool
		if retries, ok = asInt(r); !ok || retries < 0 {
			return Task{}, fmt.Errorf("task retries of %s: %v is not a non-negative integer", el.ID, r)
		}
	}
	task := Task{TokenID: tok, Element: el.ID, Type: typ, Retries: retries, Headers: el.Task.Headers}
	if el.User != nil {
		if task.User, err = s.userTask(el, tok, ctx); err != nil {
			return Task{}, err
		}
	}
	task.Variables = s.input(i)
	return task, nil
}

// asInt reads a retries value: static text, or a FEEL number (float64).
func asInt(v any) (int, bool) {
	switch v := v.(type) {
	case float64:
		return int(v), float64(int(v)) == v
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

// userTask evaluates the assignment, schedule and priority of user task el
// for token.
func (s *stepper) userTask(el *bpmn.Element, token string, ctx map[string]any) (*UserTask, error) {
	d := el.User
	u := &UserTask{FormKey: d.FormKey, FormID: d.FormID, Priority: 50}
	var err error
	if d.Assignee != nil {
		if u.Assignee, err = d.Assignee.EvalStringIn(ctx, s.env(d.Assignee, el, token)); err != nil {
			return nil, fmt.Errorf("assignee of %s: %w", el.ID, err)
		}
	}
	if u.CandidateGroups, err = s.candidates(d.CandidateGroups, el, token, ctx); err != nil {
		return nil, fmt.Errorf("candidate groups of %s: %w", el.ID, err)
	}
	if u.CandidateUsers, err = s.candidates(d.CandidateUsers, el, token, ctx); err != nil {
		return nil, fmt.Errorf("candidate users of %s: %w", el.ID, err)
	}
	if u.DueDate, err = s.dateTime(d.DueDate, el, token, ctx); err != nil {
		return nil, fmt.Errorf("due date of %s: %w", el.ID, err)
	}
	if u.FollowUpDate, err = s.dateTime(d.FollowUpDate, el, token, ctx); err != nil {
		return nil, fmt.Errorf("follow-up date of %s: %w", el.ID, err)
	}
	if d.Priority != nil {
		v, err := d.Priority.EvalIn(ctx, s.env(d.Priority, el, token))
		if err == nil {
			u.Priority, err = bpmn.UserTaskPriority(v)
		}
		if err != nil {
			return nil, fmt.Errorf("priority of %s: %w", el.ID, err)
		}
	}
	return u, nil
}

// candidates evaluates a candidate list: a list of strings, or a string of
// comma-separated names.
func (s *stepper) candidates(e *feel.Expr, el *bpmn.Element, token string, ctx map[string]any) ([]string, error) {
	if e == nil {
		return nil, nil
	}
	v, err := e.EvalIn(ctx, s.env(e, el, token))
	if err != nil {
		return nil, err
	}
	var out []string
	switch v := v.(type) {
	case string:
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				out = append(out, name)
			}
		}
	case []any:
		for _, x := range v {
			name, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("the list holds %T, not only strings", x)
			}
			out = append(out, name)
		}
	default:
		return nil, fmt.Errorf("evaluated to %T, not a list of strings or a comma-separated string", v)
	}
	return out, nil
}

// dateTime evaluates an optional RFC 3339 date-time ("" when unset).
func (s *stepper) dateTime(e *feel.Expr, el *bpmn.Element, token string, ctx map[string]any) (string, error) {
	if e == nil {
		return "", nil
	}
	text, err := e.EvalStringIn(ctx, s.env(e, el, token))
	if err != nil {
		return "", err
	}
	if _, err := iso8601.ParseDateTime(text); err != nil {
		return "", errors.New(fault.Reason(err))
	}
	return text, nil
}

// script evaluates a script task's expression; its value, under the result
// variable, is the task's result.
func (s *stepper) script(i int, el *bpmn.Element) {
	e := el.Script.Expression
	v, err := e.EvalIn(s.view(i), s.env(e, el, s.tokens[i].ID))
	if err != nil {
		s.exprIncident(i, err, fmt.Sprintf("script of %s: %v", el.ID, err), StageActivate)
		return
	}
	s.complete(i, el, map[string]any{el.Script.ResultVariable: v})
}

// decide evaluates a business rule task's decision over the variables
// visible to the token; its output, under the result variable, is the
// task's result. A decision not deployed, or one that fails, stops the
// token in an incident that a retry resolves by evaluating again.
func (s *stepper) decide(i int, el *bpmn.Element) {
	cd := el.Decision
	d, ok := s.decisions[cd.DecisionRef]
	if !ok {
		d.Missing = "it was not looked up for this step"
	}
	if d.Definitions == nil {
		s.incident(i, fault.IncidentDecisionFailed, fmt.Sprintf("decision %q of %s: %s", cd.DecisionID, el.ID, d.Missing), StageActivate)
		return
	}
	// A decision's expressions are not known to the step, so every
	// evaluation gets a seed, as an expression calling uuid() does.
	env := feel.Env{Now: s.now, Limits: s.limits, Seed: s.seed(el, s.tokens[i].ID)}
	res, err := d.Definitions.Evaluate(s.ctx, cd.DecisionID, s.view(i), dmn.Options{Env: env})
	if err != nil {
		code := fault.Code(err)
		if code != fault.IncidentExpressionLimit {
			code = fault.IncidentDecisionFailed
		}
		s.incident(i, code, fmt.Sprintf("decision %q version %d of %s: %s", cd.DecisionID, d.Version, el.ID, fault.Reason(err)), StageActivate)
		return
	}
	s.complete(i, el, map[string]any{cd.ResultVariable: res.Output})
}

// publish writes el's message to the outbox, or its signal, if el sends
// one. The payload is exactly el's input mappings when it has some, the
// visible variables otherwise.
func (s *stepper) publish(i int, el *bpmn.Element) bool {
	if el.Signal != nil {
		return s.throwSignal(i, el)
	}
	if el.Message == nil {
		return true
	}
	ctx, tok := s.view(i), s.tokens[i].ID
	name, err := s.messageName(el, tok, ctx)
	if err != nil {
		s.exprIncident(i, err, fmt.Sprintf("message name of %s: %v", el.ID, err), StageActivate)
		return false
	}
	key, err := s.correlationKey(el, tok, ctx)
	if err != nil {
		s.exprIncident(i, err, fmt.Sprintf("correlation key of %s: %v", el.ID, err), StageActivate)
		return false
	}
	payload, ok := s.payload(i, el, ctx)
	if !ok {
		return false
	}
	s.eff.Publish = append(s.eff.Publish, OutboxMessage{
		ID:             s.outboxID(i, el),
		Element:        el.ID,
		Message:        name,
		CorrelationKey: key,
		Variables:      payload,
	})
	return true
}

// throwSignal records el's signal for the broadcast after the commit.
func (s *stepper) throwSignal(i int, el *bpmn.Element) bool {
	ctx, tok := s.view(i), s.tokens[i].ID
	name, err := s.eventName(el, el.Signal.Name, el.Signal.NameExpression, tok, ctx)
	if err != nil {
		s.exprIncident(i, err, fmt.Sprintf("signal name of %s: %v", el.ID, err), StageActivate)
		return false
	}
	payload, ok := s.payload(i, el, ctx)
	if !ok {
		return false
	}
	s.eff.Signals = append(s.eff.Signals, SignalThrow{ID: s.outboxID(i, el), Element: el.ID, Signal: name, Variables: payload})
	return true
}

// payload is what el sends: exactly its input mappings when it has some,
// the visible variables ctx of token i otherwise. A failed mapping stops
// the token in an incident (false).
func (s *stepper) payload(i int, el *bpmn.Element, ctx map[string]any) (map[string]any, bool) {
	if len(el.Inputs) == 0 {
		return s.handOut(i, ctx), true
	}
	payload := make(map[string]any, len(el.Inputs))
	if err := s.mapInto(el, s.tokens[i].ID, el.Inputs, ctx, payload); err != nil {
		s.exprIncident(i, err, err.Error(), StageActivate)
		return nil, false
	}
	return payload, true
}

// mapInto evaluates mappings of el for token over ctx into out; an input
// without source maps null.
func (s *stepper) mapInto(el *bpmn.Element, token string, mappings []bpmn.Mapping, ctx, out map[string]any) error {
	for _, m := range mappings {
		var v any
		if m.Source != nil {
			var err error
			if v, err = m.Source.EvalIn(ctx, s.env(m.Source, el, token)); err != nil {
				return fmt.Errorf("input mapping %s of %s: %w", m.Target, el.ID, err)
			}
		}
		setPath(out, m.Path, v)
	}
	return nil
}

// outboxID derives a message id from the instance, the step being computed,
// the element and the token: a re-run of the step yields the same id, so the
// publisher's dedupe downstream sees one message.
func (s *stepper) outboxID(i int, el *bpmn.Element) string {
	return s.in.ID + "/" + strconv.FormatInt(s.in.Version+1, 10) + "/" + el.ID + "/" + s.tokens[i].ID
}

// env is what expression e of element el reads when evaluated for token:
// the step's time and, only if e calls uuid(), a seed built like an outbox
// id and numbered within the step. The number tells apart two evaluations
// the rest cannot (an input and an output mapping of the same text, a loop
// that passes the element twice in one step); a re-run of the step numbers
// them alike, so uuid() gives the same ids again.
func (s *stepper) env(e *feel.Expr, el *bpmn.Element, token string) feel.Env {
	env := feel.Env{Now: s.now, Limits: s.limits, Ctx: s.ctx}
	if e.UsesSeed() {
		env.Seed = s.seed(el, token)
	}
	return env
}

// seed numbers one more evaluation that reads a seed (see env).
func (s *stepper) seed(el *bpmn.Element, token string) string {
	s.seeds++
	return s.in.ID + "/" + strconv.FormatInt(s.in.Version+1, 10) + "/" + el.ID + "/" + token + "/" + strconv.Itoa(s.seeds)
}

// errorVariables evaluates an error end event's output mappings: the
// variables its error carries to the catch event.
func (s *stepper) errorVariables(i int, el *bpmn.Element) (map[string]any, bool) {
	if len(el.Outputs) == 0 {
		return nil, true
	}
	vars := make(map[string]any, len(el.Outputs))
	ctx := s.view(i)
	for _, m := range el.Outputs {
		v, err := m.Source.EvalIn(ctx, s.env(m.Source, el, s.tokens[i].ID))
		if err != nil {
			s.exprIncident(i, err, fmt.Sprintf("output mapping %s of %s: %v", m.Target, el.ID, err), StageActivate)
			return nil, false
		}
		setPath(vars, m.Path, v)
	}
	return vars, true
}

// outputs writes el's result into the variables: through el's output
// mappings when it has some (evaluated over the visible variables overlaid
// with result, written from the enclosing scope outwards, or from an inner
// instance's own scope), merged from token i outwards otherwise. A failing
// mapping stops token i in an incident; the result is then merged unmapped
// so that nothing it carried is lost and a retry can map it again.
func (s *stepper) outputs(i int, el *bpmn.Element, result map[string]any) bool {
	if len(el.Outputs) == 0 {
		s.mergeFrom(i, result)
		return true
	}
	ctx := s.view(i)
	if len(result) > 0 {
		ctx = overlay(ctx, result)
	}
	values := make([]any, len(el.Outputs))
	for k, m := range el.Outputs {
		v, err := m.Source.EvalIn(ctx, s.env(m.Source, el, s.tokens[i].ID))
		if err != nil {
			s.mergeFrom(i, result)
			s.exprIncident(i, err, fmt.Sprintf("output mapping %s of %s: %v", m.Target, el.ID, err), StageComplete)
			return false
		}
		values[k] = v
	}
	from := s.parentOf(i)
	if s.tokens[i].Loop > 0 {
		from = i // Zeebe writes an inner instance's outputs to its own scope first
	}
	for k, m := range el.Outputs {
		s.write(from, m.Path, values[k])
	}
	return true
}

// overlay returns a new map of base with over on top.
func overlay(base, over map[string]any) map[string]any {
	m := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		m[k] = v
	}
	for k, v := range over {
		m[k] = v
	}
	return m
}

// merge writes vars into the instance variables, replacing top-level names.
func (s *stepper) merge(vars map[string]any) {
	if len(vars) == 0 {
		return
	}
	s.own()
	for k, v := range vars {
		s.vars[k] = v
	}
}

// shareVars returns the instance variables for an effect to hold; the next
// write of this step copies them first.
func (s *stepper) shareVars() map[string]any {
	s.ownVars = false
	return s.vars
}

// own makes s.vars a map this step may write: the input state's map (and any
// map handed out in effects) is never written.
func (s *stepper) own() {
	if s.ownVars {
		return
	}
	m := make(map[string]any, len(s.vars)+4)
	for k, v := range s.vars {
		m[k] = v
	}
	s.vars, s.ownVars = m, true
}

// setPath writes v at path in m, copying every nested object on the way
// (they may be shared with the input state) and replacing non-objects.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		old, _ := m[k].(map[string]any)
		child := make(map[string]any, len(old)+1)
		for ck, cv := range old {
			child[ck] = cv
		}
		m[k] = child
		m = child
	}
	m[path[len(path)-1]] = v
}

// exclusive takes the first outgoing flow whose condition holds, else the
// default flow; with neither the token stops in an incident.
func (s *stepper) exclusive(i int, el *bpmn.Element) {
	ctx := s.view(i)
	for k, f := range el.Outgoing {
		if f == el.Default {
			continue
		}
		ok := f.Condition == nil // the only flow out of a merging gateway
		if !ok {
			var err error
			if ok, err = f.Condition.EvalBoolIn(ctx, s.env(f.Condition, el, s.tokens[i].ID)); err != nil {
				s.exprIncident(i, err, fmt.Sprintf("condition of flow %s: %v", f.ID, err), StageActivate)
				return
			}
		}
		if ok {
			s.leave(i, el.Outgoing[k:k+1])
			return
		}
	}
	for k, f := range el.Outgoing {
		if f == el.Default {
			s.leave(i, el.Outgoing[k:k+1])
			return
		}
	}
	s.incident(i, fault.IncidentNoFlow, "no condition of gateway "+el.ID+" holds and it has no default flow", StageActivate)
}

// inclusive takes every outgoing flow whose condition holds (a flow without
// one is the only flow out), else the default flow; with neither the token
// stops in an incident. Every condition is evaluated, in document order,
// before the token moves.
func (s *stepper) inclusive(i int, el *bpmn.Element) {
	ctx := s.view(i)
	var taken []*bpmn.Flow
	for _, f := range el.Outgoing {
		if f == el.Default {
			continue
		}
		ok := f.Condition == nil
		if !ok {
			var err error
			if ok, err = f.Condition.EvalBoolIn(ctx, s.env(f.Condition, el, s.tokens[i].ID)); err != nil {
				s.exprIncident(i, err, fmt.Sprintf("condition of flow %s: %v", f.ID, err), StageActivate)
				return
			}
		}
		if ok {
			taken = append(taken, f)
		}
	}
	if len(taken) == 0 && el.Default != nil {
		taken = append(taken, el.Default)
	}
	if len(taken) == 0 {
		s.incident(i, fault.IncidentNoFlow, "no condition of gateway "+el.ID+" holds and it has no default flow", StageActivate)
		return
	}
	s.leave(i, taken)
}

// parallel joins and forks. A join waits until one token has arrived on each
// incoming flow (in the same scope), then one token leaves by every outgoing flow.
func (s *stepper) parallel(i int, el *bpmn.Element) {
	if len(el.Incoming) > 1 {
		t := s.tokens[i]
		var picks []int
		for _, f := range el.Incoming {
			if f.ID == t.Flow {
				continue
			}
			j := s.joined(el.ID, t.Scope, f.ID)
			if j < 0 {
				s.tokens[i].Wait = WaitJoin
				return
			}
			picks = append(picks, j)
		}
		for _, j := range picks {
			s.kill(j)
		}
	}
	s.leave(i, el.Outgoing)
}

// joined finds a token waiting at join element el in scope that came by flow.
func (s *stepper) joined(el, scope, flow string) int {
	for j := range s.tokens {
		t := &s.tokens[j]
		if t.Wait == WaitJoin && t.Element == el && t.Scope == scope && t.Flow == flow {
			return j
		}
	}
	return -1
}
