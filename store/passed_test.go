package store

import (
	"slices"
	"testing"

	"github.com/sutra-run/worker/engine"
)

func TestAStepsPathJoinsItsBufferedMessagesAndIsCutAtMaxPassed(t *testing.T) {
	c := StepWrites{Effects: engine.Effects{Passed: []string{"S", "F1"}},
		Consumed: []Consumed{{Effects: engine.Effects{Passed: []string{"Paid", "F2"}}}}}
	if path, cut := passed(c.Effects, c.Consumed); !slices.Equal(path, []string{"S", "F1", "Paid", "F2"}) || cut {
		t.Errorf("path %v (cut %v), want the trigger's then the buffered message's, not cut", path, cut)
	}
	long := make([]string, engine.MaxPassed)
	c.Consumed[0].Effects.Passed = long
	if path, cut := passed(c.Effects, c.Consumed); len(path) != engine.MaxPassed || !cut || path[0] != "S" {
		t.Errorf("path of %d ids (cut %v), want the first %d and cut", len(path), cut, engine.MaxPassed)
	}
	if len(c.Effects.Passed) != 2 {
		t.Errorf("the step's own effects changed: %v", c.Effects.Passed)
	}
}
