package rest

import (
	"encoding/json"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/dmn"
	"github.com/sutra-run/worker/store"
)

type evaluatedInput struct {
	InputID    string `json:"inputId"`
	InputName  string `json:"inputName"`
	InputValue string `json:"inputValue"`
}

type evaluatedOutput struct {
	OutputID    string `json:"outputId"`
	OutputName  string `json:"outputName"`
	OutputValue string `json:"outputValue"`
}

type matchedRule struct {
	RuleID           string            `json:"ruleId"`
	RuleIndex        int               `json:"ruleIndex"`
	EvaluatedOutputs []evaluatedOutput `json:"evaluatedOutputs"`
}

type evaluatedDecision struct {
	DecisionDefinitionID      string           `json:"decisionDefinitionId"`
	DecisionDefinitionName    string           `json:"decisionDefinitionName"`
	DecisionDefinitionVersion int              `json:"decisionDefinitionVersion"`
	DecisionDefinitionType    string           `json:"decisionDefinitionType"`
	Output                    string           `json:"output,omitempty"`
	TenantID                  string           `json:"tenantId"`
	MatchedRules              []matchedRule    `json:"matchedRules"`
	EvaluatedInputs           []evaluatedInput `json:"evaluatedInputs"`
	DecisionDefinitionKey     Key              `json:"decisionDefinitionKey"`
}

// evaluateDecision evaluates a deployed decision, by decisionDefinitionId
// (its latest version) or decisionDefinitionKey (usecase.EvaluateDecision):
// under the step's expression limits and deadline, writing nothing. A
// failed evaluation is an answer, not an error, as in Camunda:
// failedDecisionDefinitionId and failureMessage say where and why.
func (a *API) evaluateDecision(c *call) (answer, error) {
	var req struct {
		DecisionDefinitionID  string          `json:"decisionDefinitionId"`
		DecisionDefinitionKey Key             `json:"decisionDefinitionKey"`
		Variables             json.RawMessage `json:"variables"`
		TenantID              string          `json:"tenantId"`
	}
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	if err := checkTenants(req.TenantID); err != nil {
		return answer{}, err
	}
	if (req.DecisionDefinitionID == "") == (req.DecisionDefinitionKey <= 0) {
		return answer{}, api.Invalidf("name a decisionDefinitionId or a decisionDefinitionKey, not both")
	}
	if err := api.CheckText("decisionDefinitionId", req.DecisionDefinitionID); err != nil {
		return answer{}, err
	}
	vars, err := variables(req.Variables)
	if err != nil {
		return answer{}, err
	}
	ev, err := a.deps.UseCases.EvaluateDecision(c.ctx(), store.DecisionRef{ID: req.DecisionDefinitionID, Key: int64(req.DecisionDefinitionKey)}, vars)
	if err != nil {
		return answer{}, err
	}
	key, err := a.deps.Store.NextKey(c.ctx())
	if err != nil {
		return answer{}, err
	}
	d := ev.Decision
	out := map[string]any{"decisionDefinitionId": d.ID, "decisionDefinitionName": d.Name, "decisionDefinitionVersion": d.Version,
		"decisionRequirementsId": d.DRG.ID, "tenantId": defaultTenant, "decisionDefinitionKey": Key(d.Key),
		"decisionRequirementsKey": Key(d.DRG.Key), "decisionEvaluationKey": Key(key), "output": "", "failedDecisionDefinitionId": "",
		"failureMessage": ""}
	var evaluated []dmn.DecisionResult
	if ev.Failure != nil {
		out["failedDecisionDefinitionId"], out["failureMessage"] = ev.Failure.DecisionID, ev.Failure.Error()
		evaluated = ev.Failure.Evaluated
	} else {
		if out["output"], err = jsonText(ev.Result.Output); err != nil {
			return answer{}, err
		}
		evaluated = ev.Result.Decisions
	}
	decisions := []evaluatedDecision{}
	for _, r := range evaluated {
		k := d.Keys[r.ID]
		e := evaluatedDecision{DecisionDefinitionID: r.ID, DecisionDefinitionName: r.Name, DecisionDefinitionVersion: k.Version,
			DecisionDefinitionType: "LITERAL_EXPRESSION", TenantID: defaultTenant, DecisionDefinitionKey: Key(k.Key),
			MatchedRules: []matchedRule{}, EvaluatedInputs: []evaluatedInput{}}
		if r.Table {
			e.DecisionDefinitionType = "DECISION_TABLE"
		}
		if ev.Failure == nil || r.ID != ev.Failure.DecisionID {
			if e.Output, err = jsonText(r.Output); err != nil {
				return answer{}, err
			}
		}
		for _, in := range r.Inputs {
			v, err := jsonText(in.Value)
			if err != nil {
				return answer{}, err
			}
			e.EvaluatedInputs = append(e.EvaluatedInputs, evaluatedInput{InputID: in.ID, InputName: in.Name, InputValue: v})
		}
		for _, m := range r.Matched {
			rule := matchedRule{RuleID: m.ID, RuleIndex: m.Index, EvaluatedOutputs: []evaluatedOutput{}}
			for _, o := range m.Outputs {
				v, err := jsonText(o.Value)
				if err != nil {
					return answer{}, err
				}
				rule.EvaluatedOutputs = append(rule.EvaluatedOutputs, evaluatedOutput{OutputID: o.ID, OutputName: o.Name, OutputValue: v})
			}
			e.MatchedRules = append(e.MatchedRules, rule)
		}
		decisions = append(decisions, e)
	}
	out["evaluatedDecisions"] = decisions
	return ok(out), nil
}

// jsonText is v (JSON-shaped, as dmn hands results out) as JSON text.
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
