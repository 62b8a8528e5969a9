package engine

import (
	"fmt"
	"strconv"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// park puts token i in a wait of kind at el and opens the wait's rows: el's
// own subscription, timer or task (or, at an event-based gateway, those of
// the events after it) and those of el's boundary events. Every value is
// evaluated before anything is opened, so an expression that fails leaves the
// token in an incident with no row opened.
func (s *stepper) park(i int, el *bpmn.Element, kind WaitKind) bool {
	mark := s.mark()
	id := s.tokens[i].ID
	armed, err := s.openWaits(id, el, kind)
	if err != nil {
		s.rollback(mark)
		s.incident(i, fault.IncidentExpression, err.Error())
		return false
	}
	s.tokens[i].Wait, s.tokens[i].Armed = kind, armed
	return true
}

func (s *stepper) openWaits(id string, el *bpmn.Element, kind WaitKind) ([]Armed, error) {
	armed := make([]Armed, 0, 1+len(el.Boundaries))
	var err error
	switch kind {
	case WaitMessage, WaitTimer:
		armed, err = s.openEvent(id, el, armed)
	case WaitEvent:
		for _, f := range el.Outgoing {
			if armed, err = s.openEvent(id, f.Target, armed); err != nil {
				return nil, err
			}
		}
	case WaitTask:
		var task Task
		if task, err = s.newTask(id, el); err == nil {
			s.eff.Tasks = append(s.eff.Tasks, task)
			armed = append(armed, Armed{Element: el.ID})
		}
	}
	if err != nil {
		return nil, err
	}
	for _, b := range el.Boundaries {
		if b.Message == nil && b.Timer == nil {
			continue // error boundary events have no row: they are found when an error is thrown
		}
		if armed, err = s.openEvent(id, b, armed); err != nil {
			return nil, err
		}
	}
	return armed, nil
}

// openEvent opens the subscription or timer of message or timer event el.
func (s *stepper) openEvent(id string, el *bpmn.Element, armed []Armed) ([]Armed, error) {
	if el.Message != nil {
		key, err := s.correlationKey(el.Message)
		if err != nil {
			return nil, fmt.Errorf("correlation key of %s: %w", el.ID, err)
		}
		s.eff.Subscriptions = append(s.eff.Subscriptions, Subscription{
			TokenID: id, Element: el.ID, Message: el.Message.Name, CorrelationKey: key,
		})
		return append(armed, Armed{Element: el.ID, Key: key}), nil
	}
	due, interval, left, err := s.due(el.Timer)
	if err != nil {
		return nil, fmt.Errorf("timer %s: %w", el.ID, err)
	}
	s.eff.Timers = append(s.eff.Timers, Timer{TokenID: id, Element: el.ID, DueAt: due, Repeat: left, Interval: interval})
	return append(armed, Armed{Element: el.ID, Left: left}), nil
}

// effectsMark records the lengths of the effect lists that park appends to.
type effectsMark struct{ subs, timers, tasks int }

func (s *stepper) mark() effectsMark {
	return effectsMark{len(s.eff.Subscriptions), len(s.eff.Timers), len(s.eff.Tasks)}
}

func (s *stepper) rollback(m effectsMark) {
	s.eff.Subscriptions = s.eff.Subscriptions[:m.subs]
	s.eff.Timers = s.eff.Timers[:m.timers]
	s.eff.Tasks = s.eff.Tasks[:m.tasks]
}

// correlationKey evaluates a message's key ("" when it has none).
func (s *stepper) correlationKey(m *bpmn.Message) (string, error) {
	if m.CorrelationKey == nil {
		return "", nil
	}
	return m.CorrelationKey.EvalString(s.vars)
}

// newTask builds the pull task of token id at el. Its variables are the
// instance variables plus el's input mappings (the worker sees everything,
// as a Zeebe job does).
func (s *stepper) newTask(id string, el *bpmn.Element) (Task, error) {
	typ, err := el.Task.Type.EvalString(s.vars)
	if err != nil {
		return Task{}, fmt.Errorf("task type of %s: %w", el.ID, err)
	}
	r, err := el.Task.Retries.Eval(s.vars)
	if err != nil {
		return Task{}, fmt.Errorf("task retries of %s: %w", el.ID, err)
	}
	retries, ok := asInt(r)
	if !ok || retries < 0 {
		return Task{}, fmt.Errorf("task retries of %s: %v is not a non-negative integer", el.ID, r)
	}
	vars, err := s.inputs(el)
	if err != nil {
		return Task{}, err
	}
	return Task{TokenID: id, Element: el.ID, Type: typ, Retries: retries, Variables: vars, Headers: el.Task.Headers}, nil
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

// inputs returns the variables a task hands its worker: the instance
// variables with el's input mappings applied on top. Without mappings the
// instance map itself is shared; later writes of this step copy it first.
func (s *stepper) inputs(el *bpmn.Element) (map[string]any, error) {
	if len(el.Inputs) == 0 {
		return s.shareVars(), nil
	}
	out := make(map[string]any, len(s.vars)+len(el.Inputs))
	for k, v := range s.vars {
		out[k] = v
	}
	return out, s.mapInputs(el, out)
}

// mapInputs evaluates el's input mappings over the instance variables into out.
func (s *stepper) mapInputs(el *bpmn.Element, out map[string]any) error {
	for _, m := range el.Inputs {
		v, err := m.Source.Eval(s.vars)
		if err != nil {
			return fmt.Errorf("input mapping %s of %s: %w", m.Target, el.ID, err)
		}
		setPath(out, m.Path, v)
	}
	return nil
}

// publish writes el's message to the outbox if el sends one. The payload is
// exactly el's input mappings when it has some, the instance variables otherwise.
func (s *stepper) publish(i int, el *bpmn.Element) bool {
	if el.Message == nil {
		return true
	}
	key, err := s.correlationKey(el.Message)
	if err != nil {
		s.incident(i, fault.IncidentExpression, fmt.Sprintf("correlation key of %s: %v", el.ID, err))
		return false
	}
	payload := s.shareVars()
	if len(el.Inputs) > 0 {
		payload = make(map[string]any, len(el.Inputs))
		if err := s.mapInputs(el, payload); err != nil {
			s.incident(i, fault.IncidentExpression, err.Error())
			return false
		}
	}
	s.eff.Publish = append(s.eff.Publish, OutboxMessage{
		ID:             s.outboxID(i, el),
		Element:        el.ID,
		Message:        el.Message.Name,
		CorrelationKey: key,
		Variables:      payload,
	})
	return true
}

// outboxID derives a message id from the instance, the step being computed,
// the element and the token: a re-run of the step yields the same id, so the
// publisher's dedupe downstream sees one message.
func (s *stepper) outboxID(i int, el *bpmn.Element) string {
	return s.in.ID + "/" + strconv.FormatInt(s.in.Version+1, 10) + "/" + el.ID + "/" + s.tokens[i].ID
}

// outputs writes el's result into the instance variables: through el's
// output mappings when it has some (evaluated over the variables overlaid
// with result), merged as it is otherwise. A failing mapping stops token i in
// an incident; the result is then merged unmapped so that nothing it carried
// is lost and a retry can map it again.
func (s *stepper) outputs(i int, el *bpmn.Element, result map[string]any) bool {
	if len(el.Outputs) == 0 {
		s.merge(result)
		return true
	}
	ctx := s.vars
	if len(result) > 0 {
		ctx = make(map[string]any, len(s.vars)+len(result))
		for k, v := range s.vars {
			ctx[k] = v
		}
		for k, v := range result {
			ctx[k] = v
		}
	}
	values := make([]any, len(el.Outputs))
	for k, m := range el.Outputs {
		v, err := m.Source.Eval(ctx)
		if err != nil {
			s.merge(result)
			s.incident(i, fault.IncidentExpression, fmt.Sprintf("output mapping %s of %s: %v", m.Target, el.ID, err))
			return false
		}
		values[k] = v
	}
	s.own()
	for k, m := range el.Outputs {
		setPath(s.vars, m.Path, values[k])
	}
	return true
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
	for k, f := range el.Outgoing {
		if f == el.Default {
			continue
		}
		ok := f.Condition == nil // the only flow out of a merging gateway
		if !ok {
			var err error
			if ok, err = f.Condition.EvalBool(s.vars); err != nil {
				s.incident(i, fault.IncidentExpression, fmt.Sprintf("condition of flow %s: %v", f.ID, err))
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
	s.incident(i, fault.IncidentNoFlow, "no condition of gateway "+el.ID+" holds and it has no default flow")
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
