package engine

import (
	"reflect"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// Moving the token waiting at a task to an end event ends the task (its
// waits closed) and runs the end event: the instance completes, with the
// variables given.
func TestAModificationMovesATokenAndRunsWhereItLands(t *testing.T) {
	x, _ := startTask(t)
	eff := x.step(Trigger{Kind: TriggerModify, Modification: &Modification{Cancel: []string{"t1"}, Activate: []string{"Refused"}},
		Variables: map[string]any{"why": "by hand"}})
	if !eff.Completed || !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1"}}) {
		t.Errorf("effects = %+v, want t1's waits closed and the instance completed", eff)
	}
	if x.in.State.Variables["why"] != "by hand" {
		t.Errorf("variables = %v, want why merged", x.in.State.Variables)
	}
}

// Activating an element beside the waiting token adds a token there.
func TestAModificationActivatesAnElementBesideTheTokens(t *testing.T) {
	x, _ := startTask(t)
	eff := x.step(Trigger{Kind: TriggerModify, Modification: &Modification{Activate: []string{"Charge"}}})
	if len(eff.Tasks) != 1 || eff.Tasks[0].Element != "Charge" || eff.Tasks[0].TokenID == "t1" {
		t.Errorf("tasks = %+v, want a second Charge task on a new token", eff.Tasks)
	}
	if at := x.at(); !reflect.DeepEqual(at, []string{"Charge/task", "Charge/task"}) {
		t.Errorf("tokens at %v, want two at Charge", at)
	}
}

func TestAModificationTheInstanceCannotTakeIsRefusedWhole(t *testing.T) {
	for name, m := range map[string]*Modification{
		"nothing":            {},
		"an unknown token":   {Cancel: []string{"t9"}, Activate: []string{"Done"}},
		"an unknown element": {Cancel: []string{"t1"}, Activate: []string{"Nope"}},
		"a boundary event":   {Activate: []string{"Declined"}},
		"no token left":      {Cancel: []string{"t1"}},
		"a token twice":      {Cancel: []string{"t1", "t1"}, Activate: []string{"Done"}},
	} {
		t.Run(name, func(t *testing.T) {
			x, _ := startTask(t)
			before := x.in.State
			if err := x.fail(Trigger{Kind: TriggerModify, Modification: m}); !fault.HasCode(err, fault.ModifyRefused) {
				t.Errorf("err = %v, want %s", err, fault.ModifyRefused)
			}
			if !reflect.DeepEqual(x.in.State, before) {
				t.Error("a refused modification changed the instance")
			}
		})
	}
}
