package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// Ad-hoc subprocesses, as Zeebe 8.8 runs them. The token that reaches one
// parks there (WaitAdHoc) with two locals: adHocSubProcessElements, what it
// may activate, and its output collection, empty. Each activity it
// activates runs in an activation of its own: a scope token at the
// subprocess (Activation), holding the activity's flow and the locals it
// was activated with. When an activation's flow ends, its output element
// joins the output collection, then:
//   - the BPMN implementation activates its active elements collection
//     when it starts and completes when its completion condition holds
//     after an activation ends, or once none is left without one;
//   - the job-worker implementation (a zeebe:taskDefinition) opens a job
//     when it starts and again after each activation ends; a plain worker
//     completes the job with the variable AdHocResult saying what to
//     activate, or that the subprocess is done (docs/bpmn.md).
// When it may complete with activations still running, cancelRemainingInstances
// (or the worker's isCancelRemainingInstances) ends them, else it waits for them.

// AdHocResult is the variable an ad-hoc subprocess's job worker completes
// its job with, shaped as Camunda's job result of type "adHocSubProcess":
// {"activateElements": [{"elementId": id, "variables": {…}}],
// "isCompletionConditionFulfilled": bool, "isCancelRemainingInstances":
// bool}. The zeebe 8.4 gateway and /engine-rest have no result field, so a
// plain worker says it with this variable; it is read, not stored.
const AdHocResult = "adHocSubProcessResult"

// AdHocElements is the local variable listing what an ad-hoc subprocess
// may activate: elementId, elementName, documentation, properties and
// parameters (its input mappings' fromAi calls) of each activity, as Zeebe
// lists them.
const AdHocElements = "adHocSubProcessElements"

// adHoc activates ad-hoc subprocess el at token i (its input mappings applied).
func (s *stepper) adHoc(i int, el *bpmn.Element) {
	a := el.AdHoc
	locals := make(map[string]any, len(s.tokens[i].Vars)+2)
	for k, v := range s.tokens[i].Vars {
		locals[k] = v
	}
	locals[AdHocElements] = adHocElements(a)
	if a.OutputCollection != "" {
		locals[a.OutputCollection] = []any{}
	}
	s.setLocals(i, locals)
	var chosen []*bpmn.Element
	if e := a.ActiveElements; e != nil {
		v, err := e.EvalIn(s.view(i), s.env(e, el, s.tokens[i].ID))
		if err == nil {
			chosen, err = activities(el, v)
		}
		if err != nil {
			s.exprIncident(i, err, fmt.Sprintf("active elements collection of %s: %v", el.ID, err), StageActivate)
			return
		}
	}
	if !s.park(i, el, WaitAdHoc) {
		return
	}
	for _, act := range chosen {
		s.activateTool(i, el, act, nil)
	}
}

// adHocElements is the value of AdHocElements for a.
func adHocElements(a *bpmn.AdHoc) []any {
	out := make([]any, len(a.Activities))
	for k, x := range a.Activities {
		props := map[string]any{}
		for name, v := range x.Properties {
			props[name] = v
		}
		params := make([]any, len(x.Parameters))
		for j, p := range x.Parameters {
			params[j] = map[string]any{"name": p.Name, "description": p.Description, "type": p.Type,
				"schema": nilIfEmpty(p.Schema), "options": nilIfEmpty(p.Options)}
		}
		out[k] = map[string]any{
			"elementId": x.Element.ID, "elementName": x.Element.Name,
			"documentation": x.Documentation, "properties": props, "parameters": params,
		}
	}
	return out
}

// nilIfEmpty is m, or nil (a JSON null) when m is nil.
func nilIfEmpty(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// activities reads an active elements collection: a list of ids of
// activities of el.
func activities(el *bpmn.Element, v any) ([]*bpmn.Element, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("evaluated to %s, not a list of element ids", valueName(v))
	}
	out := make([]*bpmn.Element, len(list))
	for k, x := range list {
		id, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("item %d is %s, not an element id", k+1, valueName(x))
		}
		if out[k] = el.AdHoc.Activity(id); out[k] == nil {
			return nil, fmt.Errorf("%q is not an activity of %s it can activate", id, el.ID)
		}
	}
	return out, nil
}

