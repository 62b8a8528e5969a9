package engine

import (
	"fmt"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// Call activities. The parent asks the store for a child instance
// (Effects.StartChildren) and waits (WaitChild); the child, when it ends,
// hands its result to the store (Effects.NotifyParent), which relays it to
// the parent as TriggerChildCompleted. Neither instance ever touches the
// other's state.

// startChild asks for the child instance of call activity token i.
func (s *stepper) startChild(i int, el *bpmn.Element, ctx map[string]any) error {
	key, err := el.Call.ProcessID.EvalStringIn(ctx, s.env(el.Call.ProcessID, el, s.tokens[i].ID))
	if err != nil {
		return fmt.Errorf("called process id of %s: %w", el.ID, err)
	}
	var vars map[string]any
	if el.Call.PropagateAllParentVariables {
		vars = s.handOut(i, ctx)
	} else {
		// Only the input mappings, which are the call activity's locals.
		vars = make(map[string]any, len(s.tokens[i].Vars))
		for k, v := range s.tokens[i].Vars {
			vars[k] = v
		}
	}
	id := s.tokens[i].ID
	s.tokens[i].Escalated = 0 // a new child: none of its escalations applied yet
	s.eff.StartChildren = append(s.eff.StartChildren, ChildStart{
		InstanceID: s.in.ID + "/" + id, TokenID: id, Element: el.ID, DefinitionKey: key, Variables: vars,
		Binding: el.Call.Binding, VersionTag: el.Call.VersionTag,
	})
	return nil
}

// childCompleted resumes the call activity whose child ended: with the
// child's variables as its result (when it propagates them or maps them),
// or by rethrowing the child's uncaught error from the call activity. The
// escalations the child threw in its last step are caught first; an
// interrupting catch leaves nothing to resume. An end that overtook an
// escalation relay of the child is refused (fault.ChildEndEarly), to be
// applied after it.
func (s *stepper) childCompleted(tr Trigger) error {
	i := s.waiting(tr.TokenID, tr.Element, WaitChild)
	if i < 0 {
		return fault.New(fault.NotWaiting, "instance %s has no call activity waiting on token %s", s.in.ID, tr.TokenID)
	}
	if applied := s.tokens[i].Escalated; tr.Escalated > applied {
		return fault.New(fault.ChildEndEarly, "the child of %s on token %s sent %d escalation relays before its end; %d applied",
			tr.Element, tr.TokenID, tr.Escalated, applied)
	}
	el := s.def.Element(s.tokens[i].Element)
	s.tokens[i].Wait = "" // the child has ended: nothing to cancel
	if !s.childEscalations(i, tr.Escalations) {
		return nil
	}
	if tr.ErrorCode != "" {
		s.throw(i, tr.ErrorCode, tr.Variables)
		return nil
	}
	var result map[string]any
	if len(el.Outputs) > 0 || el.Call.PropagateAllChildVariables {
		result = tr.Variables
	}
	s.resume(i)
	s.complete(i, el, result)
	return nil
}

// childEscalated lets the call activity whose running child threw
// escalations that none of the child's scopes caught catch them.
func (s *stepper) childEscalated(tr Trigger) error {
	i := s.waiting(tr.TokenID, tr.Element, WaitChild)
	if i < 0 {
		return fault.New(fault.NotWaiting, "instance %s has no call activity waiting on token %s", s.in.ID, tr.TokenID)
	}
	s.tokens[i].Escalated++
	s.childEscalations(i, tr.Escalations)
	return nil
}

// childEscalations throws codes from call activity token i, in order, as
// long as it lives on: its boundary events and the scopes around it catch
// them (an interrupting catch cancels a running child), and what none
// catches goes on to this instance's own parent. It reports whether token i
// still waits at the call activity.
func (s *stepper) childEscalations(i int, codes []string) bool {
	for _, code := range codes {
		if !s.escalate(i, code, true) {
			return false
		}
	}
	return true
}

// childFailed stops the call activity whose child could not start in an
// incident; its boundary events stay armed.
func (s *stepper) childFailed(tr Trigger) error {
	i := s.waiting(tr.TokenID, tr.Element, WaitChild)
	if i < 0 {
		return fault.New(fault.NotWaiting, "instance %s has no call activity waiting on token %s", s.in.ID, tr.TokenID)
	}
	s.tokens[i].Wait = "" // no child to cancel
	s.incident(i, fault.IncidentCalledElement, "the called process could not start: "+tr.ErrorMessage, StageActivate)
	return nil
}
