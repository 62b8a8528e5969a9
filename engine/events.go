package engine

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// Event subprocesses, errors and escalations.
//
// An event subprocess's message or timer start is armed when its scope
// starts: at process level when the instance leaves its start event (the
// waits are in State.Armed, rows keyed by token id ""), inside a subprocess
// when the subprocess token parks (in that token's Armed). Error and
// escalation starts have no row: a throw looks for them. A triggered event
// subprocess is a token at the event subprocess, scoped like its siblings,
// holding the tokens of its content. An interrupting one first ends
// everything else in its scope and closes the scope's other event
// subprocess starts.

// armProcess opens the message and timer starts of the process level's
// event subprocesses; a failure stops start token i in an incident.
func (s *stepper) armProcess(i int) bool {
	if len(s.def.EventSubs) == 0 {
		return true
	}
	mark := s.mark()
	armed := slices.Clone(s.armed)
	var err error
	for _, esp := range s.def.EventSubs {
		if start := esp.SubStart; start.Armable() {
			if armed, err = s.openEvent("", start, s.vars, armed); err != nil {
				s.rollback(mark)
				s.exprIncident(i, err, err.Error(), StageLeave)
				return false
			}
		}
	}
	s.armed = armed
	return true
}

// eventSubs returns the event subprocesses of the scope token j opens (-1 =
// the process level).
func (s *stepper) eventSubs(j int) []*bpmn.Element {
	if j < 0 {
		return s.def.EventSubs
	}
	if s.tokens[j].Wait != WaitScope {
		return nil // a multi-instance body: its inner instances hold the content
	}
	return s.def.Element(s.tokens[j].Element).EventSubs
}

// triggerEventSub starts the event subprocess of start in the scope token j
// opens (-1 = process level), with payload as the start event's result.
func (s *stepper) triggerEventSub(j int, start *bpmn.Element, payload map[string]any) {
	if start.Interrupting {
		for _, esp := range s.eventSubs(j) {
			s.closeWaits(j, esp.SubStart.ID)
		}
		if s.halt(j, Then{Kind: ThenEventSub, Element: start.ID, Result: payload}) {
			return
		}
	}
	s.startEventSub(j, start, payload)
}

// startEventSub starts the event subprocess of start in the scope token j
// opens (-1 = process level), with payload as the start event's result.
func (s *stepper) startEventSub(j int, start *bpmn.Element, payload map[string]any) {
	scope := ""
	if j >= 0 {
		scope = s.tokens[j].ID
	}
	esp := start.Parent
	k := s.add(esp, scope, "")
	if len(esp.Inputs) > 0 && !s.localInputs(k, esp) {
		s.mergeFrom(k, payload) // nothing the trigger carried is lost
		return
	}
	// Its start listeners run before its scope opens; they hold the payload.
	if !s.listen(k, esp, bpmn.ListenerStart, payload) {
		s.activateEventSub(k, esp, payload)
	}
}

// activateEventSub parks event subprocess token k and completes its start
// event with payload.
func (s *stepper) activateEventSub(k int, esp *bpmn.Element, payload map[string]any) {
	if !s.park(k, esp, WaitScope) {
		s.mergeFrom(k, payload)
		return
	}
	s.complete(s.add(esp.SubStart, s.tokens[k].ID, ""), esp.SubStart, payload)
}

// thrownCode is the code token i throws at el: static, or its expression
// evaluated now, which must yield a non-empty string (Zeebe requires a
// string); a failure stops the token in an incident.
func (s *stepper) thrownCode(i int, el *bpmn.Element, c *bpmn.EventCode, what string) (string, bool) {
	if c.Expression == nil {
		return c.Code, true
	}
	v, err := c.Expression.EvalIn(s.view(i), s.env(c.Expression, el, s.tokens[i].ID))
	code, ok := v.(string)
	if err == nil && (!ok || code == "") {
		err = fmt.Errorf("%q evaluated to %s, not a non-empty string", c.Expression.Source(), valueName(v))
	}
	if err != nil {
		s.exprIncident(i, err, fmt.Sprintf("%s of %s: %v", what, el.ID, err), StageActivate)
		return "", false
	}
	return code, true
}

// errorOf and escalationOf select what a catch event catches.
func errorOf(el *bpmn.Element) *bpmn.EventCode      { return el.Error }
func escalationOf(el *bpmn.Element) *bpmn.EventCode { return el.Escalation }

// catcher returns the event among events that catches code: one naming the
// code wins over a catch-all one.
func catcher(events []*bpmn.Element, code string, kind func(*bpmn.Element) *bpmn.EventCode) *bpmn.Element {
	var all *bpmn.Element
	for _, e := range events {
		c := kind(e)
		switch {
		case c == nil:
		case c.Code == code:
			return e
		case c.Code == "" && all == nil:
			all = e
		}
	}
	return all
}

