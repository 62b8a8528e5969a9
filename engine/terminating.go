package engine

import (
	"github.com/sutra-run/worker/bpmn"
)

// Terminating tokens. Whatever ends tokens before they complete (an
// interrupting boundary event or event subprocess, a terminate end event, an
// error or escalation that ends a scope, a multi-instance body or an ad-hoc
// subprocess that cancels what still runs, a cancel of the instance) goes
// through halt. Without canceling listeners in the process, halt ends the
// tokens at once, as it always has. With them, a created user task inside
// runs its canceling listeners first: it is terminating (its task closed,
// its listener's job open), the scopes between it and what halted them stay
// as terminating tokens (WaitTerminating, their waits closed), and what was
// to happen next is a Then on the token that halted them (State.Then at
// process level). When the last terminating token under it has ended,
// settle runs that Then: the boundary event's flow, the event subprocess,
// the scope's completion, the instance's end.

// ThenKind names what waits for terminating tokens.
type ThenKind string

const (
	// ThenBoundary continues the interrupted activity's token at boundary
	// event Element with Result.
	ThenBoundary ThenKind = "boundary"
	// ThenEventSub starts the event subprocess of start event Element in
	// the token's scope (the instance, at process level) with Result as
	// its payload.
	ThenEventSub ThenKind = "eventsub"
	// ThenTerminate completes the scope a terminate end event ended.
	ThenTerminate ThenKind = "terminate"
	// ThenBody completes the multi-instance body whose completion condition
	// held.
	ThenBody ThenKind = "body"
	// ThenAdHoc completes the ad-hoc subprocess that cancelled its
	// remaining activations.
	ThenAdHoc ThenKind = "adhoc"
	// ThenCancel ends the instance cancelled (State.Status
	// StatusCancelling until then).
	ThenCancel ThenKind = "cancel"
	// ThenRethrow ends the instance in favour of its parent's call
	// activity, which rethrows error Code with Result as its variables.
	ThenRethrow ThenKind = "rethrow"
)

// Then is what a token (or the instance) does once the terminating tokens
// under it have ended.
type Then struct {
	Kind ThenKind `json:"k"`
	// Element is the boundary event (ThenBoundary) or the event
	// subprocess's start event (ThenEventSub).
	Element string `json:"el,omitempty"`
	// Code is the error code ThenRethrow hands to the parent.
	Code string `json:"code,omitempty"`
	// Result is the boundary or start event's result, or the error's
	// variables.
	Result map[string]any `json:"result,omitempty"`
}

// halt ends everything inside the scope token j opens (-1 = the whole
// instance). It reports whether some of it is still terminating: then
// then runs once the last of it has ended.
func (s *stepper) halt(j int, then Then) bool {
	if !s.def.ListensCanceling() {
		if j < 0 {
			s.killAll()
		} else {
			s.killScope(s.tokens[j].ID)
		}
		return false
	}
	scope := ""
	if j >= 0 {
		scope = s.tokens[j].ID
	}
	if !s.haltIn(scope) {
		return false
	}
	if j < 0 {
		s.closeWaits(-1, "") // nothing at process level starts while it ends
		s.then = &then
	} else {
		s.tokens[j].Then = &then
	}
	return true
}

// haltIn ends every token in scope (a token id, "" = the instance), at any
// depth, but the user tasks that cancel through listeners and the scopes
// around them; it reports whether any of them is left, terminating.
func (s *stepper) haltIn(scope string) bool {
	held := false
	for j := range s.tokens {
		if s.tokens[j].Element != "" && s.tokens[j].Scope == scope && s.haltToken(j) {
			held = true
		}
	}
	return held
}

// haltToken ends token j and everything inside it, or reports that it is
// left terminating: a user task running its canceling listeners, or a
// scope holding one. Whatever it was to do once terminated gives way to
// what halts it now.
func (s *stepper) haltToken(j int) bool {
	s.tokens[j].Then = nil
	switch {
	case s.cancelingListeners(j):
		return true // already terminating: no second job
	case s.cancels(j):
		s.startCanceling(j)
		return true
	case s.haltIn(s.tokens[j].ID):
		s.release(j)
		s.tokens[j].Wait = WaitTerminating
		return true
	}
	s.kill(j)
	return false
}

