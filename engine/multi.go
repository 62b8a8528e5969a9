package engine

import (
	"fmt"

	"github.com/sutra-run/worker/bpmn"
)

// Multi-instance activities, as Zeebe runs them. The token that reaches the
// activity becomes its body (WaitMulti): it holds the boundary events and
// the output collection, and counts the inner instances. Each inner
// instance is a token at the same element, scoped to the body, with Loop =
// its loopCounter and locals {inputElement: item, loopCounter}; it runs the
// activity as usual, without boundary events. Parallel inner instances all
// start with the body; sequential ones one after the other, each reading
// its item from the input collection evaluated again, as Zeebe does.

// multi activates the multi-instance body of el at token i.
func (s *stepper) multi(i int, el *bpmn.Element) {
	items, err := s.collection(i, el)
	if err != nil {
		s.exprIncident(i, err, err.Error(), StageActivate)
		return
	}
	if !s.park(i, el, WaitMulti) {
		return
	}
	s.tokens[i].Multi = Multi{Instances: len(items)}
	if out := el.Loop.OutputCollection; out != "" {
		s.ownLocals(i) // beside what its beforeAll listeners set
		s.tokens[i].Vars[out] = make([]any, len(items))
	}
	switch {
	case len(items) == 0:
		s.bodyDone(i, el)
	case el.Loop.Sequential:
		s.inner(i, el, 1, items[0])
	default:
		for k, item := range items {
			s.inner(i, el, k+1, item)
		}
	}
}

// collection evaluates el's input collection at token i.
func (s *stepper) collection(i int, el *bpmn.Element) ([]any, error) {
	e := el.Loop.InputCollection
	v, err := e.EvalIn(s.view(i), s.env(e, el, s.tokens[i].ID))
	if err != nil {
		return nil, fmt.Errorf("input collection of %s: %w", el.ID, err)
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("input collection of %s evaluated to %T, not a list", el.ID, v)
	}
	return items, nil
}

// inner starts inner instance loop (from 1) of body token b with item.
func (s *stepper) inner(b int, el *bpmn.Element, loop int, item any) {
	vars := map[string]any{"loopCounter": float64(loop)}
	if l := el.Loop; l.InputElement != "" {
		vars[l.InputElement] = item
	}
	if l := el.Loop; l.OutputLocal != "" {
		vars[l.OutputLocal] = nil
	}
	j := s.add(el, s.tokens[b].ID, "")
	s.tokens[j].Loop = loop
	s.setLocals(j, vars)
	s.queue = append(s.queue, j)
}

// innerDone ends inner instance i, its outputs applied: its output element
// goes into the body's output collection, then the completion condition,
// the next sequential instance or the last instance completes the body.
// Everything is evaluated before anything changes, so that a failure stops
// the inner instance in an incident a retry can resume.
func (s *stepper) innerDone(i int, el *bpmn.Element) {
	b, l := s.parentOf(i), el.Loop
	loop, ctx := s.tokens[i].Loop, s.view(i)
	fail := func(err error) { s.exprIncident(i, err, err.Error(), StageLeave) }

	var collected []any
	if l.OutputCollection != "" {
		out, err := l.OutputElement.EvalIn(ctx, s.env(l.OutputElement, el, s.tokens[i].ID))
		if err != nil {
			fail(fmt.Errorf("output element of %s: %w", el.ID, err))
			return
		}
		list, ok := s.tokens[b].Vars[l.OutputCollection].([]any)
		if !ok || loop > len(list) {
			fail(fmt.Errorf("output collection %s of %s is no longer a list of %d items", l.OutputCollection, el.ID, s.tokens[b].Multi.Instances))
			return
		}
		collected = make([]any, len(list))
		copy(collected, list)
		collected[loop-1] = out
	}
	active := -1 // this one is completing
	for j := range s.tokens {
		if s.tokens[j].Element != "" && s.tokens[j].Scope == s.tokens[b].ID {
			active++
		}
	}
	done := false
	if l.CompletionCondition != nil {
		counts := map[string]any{
			"numberOfInstances":           float64(s.tokens[b].Multi.Instances),
			"numberOfActiveInstances":     float64(active),
			"numberOfCompletedInstances":  float64(s.tokens[b].Multi.Completed + 1),
			"numberOfTerminatedInstances": float64(0),
		}
		var err error
		if done, err = l.CompletionCondition.EvalBoolIn(overlay(ctx, counts), s.env(l.CompletionCondition, el, s.tokens[i].ID)); err != nil {
			fail(fmt.Errorf("completion condition of %s: %w", el.ID, err))
			return
		}
	}
	var items []any
	if !done && l.Sequential {
		var err error
		if items, err = s.collection(b, el); err != nil {
			fail(err)
			return
		}
	}

	if collected != nil {
		s.ownLocals(b)
		s.tokens[b].Vars[l.OutputCollection] = collected
	}
	s.tokens[b].Multi.Completed++
	s.kill(i)
	switch {
	case done:
		if !s.halt(b, Then{Kind: ThenBody}) {
			s.bodyDone(b, el)
		}
	case l.Sequential && loop < len(items):
		s.inner(b, el, loop+1, items[loop])
	case l.Sequential || active == 0:
		s.bodyDone(b, el)
	}
}

// bodyDone completes multi-instance body b: its output collection goes to
// the enclosing scope, and the token leaves the activity.
func (s *stepper) bodyDone(b int, el *bpmn.Element) {
	locals, id := s.tokens[b].Vars, s.tokens[b].ID
	s.resume(b)
	s.bodyCompensated(b, el, id)
	t := &s.tokens[b]
	t.Vars, t.Multi = nil, Multi{}
	if out := el.Loop.OutputCollection; out != "" {
		s.write(s.parentOf(b), []string{out}, locals[out])
	}
	s.leave(b, el.Outgoing)
}