// eventSubCatcher returns the start event, among the event subprocesses
// subs, that catches code.
func eventSubCatcher(subs []*bpmn.Element, code string, kind func(*bpmn.Element) *bpmn.EventCode) *bpmn.Element {
	starts := make([]*bpmn.Element, len(subs))
	for k, esp := range subs {
		starts[k] = esp.SubStart
	}
	return catcher(starts, code, kind)
}

// isEventSub reports whether token j is an event subprocess, whose throws
// its own scope's event subprocesses do not catch.
func (s *stepper) isEventSub(j int) bool {
	return s.def.Element(s.tokens[j].Element).Kind == bpmn.KindEventSubProcess
}

// throw propagates a BPMN error from token i: to its own error boundary
// events (a task or call activity reporting it), then outward through the
// enclosing scopes, where an error event subprocess inside a scope catches
// before the scope's boundary events. vars are the error's variables, the
// catch event's result. An uncaught error ends the instance in favour of
// its parent if it has one, else stops token i in an incident.
func (s *stepper) throw(i int, code string, vars map[string]any) {
	if s.tokens[i].Loop == 0 {
		if b := catcher(s.def.Element(s.tokens[i].Element).Boundaries, code, errorOf); b != nil {
			s.interrupt(i, b, vars)
			return
		}
	}
	from := i
	for j := s.parentOf(i); ; j = s.parentOf(j) {
		if !s.isEventSub(from) {
			if start := eventSubCatcher(s.eventSubs(j), code, errorOf); start != nil {
				s.triggerEventSub(j, start, vars)
				return
			}
		}
		if j < 0 {
			break
		}
		if s.tokens[j].Loop == 0 && !s.tokens[j].Activation {
			if b := catcher(s.def.Element(s.tokens[j].Element).Boundaries, code, errorOf); b != nil {
				s.interrupt(j, b, vars)
				return
			}
		}
		from = j
	}
	if s.parent != nil {
		// The parent's call activity rethrows it; this instance ends.
		if !s.halt(-1, Then{Kind: ThenRethrow, Code: code, Result: vars}) {
			s.rethrow(code, vars)
		}
		return
	}
	stage := StageActivate
	switch s.tokens[i].Wait {
	case WaitTask:
		s.closeWaits(i, s.tokens[i].Element) // the task is done; its boundary events stay armed
	case WaitAdHoc:
		s.closeWaits(i, s.tokens[i].Element) // its job is done; its activations run on
		stage = StageAdHocJob
	}
	s.incident(i, fault.IncidentError, "BPMN error "+strconv.Quote(code)+" was not caught", stage)
}

// rethrow ends the instance, its tokens ended, in favour of its parent's
// call activity, which rethrows error code with vars.
func (s *stepper) rethrow(code string, vars map[string]any) {
	s.closeWaits(-1, "")
	s.ended = StatusTerminated
	s.eff.NotifyParent = &ChildResult{Parent: *s.parent, Variables: vars, ErrorCode: code}
}

// escalate propagates an escalation from token i outward like an error, to
// escalation event subprocesses and boundary events; with own, token i's
// own boundary events catch first (a call activity whose child escalated).
// It reports whether token i lives on: an interrupting catch ended it (or,
// on its own boundary, moved it there). An escalation none catches goes to
// the parent instance's call activity, if any; otherwise it changes
// nothing, as in Zeebe.
func (s *stepper) escalate(i int, code string, own bool) bool {
	id := s.tokens[i].ID
	if own && s.tokens[i].Loop == 0 && s.catchEscalation(i, code) {
		return s.tokens[i].ID == id
	}
	from := i
	for j := s.parentOf(i); ; j = s.parentOf(j) {
		if !s.isEventSub(from) {
			if start := eventSubCatcher(s.eventSubs(j), code, escalationOf); start != nil {
				s.triggerEventSub(j, start, nil)
				return s.tokens[i].ID == id
			}
		}
		if j < 0 {
			break
		}
		if s.tokens[j].Loop == 0 && !s.tokens[j].Activation && s.catchEscalation(j, code) {
			return s.tokens[i].ID == id
		}
		from = j
	}
	if s.parent != nil {
		if s.eff.EscalateParent == nil {
			s.eff.EscalateParent = &ParentEscalation{ID: s.in.ID + "/" + strconv.FormatInt(s.in.Version+1, 10), Parent: *s.parent}
		}
		s.eff.EscalateParent.Codes = append(s.eff.EscalateParent.Codes, code)
	}
	return true
}

// catchEscalation lets a boundary event of activity token j catch code: an
// interrupting one ends the activity, a non-interrupting one starts a token
// beside it. It reports whether one caught it.
func (s *stepper) catchEscalation(j int, code string) bool {
	b := catcher(s.def.Element(s.tokens[j].Element).Boundaries, code, escalationOf)
	switch {
	case b == nil:
		return false
	case b.Interrupting:
		s.interrupt(j, b, nil)
	default:
		s.complete(s.add(b, s.tokens[j].Scope, ""), b, nil)
	}
	return true
}
