package engine

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// Listeners. A token runs its element's listeners of one event (execution
// listeners at start and end, a Camunda user task's creating, assigning,
// updating, completing and canceling listeners (terminating.go)) one job at a time, in document order,
// parked in WaitListener: each job is a pull task like any other, keyed by a token id of its own
// (ListenerRun.Job) so that it never meets the element's own rows, and
// fresh for every job, so that a late outcome of an earlier one matches
// nothing. After the last job the element goes on from where its listeners
// stopped it.

// ListenerRun is where a token is in its element's listeners of one event.
type ListenerRun struct {
	// Event is bpmn.ListenerStart, ListenerEnd, ListenerBeforeAll,
	// ListenerCreating, ListenerAssigning, ListenerUpdating,
	// ListenerCompleting or ListenerCanceling.
	Event string `json:"ev"`
	// Index is the listener (of Event, in document order) whose job is open,
	// or whose failure the token's incident is.
	Index int `json:"i,omitempty"`
	// Job is the token id the open job's task row is keyed by.
	Job string `json:"job,omitempty"`
	// Process marks the process's own listeners (bpmn.Process.Self): its
	// start listeners run on the token at its start event, its end
	// listeners on a token of their own once its last token ended.
	Process bool `json:"process,omitempty"`
	// Result is the user task's completion that completing listeners hold
	// back, the trigger's payload an event subprocess's start listeners
	// hold back, the assignment ({"assignee": …}) assigning listeners hold
	// back, or the changes (UserTaskChanges) updating listeners hold back:
	// applied once the last of them completes. Nil for assigning
	// listeners at the task's creation.
	Result map[string]any `json:"result,omitempty"`
}

// listen starts token i's listeners of event at el, reporting whether it
// has any (and so waits, or stopped in an incident).
func (s *stepper) listen(i int, el *bpmn.Element, event string, result map[string]any) bool {
	if len(el.ListenersOf(event)) == 0 {
		return false
	}
	s.tokens[i].Listener = &ListenerRun{Event: event, Result: result, Process: el == s.def.Self()}
	s.openListener(i, el, Trigger{})
	return true
}

// listened is the element whose listeners token i runs.
func (s *stepper) listened(i int) *bpmn.Element {
	if s.tokens[i].Listener.Process {
		return s.def.Self()
	}
	return s.def.Element(s.tokens[i].Element)
}

// processEnd runs the process's end listeners, if it has any, on a token of
// their own, its waits closed first; it reports whether the process still
// has to wait for them.
func (s *stepper) processEnd() bool {
	self := s.def.Self()
	if len(self.ListenersOf(bpmn.ListenerEnd)) == 0 {
		return false
	}
	s.closeWaits(-1, "")
	return s.listen(s.add(self, "", ""), self, bpmn.ListenerEnd, nil)
}

