package engine

import (
	"slices"
	"testing"
)

func TestStepRecordsTheElementsAndFlowsItPassedInOrder(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" default="FOther" />
<bpmn:task id="A" /><bpmn:manualTask id="B" />`+serviceTask("W", "work")+`<bpmn:endEvent id="E" /><bpmn:endEvent id="Other" />`+
		flow("F1", "S", "G")+cond("F2", "G", "A", "=go")+flow("FOther", "G", "Other")+flow("F3", "A", "B")+flow("F4", "B", "W")+flow("F5", "W", "E"), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"go": true}})
	if want := []string{"S", "F1", "G", "F2", "A", "F3", "B", "F4"}; !slices.Equal(eff.Passed, want) || eff.PassedCut {
		t.Errorf("start passed %v (cut %v), want %v: the element it waits at is not passed", eff.Passed, eff.PassedCut, want)
	}
	eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: x.token("W").ID, Element: "W"})
	if want := []string{"W", "F5", "E"}; !slices.Equal(eff.Passed, want) || eff.PassedCut {
		t.Errorf("completion passed %v (cut %v), want %v", eff.Passed, eff.PassedCut, want)
	}
}

func TestStepThatLoopsRecordsAtMostMaxPassedAndSaysItWasCut(t *testing.T) {
	// Each turn of the loop passes four ids (Count, F2, G, FBack).
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:scriptTask id="Count"><bpmn:extensionElements><zeebe:script expression="=n + 1" resultVariable="n" /></bpmn:extensionElements></bpmn:scriptTask>
<bpmn:exclusiveGateway id="G" default="FOut" />`+serviceTask("W", "work")+
		flow("F1", "S", "Count")+flow("F2", "Count", "G")+cond("FBack", "G", "Count", "=n &lt; 100")+flow("FOut", "G", "W"), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"n": 0}})
	if x.in.State.Variables["n"] != 100.0 || x.token("W").Wait != WaitTask {
		t.Fatalf("the loop did not run to its end: n = %v", x.in.State.Variables["n"])
	}
	if len(eff.Passed) != MaxPassed || !eff.PassedCut {
		t.Fatalf("passed %d ids (cut %v), want %d and cut", len(eff.Passed), eff.PassedCut, MaxPassed)
	}
	if want := []string{"S", "F1", "Count", "F2", "G", "FBack", "Count"}; !slices.Equal(eff.Passed[:len(want)], want) {
		t.Errorf("passed begins %v, want %v: the cut keeps the start of the path", eff.Passed[:len(want)], want)
	}
}