// activateTool starts activity act of ad-hoc subprocess token b in a new
// activation holding vars as its locals.
func (s *stepper) activateTool(b int, el, act *bpmn.Element, vars map[string]any) {
	a := s.add(el, s.tokens[b].ID, "")
	t := &s.tokens[a]
	t.Activation, t.Wait = true, WaitScope
	if len(vars) > 0 {
		locals := make(map[string]any, len(vars))
		for k, v := range vars {
			locals[k] = v
		}
		s.setLocals(a, locals)
	}
	s.spawn(act, t.ID, "")
}

// activationDone ends activation a, whose flow has ended: its output
// element joins the output collection, then the subprocess completes, waits,
// or asks its worker again. Everything is evaluated before anything
// changes, so that a failure stops the activation in an incident a retry
// resumes.
func (s *stepper) activationDone(a int) {
	b := s.parentOf(a)
	el := s.def.Element(s.tokens[a].Element)
	ah := el.AdHoc
	fail := func(err error) { s.exprIncident(a, err, err.Error(), StageLeave) }
	var collected []any
	if out := ah.OutputCollection; out != "" {
		v, err := ah.OutputElement.EvalIn(s.view(a), s.env(ah.OutputElement, el, s.tokens[a].ID))
		if err != nil {
			fail(fmt.Errorf("output element of %s: %w", el.ID, err))
			return
		}
		list, ok := s.tokens[b].Vars[out].([]any)
		if !ok {
			fail(fmt.Errorf("output collection %s of %s is no longer a list", out, el.ID))
			return
		}
		collected = append(slices.Clip(list), v)
	}
	done := false
	if c := ah.CompletionCondition; c != nil {
		ctx := s.view(b)
		if collected != nil {
			ctx = overlay(ctx, map[string]any{ah.OutputCollection: collected})
		}
		var err error
		if done, err = c.EvalBoolIn(ctx, s.env(c, el, s.tokens[b].ID)); err != nil {
			fail(fmt.Errorf("completion condition of %s: %w", el.ID, err))
			return
		}
	}

	if collected != nil {
		s.ownLocals(b)
		s.tokens[b].Vars[ah.OutputCollection] = collected
	}
	s.kill(a)
	running := s.activations(b)
	switch {
	case s.tokens[b].Wait != WaitAdHoc:
		// Its job stopped in an incident: a retry asks the worker again.
	case done:
		s.adHocFulfilled(b, el, ah.CancelRemaining)
	case s.tokens[b].Fulfilled || el.Task == nil && ah.CompletionCondition == nil:
		if running == 0 {
			s.adHocComplete(b, el)
		}
	case el.Task != nil:
		// One job at a time: the worker decides again, seeing this result.
		s.closeWaits(b, el.ID)
		s.recreateTask(b, el, Trigger{})
	}
}

// activations counts the running activations of ad-hoc subprocess token b.
func (s *stepper) activations(b int) int {
	n := 0
	for j := range s.tokens {
		if s.tokens[j].Element != "" && s.tokens[j].Scope == s.tokens[b].ID {
			n++
		}
	}
	return n
}

// adHocFulfilled completes ad-hoc subprocess token b whose completion
// condition holds: at once, ending the activations still running when
// cancel says so, else once they have ended.
func (s *stepper) adHocFulfilled(b int, el *bpmn.Element, cancel bool) {
	if cancel && s.halt(b, Then{Kind: ThenAdHoc}) {
		if slices.ContainsFunc(s.tokens[b].Armed, func(a Armed) bool { return a.Element == el.ID }) {
			s.closeWaits(b, el.ID) // its job: it completes once they have ended
		}
		return
	}
	if s.activations(b) > 0 {
		s.tokens[b].Fulfilled = true
		return
	}
	s.adHocComplete(b, el)
}

// adHocComplete completes ad-hoc subprocess token b: its output collection
// goes to the enclosing scope, then its output mappings apply and the
// token leaves.
func (s *stepper) adHocComplete(b int, el *bpmn.Element) {
	locals := s.tokens[b].Vars
	s.resume(b)
	s.tokens[b].Fulfilled = false
	if out := el.AdHoc.OutputCollection; out != "" {
		s.write(s.parentOf(b), []string{out}, locals[out])
	}
	s.complete(b, el, nil)
}

