package engine

import (
	"fmt"
	"slices"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// Compensation, as Zeebe runs it. When an activity with a compensation
// boundary event completes, the instance records it (State.Compensable) in
// the scope it completed in. When an embedded subprocess or a
// multi-instance body completes, the records of its content move to its
// own scope, remembering the subprocess (Compensable.In); a scope that ends
// any other way (interrupted, terminated, an event subprocess, a
// compensation handler) drops the records of its content, which can no
// longer be compensated. A compensation throw or end event takes the
// records of its scope (and, inside an event subprocess, of the event
// subprocess's scope), those of its activityRef only when it has one, and
// starts their handlers in its own scope, all at once, the latest
// completion first; it waits (WaitCompensation) until the last of them
// completes. A record is taken once: a second throw does not compensate
// the same completion again.
//
// The records are bounded: completions of one activity in one place share
// a record, so there is at most one per activity of the model and live
// scope token, however often a loop runs it.

// compensated is called when token i completes el, its outputs applied:
// the records of what completed inside it move out (or are dropped), and
// el itself is recorded when it has a compensation handler.
func (s *stepper) compensated(i int, el *bpmn.Element) {
	t := s.tokens[i]
	switch {
	case t.Comp != "" || el.Kind != bpmn.KindSubProcess:
		// A handler's content, an event subprocess's: not compensable.
		s.dropCompensable(t.ID)
	case t.Loop > 0:
		// An inner instance: its body completes the subprocess.
		s.moveCompensable(t.ID, t.Scope, "")
	default:
		s.moveCompensable(t.ID, t.Scope, el.ID)
	}
	if t.Loop == 0 && t.Comp == "" && el.CompensationHandler() != nil {
		s.addCompensable(Compensable{Element: el.ID, Scope: t.Scope, Times: 1})
	}
}

// bodyCompensated is compensated for multi-instance body b of el, whose
// id was id before it resumed: its handler runs once for all its inner
// instances, as in Zeebe.
func (s *stepper) bodyCompensated(b int, el *bpmn.Element, id string) {
	t := s.tokens[b]
	if t.Comp != "" {
		s.dropCompensable(id)
		return
	}
	s.moveCompensable(id, t.Scope, el.ID)
	if el.CompensationHandler() != nil {
		s.addCompensable(Compensable{Element: el.ID, Scope: t.Scope, Times: 1})
	}
}

// addCompensable records c as the latest completion, merging it into the
// record of the same activity and place.
func (s *stepper) addCompensable(c Compensable) {
	out := make([]Compensable, 0, len(s.comp)+1)
	for _, o := range s.comp {
		if o.Element == c.Element && o.Scope == c.Scope && slices.Equal(o.In, c.In) {
			c.Times += o.Times
			continue
		}
		out = append(out, o)
	}
	s.comp = append(out, c)
}

// moveCompensable moves the records of scope from to scope to, below the
// completed subprocess via ("" = none: an inner instance moving to its
// body), keeping their order.
func (s *stepper) moveCompensable(from, to, via string) {
	if !slices.ContainsFunc(s.comp, func(c Compensable) bool { return c.Scope == from }) {
		return
	}
	moved := slices.Clone(s.comp)
	s.comp = nil
	for _, c := range moved {
		if c.Scope == from {
			c.Scope = to
			if via != "" {
				c.In = append([]string{via}, c.In...)
			}
		}
		s.addCompensable(c)
	}
}

// rekeyCompensable follows scope token from, which resumes as to.
func (s *stepper) rekeyCompensable(from, to string) {
	if !slices.ContainsFunc(s.comp, func(c Compensable) bool { return c.Scope == from }) {
		return
	}
	out := slices.Clone(s.comp)
	for k := range out {
		if out[k].Scope == from {
			out[k].Scope = to
		}
	}
	s.comp = out
}

// dropCompensable forgets the records of scope token id, which ends
// without completing.
func (s *stepper) dropCompensable(id string) {
	if slices.ContainsFunc(s.comp, func(c Compensable) bool { return c.Scope == id }) {
		s.comp = slices.DeleteFunc(slices.Clone(s.comp), func(c Compensable) bool { return c.Scope == id })
	}
}

// compensate runs compensation throw or end event el at token i: it
// starts the handlers of the records it reaches and waits for them, or
// completes at once when it reaches none.
func (s *stepper) compensate(i int, el *bpmn.Element) {
	t := s.tokens[i]
	scopes := []string{t.Scope}
	if el.Parent != nil && el.Parent.Kind == bpmn.KindEventSubProcess {
		scopes = append(scopes, s.tokens[s.parentOf(i)].Scope)
	}
	var taken, kept []Compensable
	handlers := 0
	for _, c := range s.comp {
		if slices.Contains(scopes, c.Scope) && reaches(el.Compensation.Activity, c) {
			taken = append(taken, c)
			handlers += c.Times
		} else {
			kept = append(kept, c)
		}
	}
	if len(taken) == 0 {
		s.complete(i, el, nil)
		return
	}
	if handlers > maxExecutions-s.runs {
		s.fail = fault.New(fault.StepFailed, "instance %s: %s would start %d compensation handlers, more than the %d elements a step may execute",
			s.in.ID, el.ID, handlers, maxExecutions)
		return
	}
	s.comp = kept
	s.tokens[i].Wait = WaitCompensation
	for k := len(taken) - 1; k >= 0; k-- {
		h := s.def.Element(taken[k].Element).CompensationHandler()
		for range taken[k].Times {
			j := s.add(h, t.Scope, "")
			s.tokens[j].Comp = t.ID
			s.queue = append(s.queue, j)
		}
	}
}

// reaches reports whether a throw whose activityRef is activity (nil =
// none) compensates record c of its scope.
func reaches(activity *bpmn.Element, c Compensable) bool {
	switch {
	case activity == nil:
		return true
	case len(c.In) > 0:
		return c.In[0] == activity.ID
	}
	return c.Element == activity.ID
}

// handled is called when a handler of the throw token id has completed:
// after the last one the throw completes. It reports false when the throw
// is gone.
func (s *stepper) handled(id string) bool {
	if slices.ContainsFunc(s.tokens, func(t Token) bool { return t.Element != "" && t.Comp == id }) {
		return true
	}
	j := s.indexOf(id)
	if j < 0 || s.tokens[j].Wait != WaitCompensation {
		return false
	}
	el := s.def.Element(s.tokens[j].Element)
	s.resume(j)
	s.complete(j, el, nil)
	return true
}

// migrateCompensable maps the records of an instance onto definition to
// (see Migrate): each activity and subprocess must keep its nature and
// nesting, in the scope its scope token goes to.
func (m *migration) migrateCompensable(s *stepper) error {
	records := s.comp
	s.comp = nil
	for _, c := range records {
		var parent *bpmn.Element
		if c.Scope != "" {
			k := slices.IndexFunc(m.in.State.Tokens, func(t Token) bool { return t.ID == c.Scope })
			if k < 0 {
				return fault.New(fault.MigrateUnreachable, "compensation record of %s: its scope token %s is missing", c.Element, c.Scope)
			}
			parent = m.to.Element(m.target(m.in.State.Tokens[k].Element))
		}
		out := Compensable{Scope: c.Scope, Times: c.Times}
		for n, id := range append(slices.Clone(c.In), c.Element) {
			d := m.to.Element(m.target(id))
			var why string
			switch {
			case d == nil:
				why = fmt.Sprintf("the target definition has no element %q", m.target(id))
			case d.Parent != parent:
				why = fmt.Sprintf("target %q is not where %q completed", d.ID, id)
			case n < len(c.In) && d.Kind != bpmn.KindSubProcess:
				why = fmt.Sprintf("target %q is not an embedded subprocess", d.ID)
			case n == len(c.In) && d.CompensationHandler() == nil:
				why = fmt.Sprintf("target %q has no compensation handler", d.ID)
			}
			if why != "" {
				return fault.New(fault.MigrateUnreachable, "compensation record of %s (completed %d times, not compensated yet): %s", c.Element, c.Times, why)
			}
			if n < len(c.In) {
				out.In = append(out.In, d.ID)
			} else {
				out.Element = d.ID
			}
			parent = d
		}
		s.addCompensable(out)
	}
	return nil
}
