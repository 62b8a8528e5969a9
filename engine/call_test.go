package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// caller calls "=childKey" with an input mapping, and has an interrupting
// timer and an error boundary on the call activity.
func caller(called string, outputs ...string) string {
	return `<bpmn:startEvent id="S" />
<bpmn:callActivity id="Call"><bpmn:extensionElements>` + called + `
  <zeebe:ioMapping><zeebe:input source="=order.id" target="orderId" />` + strings.Join(outputs, "") + `</zeebe:ioMapping></bpmn:extensionElements></bpmn:callActivity>
<bpmn:boundaryEvent id="Slow" attachedToRef="Call"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
<bpmn:boundaryEvent id="Failed" attachedToRef="Call"><bpmn:errorEventDefinition errorRef="ErrShip" /></bpmn:boundaryEvent>
<bpmn:endEvent id="E" /><bpmn:endEvent id="TooSlow" /><bpmn:endEvent id="Broken" />` +
		flow("F1", "S", "Call") + flow("F2", "Call", "E") + flow("F3", "Slow", "TooSlow") + flow("F4", "Failed", "Broken")
}

const callerDefs = `<bpmn:error id="ErrShip" errorCode="SHIP_FAILED" />`

// child fails with an error end event when "fail" is set, else waits for m1.
var child = `<bpmn:startEvent id="CS" /><bpmn:exclusiveGateway id="G" default="FOk" />
<bpmn:endEvent id="Fail"><bpmn:errorEventDefinition errorRef="ErrShip" /></bpmn:endEvent>` + receive("Work", "M1") +
	flow("FC1", "CS", "G") + cond("FFail", "G", "Fail", "=fail") + flow("FOk", "G", "Work")

func startCaller(t *testing.T, called string) (*instance, ChildStart) {
	x := newInstance(t, parse(t, caller(called), callerDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"childKey": "shipping", "order": map[string]any{"id": "o-1"}}})
	if len(eff.StartChildren) != 1 || x.token("Call").Wait != WaitChild {
		t.Fatalf("effects = %+v", eff)
	}
	return x, eff.StartChildren[0]
}

func TestCallActivityStartsItsChildWithTheParentsVariables(t *testing.T) {
	x, c := startCaller(t, `<zeebe:calledElement processId="=childKey" />`)
	want := ChildStart{InstanceID: "i-1/t1", TokenID: "t1", Element: "Call", DefinitionKey: "shipping", Binding: "latest",
		Variables: map[string]any{"childKey": "shipping", "order": map[string]any{"id": "o-1"}, "orderId": "o-1"}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("child = %+v\nwant %+v", c, want)
	}
	if tok := x.token("Call"); len(tok.Armed) != 1 || tok.Armed[0].Element != "Slow" {
		t.Errorf("token = %+v: only the timer boundary has a row", tok)
	}
	_, c = startCaller(t, `<zeebe:calledElement processId="shipping" propagateAllParentVariables="false" />`)
	if !reflect.DeepEqual(c.Variables, map[string]any{"orderId": "o-1"}) {
		t.Errorf("child variables = %v, want only the input mappings", c.Variables)
	}
}

func TestCallActivityAsksForTheVersionItsBindingNames(t *testing.T) {
	_, c := startCaller(t, `<zeebe:calledElement processId="shipping" bindingType="deployment" />`)
	if c.Binding != "deployment" || c.VersionTag != "" {
		t.Errorf("child = %+v", c)
	}
	_, c = startCaller(t, `<zeebe:calledElement processId="shipping" bindingType="versionTag" versionTag="stable" />`)
	if c.Binding != "versionTag" || c.VersionTag != "stable" {
		t.Errorf("child = %+v", c)
	}
}

func TestChildInstanceReportsToItsParentWhenItEnds(t *testing.T) {
	parent := &ParentRef{InstanceID: "i-1", TokenID: "t1", Element: "Call"}
	x := newInstance(t, parse(t, child, callerDefs+msgDefs))
	x.in.ID = "i-1/t1"
	x.step(Trigger{Kind: TriggerStart, Parent: parent, Variables: map[string]any{"orderId": "o-1", "fail": false}})
	if !reflect.DeepEqual(x.in.State.Parent, parent) {
		t.Fatalf("parent = %+v", x.in.State.Parent)
	}
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"tracking": "T-9"}})
	want := &ChildResult{Parent: *parent, Variables: map[string]any{"orderId": "o-1", "fail": false, "tracking": "T-9"}}
	if !eff.Completed || !reflect.DeepEqual(eff.NotifyParent, want) {
		t.Errorf("effects = %+v\nwant notify %+v", eff, want)
	}

	x = newInstance(t, parse(t, child, callerDefs+msgDefs))
	eff = x.step(Trigger{Kind: TriggerStart, Parent: parent, Variables: map[string]any{"fail": true}})
	want = &ChildResult{Parent: *parent, ErrorCode: "SHIP_FAILED"}
	if eff.Completed || x.in.State.Status != StatusTerminated || !reflect.DeepEqual(eff.NotifyParent, want) || len(eff.Incidents) != 0 {
		t.Errorf("failing child: %+v, status %s", eff, x.in.State.Status)
	}
}

