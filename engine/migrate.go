package engine

import (
	"fmt"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

// Migrate moves an active instance of definition from onto definition to.
// mapping names the target of source element ids; an element it does not
// name maps to the same id. Every token must land on an element that can
// hold it, in the scope its scope token lands on; otherwise Migrate returns
// a fault.MigrateUnreachable error naming the token and element, and no
// state.
//
// Tokens keep their ids, variables and incidents. The completed
// activities compensation may still undo (State.Compensable) move with
// the mapping too; one whose activity, or an embedded subprocess around
// it, has no counterpart of the same nature and nesting refuses the
// migration, as does a compensation that is running. A wait keeps its store
// row when its nature is unchanged (Effects.RenameWaits moves the row to
// the new element id, keeping a timer's due time and a task's lock); a
// subscription whose message name or correlation key expression changed is
// closed and opened again; a boundary event or event subprocess start the
// target no longer has is closed, and one the target adds is opened.
// Changing the instance's definition version is the store's part.
func Migrate(from, to *bpmn.Process, in Instance, mapping map[string]string, now time.Time) (State, Effects, error) {
	if in.State.Status != StatusActive {
		return State{}, Effects{}, fault.New(fault.NotWaiting, "instance %s is %s", in.ID, statusName(in.State.Status))
	}
	m := migration{from: from, to: to, in: &in, mapping: mapping}
	for _, t := range in.State.Tokens {
		if err := m.check(t); err != nil {
			return State{}, Effects{}, err
		}
	}
	s := newStepper(to, &in, now)
	for i := range s.tokens {
		if err := m.moveToken(s, i); err != nil {
			return State{}, Effects{}, err
		}
	}
	if err := m.moveWaits(s, -1, nil, eventSubStarts(to.EventSubs)); err != nil {
		return State{}, Effects{}, err
	}
	if err := m.migrateCompensable(s); err != nil {
		return State{}, Effects{}, err
	}
	return s.result(), s.eff, nil
}

type migration struct {
	from, to *bpmn.Process
	in       *Instance
	mapping  map[string]string
}

func (m *migration) target(id string) string {
	if t, ok := m.mapping[id]; ok {
		return t
	}
	return id
}

func unreachable(t Token, format string, args ...any) error {
	return fault.New(fault.MigrateUnreachable, "token %s at %s: %s", t.ID, t.Element, fmt.Sprintf(format, args...))
}

// check refuses token t unless its target element can hold it where it is.
func (m *migration) check(t Token) error {
	if t.Listener != nil {
		return fault.New(fault.MigrateListener, "token %s at %s is in its %s listeners (listener %d): migrate it once they are done",
			t.ID, t.Element, t.Listener.Event, t.Listener.Index+1)
	}
	if t.Wait == WaitTerminating || t.Then != nil {
		return fault.New(fault.MigrateListener, "token %s at %s is terminating, waiting for canceling listeners: migrate it once they are done",
			t.ID, t.Element)
	}
	el := m.from.Element(t.Element)
	tgt := m.to.Element(m.target(t.Element))
	if el == nil {
		return unreachable(t, "the instance's definition has no such element")
	}
	if tgt == nil {
		return unreachable(t, "the target definition has no element %q", m.target(t.Element))
	}
	if t.Comp != "" || t.Wait == WaitCompensation {
		// Its handlers run in the thrower's scope, not where the target
		// definition puts them.
		return unreachable(t, "a compensation is running: migrate once its handlers have completed")
	}
	if t.Activation || el.Kind == bpmn.KindAdHoc {
		return fault.New(fault.MigrateAdHoc, "token %s at %s: an instance inside an ad-hoc subprocess is not migrated; migrate it once the subprocess has completed", t.ID, t.Element)
	}
	ok := false
	switch t.Wait {
	case WaitMessage:
		ok = tgt.Kind == bpmn.KindMessageCatch
	case WaitTimer:
		ok = tgt.Kind == bpmn.KindTimerCatch
	case WaitSignal:
		ok = tgt.Kind == bpmn.KindSignalCatch
	case WaitTask:
		ok = tgt.Kind == bpmn.KindTask && (el.User == nil) == (tgt.User == nil)
	case WaitEvent:
		ok = tgt.Kind == bpmn.KindEventGateway
	case WaitChild:
		ok = tgt.Kind == bpmn.KindCallActivity
	case WaitScope, WaitIncident:
		ok = tgt.Kind == el.Kind
	case WaitMulti:
		ok = tgt.Kind == el.Kind && tgt.Loop != nil && tgt.Loop.OutputCollection == el.Loop.OutputCollection
	case WaitJoin:
		ok = tgt.Kind == bpmn.KindParallel && incomingFlow(tgt, t.Flow)
	}
	if !ok {
		return unreachable(t, "target %s %q cannot hold a token waiting as %s", tgt.Type, tgt.ID, t.Wait)
	}
	if (t.Loop > 0 || el.Loop != nil) != (tgt.Loop != nil) {
		return unreachable(t, "target %q is not multi-instance as %q is", tgt.ID, el.ID)
	}
	return m.checkScope(t, tgt)
}

func incomingFlow(el *bpmn.Element, flow string) bool {
	for _, f := range el.Incoming {
		if f.ID == flow {
			return true
		}
	}
	return false
}

// checkScope refuses a target element outside the target of the token's scope.
func (m *migration) checkScope(t Token, tgt *bpmn.Element) error {
	if t.Scope == "" {
		if tgt.Parent != nil {
			return unreachable(t, "target %q is inside %q, not at process level", tgt.ID, tgt.Parent.ID)
		}
		return nil
	}
	for _, p := range m.in.State.Tokens {
		if p.ID != t.Scope {
			continue
		}
		scope := m.to.Element(m.target(p.Element))
		if p.Wait == WaitMulti {
			// An inner instance stays with its body.
			if scope != tgt {
				return unreachable(t, "its multi-instance body goes to %q, not to %q", m.target(p.Element), tgt.ID)
			}
			return nil
		}
		if tgt.Parent != scope {
			return unreachable(t, "target %q is not inside %q, where its scope goes", tgt.ID, m.target(p.Element))
		}
		return nil
	}
	return unreachable(t, "its scope token %s is missing", t.Scope)
}

// moveToken moves token i to its target element and its waits with it.
func (m *migration) moveToken(s *stepper, i int) error {
	t := &s.tokens[i]
	tgt := s.def.Element(m.target(t.Element))
	t.Element = tgt.ID
	if t.Incident != nil {
		inc := *t.Incident
		inc.Element = tgt.ID
		t.Incident = &inc
	}
	var want []*bpmn.Element
	switch t.Wait {
	case WaitMessage, WaitTimer, WaitTask, WaitSignal:
		want = append(want, tgt)
	case WaitEvent:
		for _, f := range tgt.Outgoing {
			want = append(want, f.Target)
		}
	case WaitScope:
		want = eventSubStarts(tgt.EventSubs)
	case WaitJoin, WaitIncident:
		// A join holds no row. A token in an incident keeps what it has
		// (a failed task's boundary events) and opens nothing new: a
		// retry runs its element again.
		return m.moveWaits(s, i, tgt, nil)
	}
	if t.Loop == 0 {
		for _, b := range tgt.Boundaries {
			if b.Armable() {
				want = append(want, b)
			}
		}
	}
	return m.moveWaits(s, i, tgt, want)
}

func eventSubStarts(subs []*bpmn.Element) []*bpmn.Element {
	var out []*bpmn.Element
	for _, esp := range subs {
		if start := esp.SubStart; start.Armable() {
			out = append(out, start)
		}
	}
	return out
}

// moveWaits keeps, renames, closes or opens the waits of token i (-1 = the
// process level) so that it holds exactly the waits on want. A token in an
// incident (want nil, tgt set) keeps those of its waits the target still has.
func (m *migration) moveWaits(s *stepper, i int, tgt *bpmn.Element, want []*bpmn.Element) error {
	id, armed := s.armedOf(i)
	incident := i >= 0 && s.tokens[i].Wait == WaitIncident
	held := map[*bpmn.Element]bool{}
	var kept []Armed
	for _, a := range *armed {
		d := s.def.Element(m.target(a.Element))
		src := m.from.Element(a.Element)
		if d == nil || src == nil || !sameWait(src, d) || !(incident && d.AttachedTo == tgt || contains(want, d)) || held[d] {
			s.closeWaits(i, a.Element)
			continue
		}
		held[d] = true
		if d.ID != a.Element {
			s.eff.RenameWaits = append(s.eff.RenameWaits, WaitRename{TokenID: id, From: a.Element, To: d.ID})
			a.Element = d.ID
		}
		kept = append(kept, a)
	}
	// closeWaits rewrote the list: what is left is exactly kept.
	*armed = kept
	ctx := s.view(i)
	for _, d := range want {
		if held[d] {
			continue
		}
		if d.Task != nil {
			continue // a task's row is always kept: the token's own wait
		}
		var err error
		if *armed, err = s.openEvent(id, d, ctx, *armed); err != nil {
			return fault.Wrap(fault.MigrateUnreachable, err, "token %s at %s: opening %s", id, tgtID(tgt), d.ID)
		}
	}
	return nil
}

func tgtID(tgt *bpmn.Element) string {
	if tgt == nil {
		return "the process level"
	}
	return tgt.ID
}

func contains(list []*bpmn.Element, el *bpmn.Element) bool {
	for _, x := range list {
		if x == el {
			return true
		}
	}
	return false
}

// sameWait reports whether the row of wait src can serve wait d unchanged.
func sameWait(src, d *bpmn.Element) bool {
	switch {
	case src.Task != nil:
		return d.Task != nil
	case src.Timer != nil:
		return d.Timer != nil
	case src.Signal != nil:
		return d.Signal != nil && d.Signal.Name == src.Signal.Name && sameExpr(src.Signal.NameExpression, d.Signal.NameExpression)
	case src.Message != nil:
		return d.Message != nil && d.Message.Name == src.Message.Name &&
			sameExpr(src.Message.NameExpression, d.Message.NameExpression) &&
			sameExpr(src.Message.CorrelationKey, d.Message.CorrelationKey)
	}
	return false
}

// sameExpr reports whether two optional expressions are the same text.
func sameExpr(a, b *feel.Expr) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Source() == b.Source()
}