// adHocJob applies the completion, failure or BPMN error of the job of
// ad-hoc subprocess token i.
func (s *stepper) adHocJob(i int, el *bpmn.Element, tr Trigger) error {
	if !slices.ContainsFunc(s.tokens[i].Armed, func(a Armed) bool { return a.Element == el.ID }) {
		return fault.New(fault.NotWaiting, "instance %s has no job of ad-hoc subprocess %s on token %s", s.in.ID, el.ID, tr.TokenID)
	}
	switch tr.Kind {
	case TriggerTaskFailed:
		s.closeWaits(i, el.ID)
		if tr.Retries <= 0 {
			s.taskIncident(i, "task failed with no retries left: "+tr.ErrorMessage, StageAdHocJob, tr)
			return nil
		}
		s.recreateTask(i, el, tr)
	case TriggerTaskError:
		s.throw(i, tr.ErrorCode, tr.Variables)
	case TriggerTaskCompleted:
		s.closeWaits(i, el.ID)
		vars := tr.Variables
		raw, has := vars[AdHocResult]
		if has {
			vars = make(map[string]any, len(tr.Variables))
			for k, v := range tr.Variables {
				if k != AdHocResult {
					vars[k] = v
				}
			}
		}
		s.mergeFrom(i, vars)
		res, err := readAdHocResult(el, raw)
		if err != nil {
			s.incident(i, fault.IncidentAdHocResult, fmt.Sprintf("result of the job of %s (%s): %v", el.ID, AdHocResult, err), StageAdHocJob)
			return nil
		}
		for _, x := range res.activate {
			s.activateTool(i, el, x.el, x.vars)
		}
		if res.fulfilled {
			s.adHocFulfilled(i, el, res.cancel)
		}
	}
	return nil
}

// adHocResult is a job worker's AdHocResult, read.
type adHocResult struct {
	activate          []activation
	fulfilled, cancel bool
}

type activation struct {
	el   *bpmn.Element
	vars map[string]any
}

// readAdHocResult reads v, a job worker's AdHocResult for ad-hoc
// subprocess el (nil: activate nothing, not done).
func readAdHocResult(el *bpmn.Element, v any) (adHocResult, error) {
	var r adHocResult
	if v == nil {
		return r, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return r, fmt.Errorf("it is %s, not a context", valueName(v))
	}
	flag := func(name string) (bool, error) {
		switch f := m[name].(type) {
		case nil:
			return false, nil
		case bool:
			return f, nil
		}
		return false, fmt.Errorf("%s is %s, not a boolean", name, valueName(m[name]))
	}
	var err error
	if r.fulfilled, err = flag("isCompletionConditionFulfilled"); err != nil {
		return r, err
	}
	if r.cancel, err = flag("isCancelRemainingInstances"); err != nil {
		return r, err
	}
	list, ok := m["activateElements"].([]any)
	if !ok && m["activateElements"] != nil {
		return r, fmt.Errorf("activateElements is %s, not a list", valueName(m["activateElements"]))
	}
	for k, x := range list {
		item, ok := x.(map[string]any)
		if !ok {
			return r, fmt.Errorf("activateElements item %d is %s, not a context", k+1, valueName(x))
		}
		id, _ := item["elementId"].(string)
		act := el.AdHoc.Activity(id)
		if act == nil {
			return r, fmt.Errorf("activateElements item %d: %q is not an activity of %s it can activate", k+1, id, el.ID)
		}
		vars, ok := item["variables"].(map[string]any)
		if !ok && item["variables"] != nil {
			return r, fmt.Errorf("activateElements item %d: variables is %s, not a context", k+1, valueName(item["variables"]))
		}
		r.activate = append(r.activate, activation{el: act, vars: vars})
	}
	if r.fulfilled && len(r.activate) > 0 {
		return r, errors.New("it activates elements and fulfils the completion condition at once, which Zeebe refuses")
	}
	return r, nil
}