// cancelingListeners reports whether token j runs its canceling listeners
// (a job open, or stopped in an incident of one).
func (s *stepper) cancelingListeners(j int) bool {
	l := s.tokens[j].Listener
	return l != nil && l.Event == bpmn.ListenerCanceling
}

// terminating reports whether token j is terminating: running its canceling
// listeners, or holding tokens that do.
func (s *stepper) terminating(j int) bool {
	return s.tokens[j].Wait == WaitTerminating || s.cancelingListeners(j)
}

// cancels reports whether token j is a created user task with canceling
// listeners: open, or held by its assigning, updating or completing
// listeners. One whose creating listeners (or assigning ones, at its
// creation) still run is not created yet and ends at once.
func (s *stepper) cancels(j int) bool {
	t := &s.tokens[j]
	el := s.def.Element(t.Element)
	if el == nil || el.User == nil || t.Wait == WaitMulti || len(el.ListenersOf(bpmn.ListenerCanceling)) == 0 {
		return false
	}
	if t.Wait == WaitTask {
		return true
	}
	if l := t.Listener; l != nil {
		switch l.Event {
		case bpmn.ListenerUpdating, bpmn.ListenerCompleting:
			return true
		case bpmn.ListenerAssigning:
			return l.Result != nil
		}
	}
	return false
}

// startCanceling closes user task token j (its task, its boundary events,
// the job of a listener it ran) and starts its canceling listeners.
func (s *stepper) startCanceling(j int) {
	s.release(j)
	s.listen(j, s.def.Element(s.tokens[j].Element), bpmn.ListenerCanceling, nil)
}

// canceled ends user task token i, its canceling listeners done, and goes
// on with what waited for it.
func (s *stepper) canceled(i int) {
	if t := &s.tokens[i]; t.Then != nil {
		then := *t.Then
		t.Then = nil
		s.runThen(i, then)
		return
	}
	scope := s.tokens[i].Scope
	s.kill(i)
	s.settle(scope)
}

// settle goes on from the end of a terminating token in scope (a token id,
// "" = the instance): once nothing terminates under it any more, its Then
// runs, or the scope, terminating itself, ends and its own scope settles.
func (s *stepper) settle(scope string) {
	for {
		for j := range s.tokens {
			if s.tokens[j].Element != "" && s.tokens[j].Scope == scope && s.terminating(j) {
				return
			}
		}
		if scope == "" {
			if s.then != nil {
				then := *s.then
				s.then = nil
				s.runThen(-1, then)
			}
			return
		}
		j := s.indexOf(scope)
		t := &s.tokens[j]
		if t.Then != nil {
			then := *t.Then
			t.Then = nil
			s.runThen(j, then)
			return
		}
		if t.Wait != WaitTerminating {
			return
		}
		scope = t.Scope
		s.kill(j)
	}
}

// runThen does then for token j (-1 = the instance), nothing under it
// terminating any more.
func (s *stepper) runThen(j int, then Then) {
	switch then.Kind {
	case ThenBoundary:
		s.interrupted(j, s.def.Element(then.Element), then.Result)
	case ThenEventSub:
		s.startEventSub(j, s.def.Element(then.Element), then.Result)
	case ThenTerminate:
		scope := ""
		if j >= 0 {
			scope = s.tokens[j].ID
		}
		s.scopeDone(scope)
	case ThenBody:
		s.bodyDone(j, s.def.Element(s.tokens[j].Element))
	case ThenAdHoc:
		s.adHocComplete(j, s.def.Element(s.tokens[j].Element))
	case ThenCancel:
		s.cancelled()
	case ThenRethrow:
		s.rethrow(then.Code, then.Result)
	}
}
