package api_test

import (
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// A Camunda Modeler DRG (dmn/testdata/dinner.dmn: beverages requires dish)
// called by a Modeler process's business rule task, end to end through the
// worker: the process deploys before its decision, its instance stops in an
// incident, the decision is deployed, a retry continues the instance, and
// /v1 evaluates the decision to what the instance got.
func TestABusinessRuleTaskRunsItsDecisionOnceDeployedAndAgreesWithTheV1Evaluation(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	bpmnFile, err := os.ReadFile("testdata/dinner.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	dmnFile, err := os.ReadFile("../dmn/testdata/dinner.dmn")
	if err != nil {
		t.Fatal(err)
	}
	if status, p := b.do(t, "POST", "/definitions", bpmnFile); status != http.StatusCreated || p["kind"] != "bpmn" || p["key"] != "dinner" {
		t.Fatalf("deploying the process before its decision: %d %v", status, p)
	}
	guests := map[string]any{"season": "Winter", "guestCount": 6, "guestsWithChildren": true}
	if status, p := b.do(t, "POST", "/instances", map[string]any{"definition": "dinner", "instance_id": "d-1", "variables": guests}); status != http.StatusCreated {
		t.Fatalf("start: %d %v", status, p)
	}
	_, list := b.do(t, "GET", "/incidents?open=true&instance_id=d-1", nil)
	incidents, _ := asList(list["incidents"])
	if len(incidents) != 1 || incidents[0]["code"] != fault.IncidentDecisionFailed ||
		!strings.Contains(fmt.Sprint(incidents[0]["message"]), `no decision "beverages" is deployed`) {
		t.Fatalf("incidents = %v, want one %s naming the missing decision", incidents, fault.IncidentDecisionFailed)
	}

	// The DRG's two decisions deploy at version 1; the same bytes again
	// are unchanged.
	status, p := b.do(t, "POST", "/definitions", dmnFile)
	decisions, _ := asList(p["decisions"])
	if status != http.StatusCreated || p["kind"] != "dmn" || p["key"] != "dish" || len(decisions) != 2 ||
		decisions[1]["decision_id"] != "beverages" || decisions[1]["version"] != 1.0 {
		t.Fatalf("deploying the DRG: %d %v", status, p)
	}
	if status, p := b.do(t, "POST", "/definitions", dmnFile); status != http.StatusOK || p["unchanged"] != true {
		t.Errorf("redeploying the same DRG: %d %v, want 200 unchanged", status, p)
	}
	if status, p := b.do(t, "POST", "/incidents/"+fmt.Sprint(incidents[0]["id"])+"/retry", nil); status != http.StatusOK || p["resolved"] != true {
		t.Fatalf("retry: %d %v", status, p)
	}
	_, inst := b.do(t, "GET", "/instances/d-1", nil)
	vars, _ := inst["variables"].(map[string]any)
	want := []any{"Bordeaux", "Apple Juice", "Water"} // Roastbeef for 6 in winter, children, and water always
	if inst["status"] != "completed" || !reflect.DeepEqual(vars["drinks"], want) {
		t.Fatalf("after the retry: %v with drinks %v, want completed with %v", inst["status"], vars["drinks"], want)
	}

	status, ev := b.do(t, "POST", "/decisions/beverages/evaluation", map[string]any{"variables": guests})
	if status != http.StatusOK || !reflect.DeepEqual(ev["output"], vars["drinks"]) || ev["version"] != 1.0 {
		t.Fatalf("evaluation: %d %v, want the instance's %v", status, ev, vars["drinks"])
	}
	evaluated, _ := asList(ev["decisions"])
	if len(evaluated) != 2 || evaluated[0]["decision_id"] != "dish" || evaluated[0]["output"] != "Roastbeef" {
		t.Fatalf("decisions evaluated = %v, want dish (Roastbeef) then beverages", evaluated)
	}
	drg, _ := ev["drg"].(map[string]any)
	if key, _ := ev["zeebe_key"].(string); ev["name"] != "Beverages" || key == "" || key != evaluated[1]["zeebe_key"] || drg["id"] != "dinnerDecisions" ||
		evaluated[1]["type"] != "decision_table" || evaluated[1]["version"] != 1.0 {
		t.Errorf("evaluation of beverages: %v, want its name, key, graph and type", ev)
	}
	inputs, _ := asList(evaluated[1]["inputs"])
	if len(inputs) != 2 || inputs[0]["value"] != "Roastbeef" || inputs[1]["value"] != true {
		t.Errorf("beverages' inputs = %v, want Dish Roastbeef and children true", inputs)
	}
	var matched []string
	rules, _ := asList(evaluated[1]["matched_rules"])
	for _, r := range rules {
		matched = append(matched, fmt.Sprint(r["rule_id"]))
	}
	if want := []string{"DecisionRule_roastbeef", "DecisionRule_children", "DecisionRule_water"}; !reflect.DeepEqual(matched, want) {
		t.Errorf("beverages matched %v, want %v", matched, want)
	}

	// The list pages by decision id and version.
	_, page1 := b.do(t, "GET", "/decisions?limit=1", nil)
	first, _ := asList(page1["decisions"])
	if len(first) != 1 || first[0]["decision_id"] != "beverages" || page1["next"] != "beverages:1" {
		t.Fatalf("first page: %v", page1)
	}
	_, page2 := b.do(t, "GET", "/decisions?limit=1&after=beverages:1", nil)
	if second, _ := asList(page2["decisions"]); len(second) != 1 || second[0]["decision_id"] != "dish" || second[0]["version_tag"] != nil {
		t.Errorf("second page: %v", page2)
	}

	// A decision that fails (two rules of base's UNIQUE table match) is a
	// 422 with its code, naming the decision.
	overlap, err := os.ReadFile("zeebe/testdata/overlap.dmn")
	if err != nil {
		t.Fatal(err)
	}
	if status, p := b.do(t, "POST", "/definitions", overlap); status != http.StatusCreated {
		t.Fatalf("deploying overlap.dmn: %d %v", status, p)
	}
	if status, p := b.do(t, "POST", "/decisions/risk/evaluation", map[string]any{"variables": map[string]any{"amount": 20}}); status != 422 ||
		p["code"] != fault.IncidentDecisionFailed || !strings.Contains(fmt.Sprint(p["detail"]), `decision "base"`) {
		t.Errorf("a failing evaluation: %d %v, want 422 %s naming base", status, p, fault.IncidentDecisionFailed)
	}

	for _, tt := range []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"POST", "/definitions", []byte(strings.Replace(string(dmnFile), `<decision id="dish"`, `<decision id="beverages"`, 1)), 422, fault.DMNInvalid},
		{"POST", "/decisions/nope/evaluation", map[string]any{}, 404, fault.AdminNotFound},
		{"POST", "/decisions/beverages/evaluation", map[string]any{"variables": "not an object"}, 400, fault.APIInvalid},
		{"GET", "/decisions/beverages/versions/2", nil, 404, fault.AdminNotFound},
		{"POST", "/decisions/beverages/evaluation", map[string]any{"version": 2}, 404, fault.AdminNotFound},
		{"GET", "/decisions?after=nocursor", nil, 400, fault.APIInvalid},
	} {
		if status, p := b.do(t, tt.method, tt.path, tt.body); status != tt.status || p["code"] != tt.code {
			t.Errorf("%s %s: %d %v, want %d %s", tt.method, tt.path, status, p, tt.status, tt.code)
		}
	}
}
