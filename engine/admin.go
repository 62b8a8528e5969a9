package engine

import (
	"slices"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// cancel ends the instance: every token is killed, which closes its waits,
// cancels its child instance and resolves its incident; user tasks with
// canceling listeners run them first, the instance cancelling meanwhile. A
// cancel of a cancelling instance changes nothing.
func (s *stepper) cancel() {
	if s.halt(-1, Then{Kind: ThenCancel}) {
		return
	}
	s.cancelled()
}

// cancelled ends the instance cancelled, its tokens ended.
func (s *stepper) cancelled() {
	s.closeWaits(-1, "")
	s.ended = StatusCancelled
}

// modify ends the tokens tr.Modification cancels, merges tr.Variables and
// starts tokens at the elements it activates, which the step then runs. It
// checks everything before it changes anything: a refusal
// (fault.ModifyRefused) leaves the instance as it was.
func (s *stepper) modify(tr Trigger) error {
	m := tr.Modification
	if s.in.State.Status != StatusActive {
		return fault.New(fault.NotWaiting, "instance %s is %s", s.in.ID, statusName(s.in.State.Status))
	}
	if m == nil || len(m.Cancel)+len(m.Activate) == 0 {
		return fault.New(fault.ModifyRefused, "the modification cancels and activates nothing")
	}
	cancel := make([]int, 0, len(m.Cancel))
	for _, id := range m.Cancel {
		i := slices.IndexFunc(s.tokens, func(t Token) bool { return t.ID == id && t.Element != "" })
		switch {
		case i < 0:
			return fault.New(fault.ModifyRefused, "instance %s has no token %s", s.in.ID, id)
		case s.tokens[i].Scope != "":
			return fault.New(fault.ModifyRefused, "token %s at %s is inside a scope: cancel the scope's token", id, s.tokens[i].Element)
		case slices.Contains(cancel, i):
			return fault.New(fault.ModifyRefused, "token %s is cancelled twice", id)
		}
		cancel = append(cancel, i)
	}
	activate := make([]*bpmn.Element, 0, len(m.Activate))
	for _, id := range m.Activate {
		el := s.def.Element(id)
		switch {
		case el == nil:
			return fault.New(fault.ModifyRefused, "process %s has no element %q", s.def.ID, id)
		case el.Parent != nil:
			return fault.New(fault.ModifyRefused, "element %q is inside %s: only process-level elements are activated", id, el.Parent.ID)
		case el.AttachedTo != nil || el.Kind == bpmn.KindEventSubProcess:
			return fault.New(fault.ModifyRefused, "element %q is not reached by a flow: it cannot be activated", id)
		}
		activate = append(activate, el)
	}
	live := 0
	for _, t := range s.tokens {
		if t.Element != "" && t.Scope == "" {
			live++
		}
	}
	if live-len(cancel)+len(activate) == 0 {
		return fault.New(fault.ModifyRefused, "the modification leaves instance %s no token: cancel the instance instead", s.in.ID)
	}
	for _, i := range cancel {
		s.killScope(s.tokens[i].ID)
		s.kill(i)
	}
	s.merge(tr.Variables)
	for _, el := range activate {
		s.spawn(el, "", "")
	}
	return nil
}

// retry resolves the incident of token tr.TokenID and resumes the token
// where its incident stopped it, after merging tr.Variables from the token
// outwards (so a fix to a local variable lands where it is read).
func (s *stepper) retry(tr Trigger) error {
	i := s.waiting(tr.TokenID, "", WaitIncident)
	if i < 0 {
		return fault.New(fault.NotWaiting, "instance %s has no incident on token %s", s.in.ID, tr.TokenID)
	}
	stage := s.tokens[i].Incident.Stage
	s.mergeFrom(i, tr.Variables)
	t := &s.tokens[i]
	s.eff.ResolvedIncidents = append(s.eff.ResolvedIncidents, t.ID)
	t.Wait, t.Incident = "", nil
	el := s.def.Element(t.Element)
	switch {
	case t.Listener != nil:
		// Only the listener that stopped the token runs again.
		s.retryRetries = tr.Retries
		s.openListener(i, s.listened(i), Trigger{})
		s.retryRetries = 0
	case stage == StageComplete:
		s.complete(i, el, nil)
	case stage == StageLeave:
		s.after(i, el)
	case stage == StageAdHocJob:
		s.recreateTask(i, el, Trigger{Retries: tr.Retries})
	case el.Kind == bpmn.KindTask && len(t.Armed) > 0:
		// The task failed or threw while parked: only its task row is gone,
		// its boundary events are still armed.
		s.recreateTask(i, el, Trigger{Retries: tr.Retries})
	case stage == StageBehaviour:
		s.closeWaits(i, "")
		if el.Kind == bpmn.KindCallActivity {
			t.ID = s.newID()
		}
		s.retryRetries = tr.Retries
		s.activate(i, el)
		s.retryRetries = 0
	default:
		// The element runs again from its start, its waits opened anew. A
		// call activity does so under a fresh id: its new child instance
		// must not take the id of the one that ended.
		s.closeWaits(i, "")
		if el.Kind == bpmn.KindCallActivity {
			t.ID = s.newID()
		}
		s.retryRetries = tr.Retries
		s.execute(i)
		s.retryRetries = 0
	}
	return nil
}
