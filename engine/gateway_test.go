package engine

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

const msgDefs = `
<bpmn:message id="M1" name="m1" /><bpmn:message id="M2" name="m2" /><bpmn:message id="M3" name="m3" />`

func receive(id, msg string) string {
	return `<bpmn:receiveTask id="` + id + `" messageRef="` + msg + `" />`
}

func catchMsg(id, msg string) string {
	return `<bpmn:intermediateCatchEvent id="` + id + `"><bpmn:messageEventDefinition messageRef="` + msg + `" /></bpmn:intermediateCatchEvent>`
}

// courses is Zeebe's lunch example: a diverging inclusive gateway with a
// default flow.
var courses = `<bpmn:startEvent id="S" /><bpmn:inclusiveGateway id="G" default="FSalad" />` +
	receive("Pasta", "M1") + receive("Steak", "M2") + receive("Salad", "M3") + flow("F0", "S", "G") +
	cond("FPasta", "G", "Pasta", `=list contains(courses, "pasta")`) + cond("FSteak", "G", "Steak", `=list contains(courses, "steak")`) +
	flow("FSalad", "G", "Salad")

func TestInclusiveGatewayTakesEveryTrueConditionElseDefaultElseIncident(t *testing.T) {
	def := parse(t, courses, msgDefs)
	noDefault := parse(t, `<bpmn:startEvent id="S" /><bpmn:inclusiveGateway id="G" />`+receive("Pasta", "M1")+flow("F0", "S", "G")+
		cond("FPasta", "G", "Pasta", `=list contains(courses, "pasta")`), msgDefs)
	single := parse(t, `<bpmn:startEvent id="S" /><bpmn:inclusiveGateway id="G" />`+receive("Pasta", "M1")+flow("F0", "S", "G")+flow("F1", "G", "Pasta"), msgDefs)
	tests := []struct {
		name     string
		def      *bpmn.Process
		courses  any
		wantAt   []string
		incident string
	}{
		{"one condition", def, []any{"pasta"}, []string{"Pasta/message"}, ""},
		{"every true condition, in document order", def, []any{"steak", "pasta"}, []string{"Pasta/message", "Steak/message"}, ""},
		{"the default flow only when nothing holds", def, []any{}, []string{"Salad/message"}, ""},
		{"a single flow without condition", single, nil, []string{"Pasta/message"}, ""},
		{"evaluation error", def, "pasta", []string{"G/incident"}, fault.IncidentExpression},
		{"no flow matches", noDefault, []any{}, []string{"G/incident"}, fault.IncidentNoFlow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, tt.def)
			eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"courses": tt.courses}})
			if !reflect.DeepEqual(x.at(), tt.wantAt) {
				t.Errorf("tokens at %v, want %v", x.at(), tt.wantAt)
			}
			if tt.incident == "" {
				return
			}
			if len(eff.Incidents) != 1 || eff.Incidents[0].Code != tt.incident || eff.Incidents[0].Element != "G" || len(eff.Subscriptions) != 0 {
				t.Errorf("effects = %+v: an incident and no flow taken", eff)
			}
		})
	}
}

func TestExclusiveGatewayTakesFirstTrueConditionElseDefaultElseIncident(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" default="FDef" />`+
		receive("Big", "M1")+receive("Small", "M2")+receive("Other", "M3")+
		flow("F0", "S", "G")+
		cond("FBig", "G", "Big", "=amount &gt; 100")+
		cond("FSmall", "G", "Small", "=amount &gt; 10 and amount &lt;= 100")+
		flow("FDef", "G", "Other"), msgDefs)
	noDefault := parse(t, `<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" />`+receive("Big", "M1")+
		flow("F0", "S", "G")+cond("FBig", "G", "Big", "=amount &gt; 100"), msgDefs)
	tests := []struct {
		name     string
		noDef    bool
		vars     map[string]any
		wantAt   []string
		incident string
	}{
		{"first true condition", false, map[string]any{"amount": 500.0}, []string{"Big/message"}, ""},
		{"second condition", false, map[string]any{"amount": 50.0}, []string{"Small/message"}, ""},
		{"default flow", false, map[string]any{"amount": 5.0}, []string{"Other/message"}, ""},
		{"evaluation error", false, map[string]any{"amount": "lots"}, []string{"G/incident"}, fault.IncidentExpression},
		{"no flow matches", true, map[string]any{"amount": 5.0}, []string{"G/incident"}, fault.IncidentNoFlow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := def
			if tt.noDef {
				d = noDefault
			}
			x := newInstance(t, d)
			eff := x.step(Trigger{Kind: TriggerStart, Variables: tt.vars})
			if !reflect.DeepEqual(x.at(), tt.wantAt) {
				t.Errorf("tokens at %v, want %v", x.at(), tt.wantAt)
			}
			if tt.incident == "" {
				return
			}
			if len(eff.Incidents) != 1 || eff.Incidents[0].Code != tt.incident || eff.Incidents[0].Element != "G" {
				t.Errorf("incidents = %+v", eff.Incidents)
			}
		})
	}
}

