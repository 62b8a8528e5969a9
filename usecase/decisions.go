package usecase

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sutra-run/worker/dmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/store"
)

// DecisionEvaluation is a deployed decision's evaluation: the decision
// found, and its result or, when the evaluation failed, why.
type DecisionEvaluation struct {
	Decision store.FoundDecision
	Result   *dmn.Result
	Failure  *dmn.Failure
}

// EvaluateDecision finds the decision ref names and evaluates it over vars
// as a business rule task does: under the expression limits and the step
// deadline, writing nothing. A decision not deployed is
// fault.AdminNotFound; a failed evaluation is no error, its Failure says
// why.
func (u *UseCases) EvaluateDecision(ctx context.Context, ref store.DecisionRef, vars map[string]any) (DecisionEvaluation, error) {
	found, err := u.deps.Store.FindDecision(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		what := fmt.Sprintf("decision %q version %d (0: the latest)", ref.ID, ref.Version)
		if ref.Key != 0 {
			what = fmt.Sprintf("decision key %d", ref.Key)
		}
		return DecisionEvaluation{}, fault.New(fault.AdminNotFound, "%s is not deployed", what)
	}
	if err != nil {
		return DecisionEvaluation{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, u.cfg.StepTimeout)
	defer cancel()
	res, err := found.Definitions.Evaluate(ctx, found.ID, vars, dmn.Options{Env: feel.Env{Now: time.Now(), Limits: u.cfg.FeelLimits}})
	var failed *dmn.Failure
	if errors.As(err, &failed) {
		return DecisionEvaluation{Decision: found, Failure: failed}, nil
	}
	return DecisionEvaluation{Decision: found, Result: res}, err
}
