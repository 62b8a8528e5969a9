package admin

import (
	"fmt"
	"net/http"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/admin/wire"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

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
	ev, err := s.deps.UseCases.EvaluateDecision(c.r.Context(), store.DecisionRef{ID: c.r.PathValue("id"), Version: req.Version}, req.Variables)
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