// openListener opens the job of token i's current listener at el; tr is the
// failure it repeats (its retries, retry timeout and error), if any. A type
// or retries that fails to evaluate stops the token in an incident whose
// retry runs every listener of the event again, as Zeebe does.
func (s *stepper) openListener(i int, el *bpmn.Element, tr Trigger) {
	run := *s.tokens[i].Listener
	l := el.ListenersOf(run.Event)[run.Index]
	run.Job = s.newID()
	task, err := s.listenerTask(i, el, l, run.Job)
	if err != nil {
		run.Index, run.Job = 0, ""
		s.tokens[i].Listener = &run
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
	s.tokens[i].Listener, s.tokens[i].Wait = &run, WaitListener
}

// listenerTask builds the job of listener l of token i at el: its type and
// retries evaluated over the variables visible at the token, the element's
// task headers, the token's locals as its input.
func (s *stepper) listenerTask(i int, el *bpmn.Element, l bpmn.Listener, job string) (Task, error) {
	ctx, tok := s.view(i), s.tokens[i].ID
	typ, err := l.Type.EvalStringIn(ctx, s.env(l.Type, el, tok))
	if err != nil {
		return Task{}, fmt.Errorf("%s listener type of %s: %w", l.Event, el.ID, err)
	}
	r, err := l.Retries.EvalIn(ctx, s.env(l.Retries, el, tok))
	if err != nil {
		return Task{}, fmt.Errorf("%s listener retries of %s: %w", l.Event, el.ID, err)
	}
	retries, ok := asInt(r)
	if !ok || retries < 0 {
		return Task{}, fmt.Errorf("%s listener retries of %s: %v is not a non-negative integer", l.Event, el.ID, r)
	}
	if s.retryRetries > 0 {
		retries = s.retryRetries
	}
	task := Task{TokenID: job, Element: el.ID, Type: typ, Retries: retries, Variables: s.input(i)}
	if el.Task != nil {
		task.Headers = el.Task.Headers
	}
	return task, nil
}

// assign applies an assignment of a user task through /v1: after its
// assigning listeners, if it has any, which hold the task assigning.
func (s *stepper) assign(tr Trigger) error {
	i := s.waiting(tr.TokenID, tr.Element, WaitTask)
	if i < 0 || s.def.Element(tr.Element).User == nil {
		return fault.New(fault.NotWaiting, "instance %s has no user task %s on token %s", s.in.ID, tr.Element, tr.TokenID)
	}
	el := s.def.Element(tr.Element)
	result := map[string]any{"assignee": tr.Variables["assignee"]}
	if !s.listen(i, el, bpmn.ListenerAssigning, result) {
		s.assigned(i, el, result)
	}
	return nil
}

// update applies an update of a user task through /v1: after its updating
// listeners, if it has any, which hold the task updating.
func (s *stepper) update(tr Trigger) error {
	i := s.waiting(tr.TokenID, tr.Element, WaitTask)
	if i < 0 || s.def.Element(tr.Element).User == nil {
		return fault.New(fault.NotWaiting, "instance %s has no user task %s on token %s", s.in.ID, tr.Element, tr.TokenID)
	}
	if _, err := userTaskChanges(tr.Variables); err != nil {
		return err
	}
	el := s.def.Element(tr.Element)
	if !s.listen(i, el, bpmn.ListenerUpdating, tr.Variables) {
		s.updated(i, el, tr.Variables)
	}
	return nil
}

// userTaskChanges reads an update's changes from its relay's variables.
func userTaskChanges(vars map[string]any) (UserTaskChanges, error) {
	var c UserTaskChanges
	b, err := json.Marshal(vars)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return c, fault.New(fault.RelayInvalid, "user task update %v: %v", vars, err)
	}
	return c, nil
}

// updated applies changes (checked by update) to token i's user task.
func (s *stepper) updated(i int, el *bpmn.Element, changes map[string]any) {
	c, _ := userTaskChanges(changes)
	s.eff.Updates = append(s.eff.Updates, UserTaskUpdate{TokenID: s.tokens[i].ID, Element: el.ID, Changes: c})
}

// assigned sets the assignee of token i's user task to result's.
func (s *stepper) assigned(i int, el *bpmn.Element, result map[string]any) {
	a := Assignment{TokenID: s.tokens[i].ID, Element: el.ID}
	if v, ok := result["assignee"].(string); ok && v != "" {
		a.Assignee = &v
	}
	s.eff.Assignments = append(s.eff.Assignments, a)
}

// assignOnCreate runs the assigning listeners of user task el, created with
// an assignee, before the task is created; it reports whether it did. An
// assignee that fails to evaluate is left to the task's creation, whose
// incident names it.
func (s *stepper) assignOnCreate(i int, el *bpmn.Element) bool {
	if len(el.ListenersOf(bpmn.ListenerAssigning)) == 0 || el.User.Assignee == nil {
		return false
	}
	e := el.User.Assignee
	v, err := e.EvalStringIn(s.view(i), s.env(e, el, s.tokens[i].ID))
	if err != nil || v == "" {
		return false
	}
	return s.listen(i, el, bpmn.ListenerAssigning, nil)
}

// afterListeners makes an incident that el's own behaviour raised on token
// i, its start listeners done, resume there (StageBehaviour).
func (s *stepper) afterListeners(i int, el *bpmn.Element) {
	t := &s.tokens[i]
	if t.Wait != WaitIncident || t.Element != el.ID || t.Listener != nil || t.Incident.Stage != StageActivate {
		return
	}
	inc := *t.Incident
	inc.Stage = StageBehaviour
	t.Incident = &inc
	for k := len(s.eff.Incidents) - 1; k >= 0; k-- {
		if s.eff.Incidents[k].TokenID == t.ID {
			s.eff.Incidents[k] = inc
			break
		}
	}
}

