package usecase_test

import (
	"testing"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

func TestADecisionIsEvaluatedAsDeployedItsFailureIsAnAnswerAndAMissingOneNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.env.Deploy(t, "testdata/overlap.dmn")
	uc := b.w.UseCases()

	ev, err := uc.EvaluateDecision(t.Context(), store.DecisionRef{ID: "risk"}, map[string]any{"amount": 7})
	if err != nil || ev.Failure != nil {
		t.Fatalf("evaluating risk: %v, %v", err, ev.Failure)
	}
	if ev.Result.Output != "risk: medium" || ev.Decision.ID != "risk" {
		t.Errorf("risk of 7 is %v (decision %q), want \"risk: medium\"", ev.Result.Output, ev.Decision.ID)
	}

	ev, err = uc.EvaluateDecision(t.Context(), store.DecisionRef{ID: "risk"}, map[string]any{"amount": 11})
	if err != nil || ev.Failure == nil {
		t.Fatalf("risk of 11 (two UNIQUE rules match): %v, failure %v; want a failure and no error", err, ev.Failure)
	}

	_, err = uc.EvaluateDecision(t.Context(), store.DecisionRef{ID: "nope"}, nil)
	if fault.Code(err) != fault.AdminNotFound {
		t.Errorf("a decision not deployed: %v, want %s", err, fault.AdminNotFound)
	}
}
