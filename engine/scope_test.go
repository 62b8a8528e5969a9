package engine

import (
	"reflect"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// subProcess is start → Sub (inner: start → Inner receive task → branch on
// "mode": error end "Fail", terminate end "Stop", or none end) → After; Sub
// has an interrupting "Cancel" message boundary and a "Caught" error boundary.
const subProcess = `
<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub">
  <bpmn:startEvent id="SubStart" />
  <bpmn:receiveTask id="Inner" messageRef="M1" />
  <bpmn:receiveTask id="Side" messageRef="M3" />
  <bpmn:exclusiveGateway id="Mode" default="FOk" />
  <bpmn:endEvent id="Fail"><bpmn:errorEventDefinition errorRef="Err" /></bpmn:endEvent>
  <bpmn:endEvent id="Stop"><bpmn:terminateEventDefinition /></bpmn:endEvent>
  <bpmn:endEvent id="SubEnd" />
  <bpmn:sequenceFlow id="FS1" sourceRef="SubStart" targetRef="Inner" />
  <bpmn:sequenceFlow id="FS2" sourceRef="SubStart" targetRef="Side" />
  <bpmn:sequenceFlow id="FS3" sourceRef="Inner" targetRef="Mode" />
  <bpmn:sequenceFlow id="FFail" sourceRef="Mode" targetRef="Fail"><bpmn:conditionExpression>=mode = "fail"</bpmn:conditionExpression></bpmn:sequenceFlow>
  <bpmn:sequenceFlow id="FStop" sourceRef="Mode" targetRef="Stop"><bpmn:conditionExpression>=mode = "stop"</bpmn:conditionExpression></bpmn:sequenceFlow>
  <bpmn:sequenceFlow id="FOk" sourceRef="Mode" targetRef="SubEnd" />
</bpmn:subProcess>
<bpmn:boundaryEvent id="Cancel" attachedToRef="Sub"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:boundaryEvent>
<bpmn:boundaryEvent id="Caught" attachedToRef="Sub"><bpmn:errorEventDefinition errorRef="Err" /></bpmn:boundaryEvent>
<bpmn:receiveTask id="After" messageRef="M3" />
<bpmn:endEvent id="Cancelled" />
<bpmn:endEvent id="Failed" />
<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Sub" />
<bpmn:sequenceFlow id="F2" sourceRef="Sub" targetRef="After" />
<bpmn:sequenceFlow id="F3" sourceRef="Cancel" targetRef="Cancelled" />
<bpmn:sequenceFlow id="F4" sourceRef="Caught" targetRef="Failed" />`

const subDefs = msgDefs + `<bpmn:error id="Err" errorCode="E42" />`

func TestSubprocessScopesChildTokensAndItsBoundaries(t *testing.T) {
	x := newInstance(t, parse(t, subProcess, subDefs))
	eff := x.step(Trigger{Kind: TriggerStart})
	sub := x.token("Sub")
	if sub.Wait != WaitScope || x.token("Inner").Scope != sub.ID || x.token("Side").Scope != sub.ID {
		t.Fatalf("tokens: %+v", x.in.State.Tokens)
	}
	want := []Subscription{
		{TokenID: "t1", Element: "Cancel", Message: "m2"},
		{TokenID: "t2", Element: "Inner", Message: "m1"},
		{TokenID: "t3", Element: "Side", Message: "m3"},
	}
	if !reflect.DeepEqual(eff.Subscriptions, want) {
		t.Errorf("subscriptions = %+v\nwant %+v", eff.Subscriptions, want)
	}
}

func TestSubprocessEndings(t *testing.T) {
	tests := []struct {
		name      string
		mode      string
		sideFirst bool
		wantAt    []string
		wantClose []WaitRef
	}{
		// Both inner branches end: the subprocess completes and closes its boundary.
		{"none end after the last inner token", "ok", true, []string{"After/message"}, []WaitRef{{TokenID: "t2"}, {TokenID: "t1"}}},
		// One inner branch ends, the other still runs: the subprocess waits.
		{"none end with an inner token left", "ok", false, []string{"Sub/scope", "Side/message"}, []WaitRef{{TokenID: "t2"}}},
		// Terminate ends the subprocess's other branch, not the process.
		{"terminate end inside", "stop", false, []string{"After/message"}, []WaitRef{{TokenID: "t2"}, {TokenID: "t3"}, {TokenID: "t1"}}},
		// An error end is caught by the boundary of the enclosing subprocess.
		{"error end caught", "fail", false, nil, []WaitRef{{TokenID: "t2"}, {TokenID: "t3"}, {TokenID: "t1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, subProcess, subDefs))
			x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"mode": tt.mode}})
			if tt.sideFirst {
				x.step(Trigger{Kind: TriggerMessage, Message: "m3"})
			}
			eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
			if !reflect.DeepEqual(x.at(), tt.wantAt) {
				t.Errorf("tokens at %v, want %v", x.at(), tt.wantAt)
			}
			if !reflect.DeepEqual(eff.CloseWaits, tt.wantClose) {
				t.Errorf("close = %+v, want %+v", eff.CloseWaits, tt.wantClose)
			}
		})
	}
}