func TestChildCompletionPropagatesVariablesPerCalledElement(t *testing.T) {
	childVars := map[string]any{"tracking": "T-9", "orderId": "o-1"}
	tests := []struct {
		name, called, outputs string
		want                  map[string]any
	}{
		// orderId is a local of the call activity (its input mapping): the
		// child's orderId lands there and goes away with it, as in Zeebe.
		{"all child variables", `<zeebe:calledElement processId="shipping" />`, "",
			map[string]any{"tracking": "T-9"}},
		{"none", `<zeebe:calledElement processId="shipping" propagateAllChildVariables="false" />`, "",
			map[string]any{}},
		{"output mappings only", `<zeebe:calledElement processId="shipping" propagateAllChildVariables="false" />`,
			`<zeebe:output source="=tracking" target="shipment.tracking" />`,
			map[string]any{"shipment": map[string]any{"tracking": "T-9"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, caller(tt.called, tt.outputs), callerDefs))
			x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"id": "o-1"}}})
			eff := x.step(Trigger{Kind: TriggerChildCompleted, TokenID: "t1", Element: "Call", Variables: childVars})
			if !eff.Completed || !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1"}}) || len(eff.CancelChildren) != 0 {
				t.Fatalf("effects = %+v", eff)
			}
			got := x.in.State.Variables
			delete(got, "order")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("variables = %v, want %v (besides order)", got, tt.want)
			}
		})
	}
}

func TestInterruptedCallActivityCancelsItsChild(t *testing.T) {
	x, c := startCaller(t, `<zeebe:calledElement processId="shipping" />`)
	x.now = t0.Add(time.Hour)
	eff := x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Slow"})
	if !slices.Equal(eff.CancelChildren, []string{c.InstanceID}) || !eff.Completed {
		t.Errorf("effects = %+v", eff)
	}
	err := x.fail(Trigger{Kind: TriggerChildCompleted, TokenID: "t1", Element: "Call"})
	if !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("a late child completion: %v, want %s", err, fault.NotWaiting)
	}
}

func TestChildErrorIsRethrownFromTheCallActivity(t *testing.T) {
	x, _ := startCaller(t, `<zeebe:calledElement processId="shipping" />`)
	eff := x.step(Trigger{Kind: TriggerChildCompleted, TokenID: "t1", ErrorCode: "SHIP_FAILED", Variables: map[string]any{"reason": "lost"}})
	if !eff.Completed || len(eff.CancelChildren) != 0 || x.in.State.Variables["reason"] != "lost" {
		t.Errorf("caught: %+v, variables %v", eff, x.in.State.Variables)
	}

	x, _ = startCaller(t, `<zeebe:calledElement processId="shipping" />`)
	eff = x.step(Trigger{Kind: TriggerChildCompleted, TokenID: "t1", ErrorCode: "OTHER"})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentError || eff.Incidents[0].Element != "Call" {
		t.Fatalf("uncaught: %+v", eff)
	}
	// A retry calls a new child instance, under a new id.
	eff = x.step(Trigger{Kind: TriggerRetry, TokenID: "t1"})
	if len(eff.StartChildren) != 1 || eff.StartChildren[0].InstanceID == "i-1/t1" || !slices.Contains(eff.CloseWaits, WaitRef{TokenID: "t1"}) {
		t.Errorf("retry = %+v", eff)
	}
}

func TestCancelEndsTheInstanceItsChildrenAndItsIncidents(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" />
		<bpmn:callActivity id="Call"><bpmn:extensionElements><zeebe:calledElement processId="shipping" /></bpmn:extensionElements></bpmn:callActivity>
		<bpmn:exclusiveGateway id="G" />`+receive("R", "M1")+flow("F0", "S", "Fork")+flow("F1", "Fork", "Call")+flow("F2", "Fork", "G")+
		cond("F3", "G", "R", "=x &gt; 1")+flow("F4", "Fork", "R"), msgDefs)
	x := newInstance(t, def)
	x.step(Trigger{Kind: TriggerStart})
	if got := x.at(); !slices.Equal(got, []string{"Call/child", "G/incident", "R/message"}) {
		t.Fatalf("tokens at %v", got)
	}
	eff := x.step(Trigger{Kind: TriggerCancel})
	want := Effects{CloseWaits: []WaitRef{{TokenID: "t3"}}, ResolvedIncidents: []string{"t2"}, CancelChildren: []string{"i-1/t1"}}
	if !reflect.DeepEqual(eff, want) || x.in.State.Status != StatusCancelled || len(x.in.State.Tokens) != 0 {
		t.Errorf("effects = %+v\nwant %+v", eff, want)
	}
	for _, tr := range []Trigger{{Kind: TriggerCancel}, {Kind: TriggerMessage, Message: "m1"}} {
		if err := x.fail(tr); !fault.HasCode(err, fault.NotWaiting) {
			t.Errorf("%s after cancel: %v", tr.Kind, err)
		}
	}
}

func TestChildThatCannotStartStopsTheCallActivityInAnIncident(t *testing.T) {
	x, c := startCaller(t, `<zeebe:calledElement processId="=childKey" />`)
	eff := x.step(Trigger{Kind: TriggerChildFailed, TokenID: c.TokenID, Element: "Call", ErrorMessage: "no definition \"shipping\""})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentCalledElement || len(eff.CancelChildren) != 0 || len(eff.CloseWaits) != 0 {
		t.Fatalf("effects = %+v", eff)
	}
	if tok := x.token("Call"); tok.Wait != WaitIncident || len(tok.Armed) != 1 {
		t.Errorf("token = %+v: the boundary timer stays armed", tok)
	}
	eff = x.step(Trigger{Kind: TriggerRetry, TokenID: c.TokenID, Variables: map[string]any{"childKey": "shipping-v2"}})
	if len(eff.StartChildren) != 1 || eff.StartChildren[0].DefinitionKey != "shipping-v2" || eff.StartChildren[0].InstanceID == c.InstanceID {
		t.Errorf("retry = %+v", eff)
	}
}