// listenerAt finds the live token whose open listener job is (job,
// element), or -1.
func (s *stepper) listenerAt(job, element string) int {
	for j := range s.tokens {
		t := &s.tokens[j]
		if t.Element != "" && t.Wait == WaitListener && t.Listener.Job == job && s.listened(j).ID == element {
			return j
		}
	}
	return -1
}

// closeListener closes token i's open listener job: dropped from the
// effects when this step opened it, deleted by the store otherwise.
func (s *stepper) closeListener(i int) {
	job := s.tokens[i].Listener.Job
	n := len(s.eff.Tasks)
	s.eff.Tasks = slices.DeleteFunc(s.eff.Tasks, func(x Task) bool { return x.TokenID == job })
	if len(s.eff.Tasks) == n {
		s.eff.CloseWaits = append(s.eff.CloseWaits, WaitRef{TokenID: job, Element: s.listened(i).ID})
	}
}

// listenerOutcome applies a worker's outcome of token i's listener job.
func (s *stepper) listenerOutcome(i int, tr Trigger) {
	el := s.listened(i)
	run := *s.tokens[i].Listener
	s.closeListener(i)
	what := fmt.Sprintf("%s listener %d of %s", run.Event, run.Index+1, el.ID)
	switch tr.Kind {
	case TriggerTaskFailed:
		if tr.Retries <= 0 {
			s.taskIncident(i, what+" failed with no retries left: "+tr.ErrorMessage, StageActivate, tr)
			return
		}
		s.openListener(i, el, tr)
		return
	case TriggerTaskError:
		s.incident(i, fault.IncidentListener, fmt.Sprintf("%s threw BPMN error %q: a listener's job may not throw one (Zeebe does not allow it)", what, tr.ErrorCode), StageActivate)
		return
	}
	switch {
	case run.Process:
		s.merge(tr.Variables) // the process's scope is the instance's
	case run.Event == bpmn.ListenerStart, run.Event == bpmn.ListenerBeforeAll:
		// Set on the element's own scope (a multi-instance body's, for
		// beforeAll), where the rest of it reads them.
		if len(tr.Variables) > 0 {
			s.ownLocals(i)
			for k, v := range tr.Variables {
				s.tokens[i].Vars[k] = v
			}
		}
	case run.Event == bpmn.ListenerEnd:
		// Propagated from the element's parent scope, as output mappings are.
		for k, v := range tr.Variables {
			s.write(s.parentOf(i), []string{k}, v)
		}
	default:
		if len(tr.Variables) > 0 {
			s.incident(i, fault.IncidentListener, what+" completed with variables: a task listener's job may not set any (Zeebe refuses them)", StageActivate)
			return
		}
	}
	if run.Index+1 < len(el.ListenersOf(run.Event)) {
		run.Index++
		s.tokens[i].Listener = &run
		s.openListener(i, el, Trigger{})
		return
	}
	s.tokens[i].Listener, s.tokens[i].Wait = nil, ""
	switch {
	case run.Process && run.Event == bpmn.ListenerEnd:
		s.kill(i)
		s.ended = StatusCompleted
		return
	case run.Process:
		s.startAt(i, s.def.Element(s.tokens[i].Element), run.Result)
		return
	}
	switch run.Event {
	case bpmn.ListenerBeforeAll:
		s.multi(i, el)
	case bpmn.ListenerStart:
		if el.Kind == bpmn.KindEventSubProcess {
			s.activateEventSub(i, el, run.Result) // its start event completes with the trigger's payload
		} else {
			s.activate(i, el)
		}
		s.afterListeners(i, el)
	case bpmn.ListenerEnd:
		s.after(i, el)
	case bpmn.ListenerCreating:
		if !s.assignOnCreate(i, el) {
			s.park(i, el, WaitTask)
		}
	case bpmn.ListenerAssigning:
		if run.Result == nil { // at creation
			s.park(i, el, WaitTask)
			return
		}
		s.tokens[i].Wait = WaitTask // the task stayed open
		s.assigned(i, el, run.Result)
	case bpmn.ListenerUpdating:
		s.tokens[i].Wait = WaitTask
		s.updated(i, el, run.Result)
	case bpmn.ListenerCompleting:
		s.resume(i)
		s.complete(i, el, run.Result)
	case bpmn.ListenerCanceling:
		s.canceled(i)
	}
}
