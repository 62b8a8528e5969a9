package engine

import (
	"regexp"
	"testing"
)

var uuidV5 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// uuidProcess calls uuid() from a task's input mappings (twice with the same
// text) and, through a loop of scripts that passes one element three times
// in one step, from a script.
const uuidProcess = `<bpmn:startEvent id="S" />
	<bpmn:scriptTask id="Gen"><bpmn:extensionElements><zeebe:script expression="=append(ids, uuid())" resultVariable="ids" /></bpmn:extensionElements></bpmn:scriptTask>
	<bpmn:exclusiveGateway id="More" default="Done" />
	<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="charge" /><zeebe:ioMapping>
		<zeebe:input source="=uuid()" target="requestId" /><zeebe:input source="=uuid()" target="otherId" />
	</zeebe:ioMapping></bpmn:extensionElements></bpmn:serviceTask>` +
	`<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Gen" /><bpmn:sequenceFlow id="F2" sourceRef="Gen" targetRef="More" />` +
	`<bpmn:sequenceFlow id="Again" sourceRef="More" targetRef="Gen"><bpmn:conditionExpression>=count(ids) &lt; 3</bpmn:conditionExpression></bpmn:sequenceFlow>` +
	`<bpmn:sequenceFlow id="Done" sourceRef="More" targetRef="T" />`

func TestUUIDIsUniquePerEvaluationAndStableOnReRun(t *testing.T) {
	def := parse(t, uuidProcess, "")
	run := func(id string) []string {
		x := newInstance(t, def)
		x.in.ID = id
		eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"ids": []any{}}}) // step checks a re-run gives the same ids
		if len(eff.Tasks) != 1 {
			t.Fatalf("effects = %+v", eff)
		}
		var ids []string
		for _, v := range x.in.State.Variables["ids"].([]any) {
			ids = append(ids, v.(string))
		}
		vars := eff.Tasks[0].Variables
		return append(ids, vars["requestId"].(string), vars["otherId"].(string))
	}
	first := run("i-1")
	if len(first) != 5 {
		t.Fatalf("ids = %v, want 3 from the loop and 2 from the mappings", first)
	}
	seen := map[string]bool{}
	for _, id := range append(first, run("i-2")...) {
		if !uuidV5.MatchString(id) || seen[id] {
			t.Fatalf("ids %v: want distinct version 5 UUIDs across evaluations and instances", first)
		}
		seen[id] = true
	}
}

// random number() draws from the same seed as uuid(): a condition on it
// picks one branch, the same when the step runs again, and other instances
// draw other numbers.
func TestRandomNumberIsStableOnReRunAndDiffersPerInstance(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />
	<bpmn:scriptTask id="Draw"><bpmn:extensionElements><zeebe:script expression="=random number()" resultVariable="r" /></bpmn:extensionElements></bpmn:scriptTask>
	<bpmn:exclusiveGateway id="G" default="High" />
	<bpmn:serviceTask id="LowTask"><bpmn:extensionElements><zeebe:taskDefinition type="low" /></bpmn:extensionElements></bpmn:serviceTask>
	<bpmn:serviceTask id="HighTask"><bpmn:extensionElements><zeebe:taskDefinition type="high" /></bpmn:extensionElements></bpmn:serviceTask>`+
		`<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Draw" /><bpmn:sequenceFlow id="F2" sourceRef="Draw" targetRef="G" />`+
		`<bpmn:sequenceFlow id="Low" sourceRef="G" targetRef="LowTask"><bpmn:conditionExpression>=r &lt; 0.5</bpmn:conditionExpression></bpmn:sequenceFlow>`+
		`<bpmn:sequenceFlow id="High" sourceRef="G" targetRef="HighTask" />`, "")
	draws := map[float64]bool{}
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		x := newInstance(t, def)
		x.in.ID = id
		eff := x.step(Trigger{Kind: TriggerStart}) // step checks a re-run gives the same effects
		r, ok := x.in.State.Variables["r"].(float64)
		if !ok || r < 0 || r >= 1 || len(eff.Tasks) != 1 {
			t.Fatalf("%s: r = %v, effects = %+v", id, x.in.State.Variables["r"], eff)
		}
		if want := map[bool]string{true: "low", false: "high"}[r < 0.5]; eff.Tasks[0].Type != want {
			t.Errorf("%s: r = %v took the task %q, want %q", id, r, eff.Tasks[0].Type, want)
		}
		draws[r] = true
	}
	if len(draws) != 3 {
		t.Errorf("three instances drew %v, want three numbers", draws)
	}
}
