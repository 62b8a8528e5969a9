package zeebe_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

// deployDecisions deploys a DMN file through the gateway and answers its
// decisions' metadata by decision id.
func (b *bundle) deployDecisions(t *testing.T, path string) map[string]*pb.DecisionMetadata {
	t.Helper()
	resp, err := b.client.NewDeployResourceCommand().AddResourceFile(path).Send(testkit.Ctx(t))
	if err != nil {
		t.Fatalf("deploying %s: %v", path, err)
	}
	out := map[string]*pb.DecisionMetadata{}
	for _, d := range resp.Deployments {
		if m := d.GetDecision(); m != nil {
			out[m.DmnDecisionId] = m
		}
	}
	return out
}

func TestEvaluateDecisionAnswersTheOutputAndEveryDecisionWithItsMatchedRules(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	deployed := b.deployDecisions(t, "../../dmn/testdata/dinner.dmn")
	guests := map[string]any{"season": "Winter", "guestCount": 6, "guestsWithChildren": true}
	cmd, err := b.client.NewEvaluateDecisionCommand().DecisionId("beverages").VariablesFromMap(guests)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cmd.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bev := deployed["beverages"]
	if resp.DecisionKey != bev.DecisionKey || resp.DecisionId != "beverages" || resp.DecisionName != "Beverages" || resp.DecisionVersion != 1 ||
		resp.DecisionRequirementsId != "dinnerDecisions" || resp.DecisionRequirementsKey != bev.DecisionRequirementsKey ||
		resp.FailedDecisionId != "" || resp.FailureMessage != "" || resp.TenantId != "<default>" {
		t.Errorf("the evaluated decision: %v, want beverages (key %d) of dinnerDecisions (key %d)", resp, bev.DecisionKey, bev.DecisionRequirementsKey)
	}
	var output any
	if err := json.Unmarshal([]byte(resp.DecisionOutput), &output); err != nil || !reflect.DeepEqual(output, []any{"Bordeaux", "Apple Juice", "Water"}) {
		t.Errorf("decisionOutput %q, want the drinks of a winter roastbeef with children", resp.DecisionOutput)
	}
	if len(resp.EvaluatedDecisions) != 2 {
		t.Fatalf("evaluatedDecisions: %v, want dish then beverages", resp.EvaluatedDecisions)
	}
	dish, drinks := resp.EvaluatedDecisions[0], resp.EvaluatedDecisions[1]
	if dish.DecisionId != "dish" || dish.DecisionKey != deployed["dish"].DecisionKey || dish.DecisionVersion != 1 ||
		dish.DecisionType != "DECISION_TABLE" || dish.DecisionOutput != `"Roastbeef"` {
		t.Errorf("dish: %v", dish)
	}
	var inputs []string
	for _, in := range drinks.EvaluatedInputs {
		inputs = append(inputs, in.InputId+"="+in.InputValue)
	}
	if want := []string{`Input_3="Roastbeef"`, `Input_4=true`}; !reflect.DeepEqual(inputs, want) {
		t.Errorf("beverages' inputs: %v, want %v", inputs, want)
	}
	var rules []string
	for _, r := range drinks.MatchedRules {
		for _, o := range r.EvaluatedOutputs {
			rules = append(rules, r.RuleId+":"+o.OutputName+"="+o.OutputValue)
		}
	}
	if want := []string{`DecisionRule_roastbeef:beverages="Bordeaux"`, `DecisionRule_children:beverages="Apple Juice"`, `DecisionRule_water:beverages="Water"`}; !reflect.DeepEqual(rules, want) {
		t.Errorf("beverages' matched rules: %v, want %v", rules, want)
	}

	// By key, the decision that key names.
	byKey, err := b.client.NewEvaluateDecisionCommand().DecisionKey(deployed["dish"].DecisionKey).VariablesFromString(`{"season":"Summer","guestCount":2}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := byKey.Send(ctx); err != nil || resp.DecisionId != "dish" || len(resp.EvaluatedDecisions) != 1 {
		t.Errorf("by key: %v, %v", resp, err)
	}
}

// A failed evaluation is an answer, as in Zeebe: the failed decision, why,
// and the decisions evaluated up to it.
func TestEvaluateDecisionAnswersAFailureWithTheFailedDecision(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	deployed := b.deployDecisions(t, "testdata/overlap.dmn")
	cmd, err := b.client.NewEvaluateDecisionCommand().DecisionId("risk").VariablesFromString(`{"amount": 20}`)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cmd.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.DecisionId != "risk" || resp.DecisionKey != deployed["risk"].DecisionKey || resp.FailedDecisionId != "base" ||
		!containsAll(resp.FailureMessage, fault.IncidentDecisionFailed, "UNIQUE", "over10", "over5") || resp.DecisionOutput != "" {
		t.Errorf("failed evaluation: %v, want risk failed at base's UNIQUE table naming both rules", resp)
	}
	if len(resp.EvaluatedDecisions) != 1 || resp.EvaluatedDecisions[0].DecisionId != "base" || resp.EvaluatedDecisions[0].DecisionOutput != "" {
		t.Errorf("evaluatedDecisions: %v, want base alone, with no output", resp.EvaluatedDecisions)
	}
	// Below 10 one rule matches, and risk evaluates.
	ok, _ := b.client.NewEvaluateDecisionCommand().DecisionId("risk").VariablesFromString(`{"amount": 7}`)
	if resp, err := ok.Send(ctx); err != nil || resp.DecisionOutput != `"risk: medium"` || resp.FailedDecisionId != "" {
		t.Errorf("amount 7: %v, %v", resp, err)
	}
}

func TestEvaluateDecisionRefusesBadInput(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	deployed := b.deployDecisions(t, "testdata/overlap.dmn")
	_, err := b.client.NewEvaluateDecisionCommand().DecisionId("nope").Send(ctx)
	wantStatus(t, err, codes.NotFound, fault.AdminNotFound, `"nope"`)
	_, err = b.client.NewEvaluateDecisionCommand().DecisionKey(deployed["risk"].DecisionKey + 1000).Send(ctx)
	wantStatus(t, err, codes.NotFound, fault.AdminNotFound, "key")

	raw := b.raw(t)
	for _, req := range []*pb.EvaluateDecisionRequest{
		{DecisionId: "risk", Variables: `{"amount": `},
		{DecisionId: "risk", Variables: `[1]`},
		{DecisionId: "risk", DecisionKey: deployed["risk"].DecisionKey},
		{},
		{DecisionId: "risk", TenantId: "other"},
	} {
		_, err = raw.EvaluateDecision(ctxAs(t, adminToken), req)
		wantStatus(t, err, codes.InvalidArgument, fault.APIInvalid)
	}
	// Evaluating is an operator's call, as on /v1.
	_, err = dial(t, b.w.GatewayAddr(), taskToken).NewEvaluateDecisionCommand().DecisionId("risk").Send(ctx)
	wantStatus(t, err, codes.PermissionDenied, fault.APIForbidden)
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