func TestInterruptingBoundaryMessageEndsSubprocessAndEverythingInside(t *testing.T) {
	x := newInstance(t, parse(t, subProcess, subDefs))
	x.step(Trigger{Kind: TriggerStart})
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m2", Variables: map[string]any{"reason": "customer"}})
	want := Effects{CloseWaits: []WaitRef{{TokenID: "t2"}, {TokenID: "t3"}, {TokenID: "t1"}}, Completed: true, Passed: []string{"Sub", "Cancel", "F3", "Cancelled"}}
	if !reflect.DeepEqual(eff, want) {
		t.Errorf("effects = %+v\nwant %+v", eff, want)
	}
	if x.in.State.Variables["reason"] != "customer" {
		t.Errorf("boundary payload not merged: %v", x.in.State.Variables)
	}
}

func TestUncaughtErrorEndStopsInIncident(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />
		<bpmn:endEvent id="Fail"><bpmn:errorEventDefinition errorRef="Err" /></bpmn:endEvent>`+flow("FS", "SS", "Fail")+
		`</bpmn:subProcess>`+flow("F", "S", "Sub"), subDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart})
	if !reflect.DeepEqual(x.at(), []string{"Sub/scope", "Fail/incident"}) || len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentError {
		t.Errorf("tokens at %v, effects %+v", x.at(), eff)
	}
}

func TestNonInterruptingMessageBoundarySpawnsAndStaysOpen(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />`+receive("R", "M1")+
		`<bpmn:boundaryEvent id="Ping" cancelActivity="false" attachedToRef="R"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:boundaryEvent>`+
		receive("Pong", "M3")+flow("F1", "S", "R")+flow("F2", "Ping", "Pong"), msgDefs)
	x := newInstance(t, def)
	x.step(Trigger{Kind: TriggerStart})
	for n := 1; n <= 2; n++ {
		eff := x.step(Trigger{Kind: TriggerMessage, Message: "m2"})
		if len(eff.CloseWaits) != 0 || len(eff.Subscriptions) != 1 || eff.Subscriptions[0].Element != "Pong" {
			t.Fatalf("firing %d: %+v", n, eff)
		}
	}
	if got := x.at(); !reflect.DeepEqual(got, []string{"R/message", "Pong/message", "Pong/message"}) {
		t.Errorf("tokens at %v", got)
	}
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	if !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1"}}) {
		t.Errorf("leaving the receive task closes its boundary too: %+v", eff.CloseWaits)
	}
}

func TestTerminateEndAtProcessLevelEndsEveryBranch(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" />`+receive("A", "M1")+receive("B", "M2")+
		`<bpmn:endEvent id="T"><bpmn:terminateEventDefinition /></bpmn:endEvent>`+
		flow("F0", "S", "Fork")+flow("FA", "Fork", "A")+flow("FB", "Fork", "B")+flow("FT", "A", "T"), msgDefs)
	x := newInstance(t, def)
	x.step(Trigger{Kind: TriggerStart})
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	want := Effects{CloseWaits: []WaitRef{{TokenID: "t1"}, {TokenID: "t2"}}, Completed: true, Passed: []string{"A", "FT", "T"}}
	if !reflect.DeepEqual(eff, want) || x.in.State.Status != StatusCompleted {
		t.Errorf("effects = %+v\nwant %+v", eff, want)
	}
}
