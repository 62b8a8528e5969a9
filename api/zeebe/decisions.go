package zeebe

import (
	"context"
	"encoding/json"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/dmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// EvaluateDecision evaluates a deployed decision, by decisionId (its latest
// version) or decisionKey, as POST /v1/decisions/{id}/evaluation does
// (usecase.EvaluateDecision): under the step's expression limits and deadline,
// writing nothing. As in Zeebe, a failed evaluation is an answer, not an
// error: failedDecisionId and failureMessage say where and why, and
// evaluatedDecisions hold the decisions evaluated up to the failed one. A
// decision not deployed is NotFound.
func (g *Gateway) EvaluateDecision(ctx context.Context, req *pb.EvaluateDecisionRequest) (*pb.EvaluateDecisionResponse, error) {
	if err := checkTenant(req.TenantId); err != nil {
		return nil, err
	}
	if (req.DecisionId == "") == (req.DecisionKey <= 0) {
		return nil, status.Errorf(codes.InvalidArgument, "%s: name a decisionId or a decisionKey (positive), not both", fault.APIInvalid)
	}
	if err := api.CheckText("decisionId", req.DecisionId); err != nil {
		return nil, statusOf(err)
	}
	vars, err := api.DecodeVariables("variables", []byte(req.Variables))
	if err != nil {
		return nil, statusOf(err)
	}
	ev, err := g.deps.UseCases.EvaluateDecision(ctx, store.DecisionRef{ID: req.DecisionId, Key: req.DecisionKey}, vars)
	if err != nil {
		return nil, statusOf(err)
	}
	d := ev.Decision
	resp := &pb.EvaluateDecisionResponse{DecisionKey: d.Key, DecisionId: d.ID, DecisionName: d.Name, DecisionVersion: int32(d.Version),
		DecisionRequirementsId: d.DRG.ID, DecisionRequirementsKey: d.DRG.Key, TenantId: defaultTenant}
	var evaluated []dmn.DecisionResult
	if ev.Failure != nil {
		resp.FailedDecisionId, resp.FailureMessage = ev.Failure.DecisionID, ev.Failure.Error()
		evaluated = ev.Failure.Evaluated
	} else {
		if resp.DecisionOutput, err = jsonText(ev.Result.Output); err != nil {
			return nil, statusOf(err)
		}
		evaluated = ev.Result.Decisions
	}
	for _, r := range evaluated {
		e, err := evaluatedDecision(r, d.Keys[r.ID], ev.Failure != nil && r.ID == ev.Failure.DecisionID)
		if err != nil {
			return nil, statusOf(err)
		}
		resp.EvaluatedDecisions = append(resp.EvaluatedDecisions, e)
	}
	return resp, nil
}

// evaluatedDecision is one decision of an evaluation as Zeebe answers it:
// values as JSON text; the one that failed has no output.
func evaluatedDecision(r dmn.DecisionResult, key store.DecisionKey, failed bool) (*pb.EvaluatedDecision, error) {
	e := &pb.EvaluatedDecision{DecisionKey: key.Key, DecisionId: r.ID, DecisionName: r.Name, DecisionVersion: int32(key.Version),
		DecisionType: "LITERAL_EXPRESSION", TenantId: defaultTenant}
	if r.Table {
		e.DecisionType = "DECISION_TABLE"
	}
	var err error
	if !failed {
		if e.DecisionOutput, err = jsonText(r.Output); err != nil {
			return nil, err
		}
	}
	for _, in := range r.Inputs {
		v, err := jsonText(in.Value)
		if err != nil {
			return nil, err
		}
		e.EvaluatedInputs = append(e.EvaluatedInputs, &pb.EvaluatedDecisionInput{InputId: in.ID, InputName: in.Name, InputValue: v})
	}
	for _, m := range r.Matched {
		rule := &pb.MatchedDecisionRule{RuleId: m.ID, RuleIndex: int32(m.Index)}
		for _, o := range m.Outputs {
			v, err := jsonText(o.Value)
			if err != nil {
				return nil, err
			}
			rule.EvaluatedOutputs = append(rule.EvaluatedOutputs, &pb.EvaluatedDecisionOutput{OutputId: o.ID, OutputName: o.Name, OutputValue: v})
		}
		e.MatchedRules = append(e.MatchedRules, rule)
	}
	return e, nil
}

// jsonText is v (JSON-shaped, as dmn hands results out) as JSON text.
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