func TestParallelGatewayForksAndJoinsPerIncomingFlow(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" /><bpmn:parallelGateway id="Join" /><bpmn:endEvent id="E" />`+
		receive("A", "M1")+receive("B", "M2")+
		flow("F0", "S", "Fork")+flow("FA", "Fork", "A")+flow("FB", "Fork", "B")+
		flow("FA2", "A", "Join")+flow("FB2", "B", "Join")+flow("F9", "Join", "E"), msgDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart})
	if !reflect.DeepEqual(x.at(), []string{"A/message", "B/message"}) || len(eff.Subscriptions) != 2 {
		t.Fatalf("after fork: %v %+v", x.at(), eff)
	}
	eff = x.step(Trigger{Kind: TriggerMessage, Message: "m2"})
	if !reflect.DeepEqual(x.at(), []string{"A/message", "Join/join"}) || eff.Completed {
		t.Fatalf("after one branch: %v %+v", x.at(), eff)
	}
	// The join waits for a token on each incoming flow, not for any two tokens.
	if x.token("Join").Flow != "FB2" {
		t.Errorf("join token = %+v", x.token("Join"))
	}
	eff = x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	if len(x.in.State.Tokens) != 0 || !eff.Completed {
		t.Fatalf("after both branches: %v %+v", x.at(), eff)
	}
}

func TestEventBasedGatewayFirstMessageWinsAndClosesTheOthers(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:eventBasedGateway id="G" />`+
		catchMsg("C1", "M1")+catchMsg("C2", "M2")+receive("After1", "M3")+`<bpmn:endEvent id="E2" />`+
		flow("F0", "S", "G")+flow("F1", "G", "C1")+flow("F2", "G", "C2")+flow("F3", "C1", "After1")+flow("F4", "C2", "E2"), msgDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart})
	tok := x.token("G")
	if tok.Wait != WaitEvent || len(eff.Subscriptions) != 2 || eff.Subscriptions[0].Element != "C1" || eff.Subscriptions[1].Element != "C2" {
		t.Fatalf("at gateway: %+v %+v", tok, eff)
	}
	eff = x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	if !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: tok.ID}}) {
		t.Errorf("close = %+v: both subscriptions of the gateway's token must go", eff.CloseWaits)
	}
	if after := x.token("After1"); after.Flow != "F3" {
		t.Errorf("token = %+v", after)
	}
	if err := x.fail(Trigger{Kind: TriggerMessage, Message: "m2"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("second winner: %v", err)
	}
}

func TestActivityWithSeveralFlowsSplitsAndWithoutFlowsEnds(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />`+receive("A", "M1")+receive("B", "M2")+`<bpmn:intermediateThrowEvent id="Mark" />`+
		flow("F1", "S", "Mark")+flow("F2", "Mark", "A")+flow("F3", "Mark", "B"), msgDefs)
	x := newInstance(t, def)
	x.step(Trigger{Kind: TriggerStart})
	if !reflect.DeepEqual(x.at(), []string{"A/message", "B/message"}) {
		t.Fatalf("tokens at %v", x.at())
	}
	if eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1"}); eff.Completed {
		t.Errorf("completed with a token left")
	}
	if eff := x.step(Trigger{Kind: TriggerMessage, Message: "m2"}); !eff.Completed || x.in.State.Status != StatusCompleted {
		t.Errorf("not completed after the last implicit end: %+v", eff)
	}
}

func TestLoopWithoutWaitStateFailsTheStep(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" /><bpmn:intermediateThrowEvent id="T" />`+
		flow("F1", "S", "G")+flow("F2", "G", "T")+flow("F3", "T", "G"), "")
	x := newInstance(t, def)
	if err := x.fail(Trigger{Kind: TriggerStart}); !fault.HasCode(err, fault.StepFailed) {
		t.Errorf("err = %v, want %s", err, fault.StepFailed)
	}
}

func TestIncidentOnOneBranchLetsTheOthersRun(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" /><bpmn:exclusiveGateway id="G" />`+
		receive("A", "M1")+receive("B", "M2")+
		flow("F0", "S", "Fork")+flow("FA", "Fork", "A")+flow("FG", "Fork", "G")+cond("FB", "G", "B", "=x = 1"), msgDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart})
	if !reflect.DeepEqual(x.at(), []string{"A/message", "G/incident"}) || len(eff.Incidents) != 1 {
		t.Fatalf("tokens at %v, effects %+v", x.at(), eff)
	}
	eff = x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	if eff.Completed || !reflect.DeepEqual(x.at(), []string{"G/incident"}) {
		t.Errorf("tokens at %v, effects %+v: the incident keeps the instance open", x.at(), eff)
	}
	if !slices.ContainsFunc(x.in.State.Tokens, func(t Token) bool { return t.Incident != nil && t.Incident.Code == fault.IncidentNoFlow }) {
		t.Errorf("incident not in state: %+v", x.in.State.Tokens)
	}
}
