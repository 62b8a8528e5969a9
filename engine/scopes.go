package engine

import (
	"slices"

	"github.com/sutra-run/worker/bpmn"
)

// Variable scopes. Every token may hold local variables (Token.Vars): the
// element instance it is, and for a scope token everything inside it. A
// name is looked up from a token outwards through its enclosing scope
// tokens to the instance variables; a write goes to the nearest scope that
// defines the name, else to the instance variables (Zeebe's propagation).
// Most instances have no locals at all: then every lookup is the instance
// map itself and nothing is copied.

// parentOf returns the index of token i's scope token, or -1 at process level.
func (s *stepper) parentOf(i int) int {
	if i < 0 || s.tokens[i].Scope == "" {
		return -1
	}
	return s.indexOf(s.tokens[i].Scope)
}

// hasLocals reports whether token i or a scope around it holds locals.
func (s *stepper) hasLocals(i int) bool {
	for j := i; j >= 0; j = s.parentOf(j) {
		if len(s.tokens[j].Vars) > 0 || s.tokens[j].Activation {
			return true
		}
	}
	return false
}

// view returns the variables visible at token i (-1 = process level): the
// instance map itself when no locals are in scope, else a new map. Callers
// only read it, or hand it out through handOut.
func (s *stepper) view(i int) map[string]any {
	n := 0
	for j := i; j >= 0; j = s.parentOf(j) {
		n += len(s.tokens[j].Vars)
	}
	if n == 0 {
		return s.vars
	}
	m := make(map[string]any, len(s.vars)+n)
	for k, v := range s.vars {
		m[k] = v
	}
	s.overlayLocals(m, i)
	return m
}

// overlayLocals copies the locals of token i's scopes into m, outermost first.
func (s *stepper) overlayLocals(m map[string]any, i int) {
	if i < 0 {
		return
	}
	s.overlayLocals(m, s.parentOf(i))
	for k, v := range s.tokens[i].Vars {
		m[k] = v
	}
}

// handOut returns ctx, token i's view, for an effect to hold (task
// variables, a payload, a child's variables). When it is the instance map
// itself, the next write of this step copies that first.
func (s *stepper) handOut(i int, ctx map[string]any) map[string]any {
	if !s.hasLocals(i) {
		return s.shareVars()
	}
	return ctx
}

// input returns the locals a pull task of token i carries (nil when it has
// none): those of its scope tokens, outermost first, as view overlays them,
// leaving out a multi-instance body's output collection being gathered (a
// list as long as the input collection, which every inner instance's task
// would otherwise copy; what its beforeAll listeners set is kept). The
// instance variables are not copied: a worker reads them when it fetches
// the task.
func (s *stepper) input(i int) map[string]any {
	var m map[string]any
	var overlay func(j int)
	overlay = func(j int) {
		if j < 0 {
			return
		}
		overlay(s.parentOf(j))
		var skip []string
		switch el := s.def.Element(s.tokens[j].Element); {
		case s.tokens[j].Wait == WaitMulti:
			skip = []string{el.Loop.OutputCollection}
		case j != i && el.Kind == bpmn.KindAdHoc && !s.tokens[j].Activation:
			skip = []string{AdHocElements, el.AdHoc.OutputCollection} // for its job, not for every task inside
		}
		for k, v := range s.tokens[j].Vars {
			if slices.Contains(skip, k) {
				continue
			}
			if m == nil {
				m = make(map[string]any, len(s.tokens[j].Vars))
			}
			m[k] = v
		}
	}
	overlay(i)
	return m
}

// scopeOf returns the index of the nearest token from i outwards whose
// locals define name, or of the ad-hoc activation around i (what runs in
// one keeps its writes, as in Zeebe), or -1 for the instance variables.
func (s *stepper) scopeOf(i int, name string) int {
	for j := i; j >= 0; j = s.parentOf(j) {
		if _, ok := s.tokens[j].Vars[name]; ok || s.tokens[j].Activation {
			return j
		}
	}
	return -1
}

// write sets path to v in the nearest scope from token i outwards (-1 = the
// instance variables) that defines path's first name.
func (s *stepper) write(i int, path []string, v any) {
	j := s.scopeOf(i, path[0])
	if j < 0 {
		s.own()
		setPath(s.vars, path, v)
		return
	}
	s.ownLocals(j)
	setPath(s.tokens[j].Vars, path, v)
}

// mergeFrom writes every name of vars from token i outwards.
func (s *stepper) mergeFrom(i int, vars map[string]any) {
	if len(vars) == 0 {
		return
	}
	if !s.hasLocals(i) {
		s.merge(vars)
		return
	}
	for k, v := range vars {
		s.write(i, []string{k}, v)
	}
}

// ownLocals makes token j's locals a map this step may write.
func (s *stepper) ownLocals(j int) {
	if slices.Contains(s.owned, j) {
		return
	}
	m := make(map[string]any, len(s.tokens[j].Vars)+1)
	for k, v := range s.tokens[j].Vars {
		m[k] = v
	}
	s.setLocals(j, m)
}

// setLocals gives token j a locals map made by this step.
func (s *stepper) setLocals(j int, vars map[string]any) {
	if !slices.Contains(s.owned, j) {
		s.owned = append(s.owned, j)
	}
	s.tokens[j].Vars = vars
}

// localInputs evaluates el's input mappings into token i's locals (an inner
// instance keeps its item and loopCounter beside them).
func (s *stepper) localInputs(i int, el *bpmn.Element) bool {
	locals := make(map[string]any, len(s.tokens[i].Vars)+len(el.Inputs))
	for k, v := range s.tokens[i].Vars {
		locals[k] = v
	}
	if err := s.mapInto(el, s.tokens[i].ID, el.Inputs, s.view(i), locals); err != nil {
		s.exprIncident(i, err, err.Error(), StageActivate)
		return false
	}
	s.setLocals(i, locals)
	return true
}
