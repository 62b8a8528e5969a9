package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/admin/wire"
	"github.com/sutra-run/worker/dmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/store"
)

// Evaluator evaluates deployed decisions as a business rule task does:
// under the expression limits and the step deadline, writing nothing. POST
// /v1/decisions/{id}/evaluation and the Zeebe gateway's EvaluateDecision
// both evaluate through it.
type Evaluator struct {
	// Find finds a deployed decision (store.Store.FindDecision).
	Find        func(ctx context.Context, ref store.DecisionRef) (store.FoundDecision, error)
	StepTimeout time.Duration
	FeelLimits  feel.Limits
}

// DecisionEvaluation is a deployed decision's evaluation: the decision
// found, and its result or, when the evaluation failed, why.
type DecisionEvaluation struct {
	Decision store.FoundDecision
	Result   *dmn.Result
	Failure  *dmn.Failure
}

// Evaluate finds the decision ref names and evaluates it over vars. A
// decision not deployed is fault.AdminNotFound; a failed evaluation is no
// error, its Failure says why.
func (e Evaluator) Evaluate(ctx context.Context, ref store.DecisionRef, vars map[string]any) (DecisionEvaluation, error) {
	found, err := e.Find(ctx, ref)
	if isNotFound(err) {
		what := fmt.Sprintf("decision %q version %d (0: the latest)", ref.ID, ref.Version)
		if ref.Key != 0 {
			what = fmt.Sprintf("decision key %d", ref.Key)
		}
		return DecisionEvaluation{}, fault.New(fault.AdminNotFound, "%s is not deployed", what)
	}
	if err != nil {
		return DecisionEvaluation{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.StepTimeout)
	defer cancel()
	res, err := found.Definitions.Evaluate(ctx, found.ID, vars, dmn.Options{Env: feel.Env{Now: time.Now(), Limits: e.FeelLimits}})
	var failed *dmn.Failure
	if errors.As(err, &failed) {
		return DecisionEvaluation{Decision: found, Failure: failed}, nil
	}
	return DecisionEvaluation{Decision: found, Result: res}, err
}

// evaluate answers POST /v1/decisions/{id}/evaluation: the output of the
// decision and of those it requires, with the rules that matched; a failed
// evaluation is a 422 with its code.
func (s *API) evaluate(c *adminCall) (answer, error) {
	var req wire.EvaluationRequest
	if err := s.decodeAdmin(c, &req); err != nil {
		return answer{}, err
	}
	if err := api.CheckInt32("version", req.Version); err != nil {
		return answer{}, err
	}
	if req.Version < 0 {
		return answer{}, api.Invalidf("version, when set, is positive")
	}
	ev, err := s.evaluator().Evaluate(c.r.Context(), store.DecisionRef{ID: c.r.PathValue("id"), Version: req.Version}, req.Variables)
	if err != nil {
		return answer{}, err
	}
	if ev.Failure != nil {
		return answer{}, ev.Failure
	}
	d := ev.Decision
	body := wire.Evaluation{DecisionID: d.ID, Name: d.Name, Version: d.Version, ZeebeKey: d.Key,
		DRG:    wire.DRG{ID: d.DRG.ID, Name: d.DRG.Name, ZeebeKey: d.DRG.Key},
		Output: ev.Result.Output, Decisions: []wire.EvaluatedDecision{}}
	for _, r := range ev.Result.Decisions {
		key := d.Keys[r.ID]
		e := wire.EvaluatedDecision{DecisionID: r.ID, Name: r.Name, Version: key.Version, ZeebeKey: key.Key,
			Type: "literal_expression", Output: r.Output, Inputs: []wire.EvaluatedValue{}, MatchedRules: []wire.MatchedRule{}}
		if r.Table {
			e.Type = "decision_table"
		}
		for _, in := range r.Inputs {
			e.Inputs = append(e.Inputs, wire.EvaluatedValue{ID: in.ID, Name: in.Name, Value: in.Value})
		}
		for _, m := range r.Matched {
			outs := make(map[string]any, len(m.Outputs))
			for _, o := range m.Outputs {
				outs[o.Name] = o.Value
			}
			e.MatchedRules = append(e.MatchedRules, wire.MatchedRule{RuleID: m.ID, Index: m.Index, Outputs: outs})
		}
		body.Decisions = append(body.Decisions, e)
	}
	return answer{status: http.StatusOK, body: body}, nil
}

// decisionXML answers the DMN file a decision version was deployed from:
// what the console draws its table from.
func (s *API) decisionXML(c *adminCall) (answer, error) {
	id := c.r.PathValue("id")
	version, err := pathVersion(c)
	if err != nil {
		return answer{}, err
	}
	xml, err := s.deps.Store.DecisionXML(c.r.Context(), id, version)
	if isNotFound(err) {
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, fmt.Sprintf("decision %q version %d is not deployed", id, version))
	}
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, raw: []byte(xml), contentType: "application/xml"}, nil
}

func (s *API) evaluator() Evaluator {
	return Evaluator{Find: s.deps.Store.FindDecision, StepTimeout: s.cfg.StepTimeout, FeelLimits: s.cfg.FeelLimits}
}
