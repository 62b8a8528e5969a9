package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/dmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

func dinner(t *testing.T) *dmn.Definitions {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "dmn", "testdata", "dinner.dmn"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := dmn.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ruleProcess is start → a business rule task calling beverages (which
// requires dish) → a user task, so that the instance waits after it.
func ruleProcess(t *testing.T, binding string) *bpmn.Process {
	return parse(t, `<bpmn:startEvent id="S" />`+flow("F1", "S", "Rule")+
		`<bpmn:businessRuleTask id="Rule"><bpmn:extensionElements><zeebe:calledDecision decisionId="beverages" resultVariable="drinks" `+binding+` />
		<zeebe:ioMapping><zeebe:input source="=guests" target="guestCount" /></zeebe:ioMapping></bpmn:extensionElements></bpmn:businessRuleTask>`+
		flow("F2", "Rule", "After")+`<bpmn:userTask id="After" />`, "")
}

func TestABusinessRuleTaskEvaluatesItsDecisionInTheStepUnderItsInputs(t *testing.T) {
	def := ruleProcess(t, "")
	x := newInstance(t, def)
	x.decisions = Decisions{{DecisionID: "beverages", Binding: bpmn.BindingLatest}: {Definitions: dinner(t), Version: 1}}
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"season": "Winter", "guests": 6.0, "guestsWithChildren": true}})
	x.token("After")
	got, _ := x.in.State.Variables["drinks"].([]any)
	if len(got) != 3 || got[0] != "Bordeaux" || got[1] != "Apple Juice" || got[2] != "Water" {
		t.Errorf("drinks = %#v, want Bordeaux, Apple Juice, Water (the dish, Roastbeef, from 6 guests in winter)", x.in.State.Variables["drinks"])
	}
	if _, ok := x.in.State.Variables["guestCount"]; ok {
		t.Error("the task's input mapping leaked into the instance's variables")
	}
}

func TestAMissingOrFailingDecisionIsAnIncidentThatARetryResolves(t *testing.T) {
	ref := bpmn.DecisionRef{DecisionID: "beverages", Binding: bpmn.BindingVersionTag, VersionTag: "v2"}
	def := ruleProcess(t, `bindingType="versionTag" versionTag="v2"`)
	x := newInstance(t, def)
	x.decisions = Decisions{ref: {Missing: `no version of decision "beverages" tagged "v2" is deployed`}}
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"season": "Winter", "guests": 6.0}})
	tok := x.token("Rule")
	if tok.Incident == nil || tok.Incident.Code != fault.IncidentDecisionFailed || !strings.Contains(tok.Incident.Message, `tagged "v2"`) || len(eff.Incidents) != 1 {
		t.Fatalf("token = %+v, want an incident %s naming the missing tag", tok.Incident, fault.IncidentDecisionFailed)
	}

	// Deployed since: the retry evaluates it and the instance moves on.
	x.decisions = Decisions{ref: {Definitions: dinner(t), Version: 3}}
	x.step(Trigger{Kind: TriggerRetry, TokenID: tok.ID})
	x.token("After")
	if x.in.State.Variables["drinks"] == nil {
		t.Errorf("variables = %v, want drinks", x.in.State.Variables)
	}

	// A decision that fails in its evaluation (two rules of a UNIQUE table
	// match) stops the token too, with the decision's reason.
	overlapping, err := dmn.Parse(strings.NewReader(`<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="d">
		<decision id="beverages" name="Beverages"><decisionTable>
		<input><inputExpression><text>season</text></inputExpression></input><output name="b" />
		<rule><inputEntry><text>-</text></inputEntry><outputEntry><text>"Tea"</text></outputEntry></rule>
		<rule><inputEntry><text>-</text></inputEntry><outputEntry><text>"Water"</text></outputEntry></rule>
		</decisionTable></decision></definitions>`))
	if err != nil {
		t.Fatal(err)
	}
	y := newInstance(t, def)
	y.decisions = Decisions{ref: {Definitions: overlapping, Version: 3}}
	y.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"season": "Winter"}})
	if inc := y.token("Rule").Incident; inc == nil || inc.Code != fault.IncidentDecisionFailed || !strings.Contains(inc.Message, "version 3") {
		t.Errorf("incident = %+v, want %s naming the version", inc, fault.IncidentDecisionFailed)
	}

	// A decision runs under the step's expression limits: past them, the
	// incident says so.
	long, err := dmn.Parse(strings.NewReader(`<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="d">
		<decision id="beverages" name="Beverages"><literalExpression><text>[` + strings.Repeat("1, ", 200) + `1]</text></literalExpression></decision></definitions>`))
	if err != nil {
		t.Fatal(err)
	}
	z := newInstance(t, def)
	z.decisions = Decisions{ref: {Definitions: long, Version: 1}}
	z.limits = feel.Limits{MaxSteps: 50}
	z.step(Trigger{Kind: TriggerStart})
	if inc := z.token("Rule").Incident; inc == nil || inc.Code != fault.IncidentExpressionLimit {
		t.Errorf("incident = %+v, want %s", inc, fault.IncidentExpressionLimit)
	}
}

func TestABusinessRuleTaskWithATaskDefinitionIsAJob(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />`+flow("F1", "S", "Rule")+
		`<bpmn:businessRuleTask id="Rule"><bpmn:extensionElements><zeebe:taskDefinition type="rules" /></bpmn:extensionElements></bpmn:businessRuleTask>`, "")
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart})
	if len(eff.Tasks) != 1 || x.token("Rule").Wait != WaitTask {
		t.Errorf("tasks = %+v, want one job at Rule", eff.Tasks)
	}
}
