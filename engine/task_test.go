package engine

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// taskProcess is start → service task "Charge" (with mappings, headers and an
// error boundary) → end; the boundary leads to "Refund" end.
const taskProcess = `
<bpmn:startEvent id="S" />
<bpmn:serviceTask id="Charge">
  <bpmn:extensionElements>
    <zeebe:taskDefinition type="charge-card" retries="3" />
    <zeebe:taskHeaders><zeebe:header key="currency" value="EUR" /></zeebe:taskHeaders>
    <zeebe:ioMapping>
      <zeebe:input source="=order.total" target="amount" />
      <zeebe:output source="=receipt" target="payment.receipt" />
    </zeebe:ioMapping>
  </bpmn:extensionElements>
</bpmn:serviceTask>
<bpmn:boundaryEvent id="Declined" attachedToRef="Charge"><bpmn:errorEventDefinition errorRef="ErrDeclined" /></bpmn:boundaryEvent>
<bpmn:endEvent id="Done" />
<bpmn:endEvent id="Refused" />
` + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Charge" />
<bpmn:sequenceFlow id="F2" sourceRef="Charge" targetRef="Done" />
<bpmn:sequenceFlow id="F3" sourceRef="Declined" targetRef="Refused" />`

const taskDefs = `<bpmn:error id="ErrDeclined" errorCode="DECLINED" />`

func startTask(t *testing.T) (*instance, Effects) {
	x := newInstance(t, parse(t, taskProcess, taskDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"total": 30.0}}})
	return x, eff
}

func TestServiceTaskCreatesPullTaskWithInputsAndHeaders(t *testing.T) {
	x, eff := startTask(t)
	want := []Task{{
		TokenID: "t1", Element: "Charge", Type: "charge-card", Retries: 3,
		Variables: map[string]any{"amount": 30.0}, // its input, not a copy of the instance's variables
		Headers:   map[string]string{"currency": "EUR"},
	}}
	if !reflect.DeepEqual(eff.Tasks, want) {
		t.Fatalf("tasks = %+v\nwant %+v", eff.Tasks, want)
	}
	if tok := x.token("Charge"); tok.Wait != WaitTask {
		t.Errorf("token = %+v", tok)
	}
	if _, ok := x.in.State.Variables["amount"]; ok {
		t.Errorf("input mapping leaked into the instance variables: %v", x.in.State.Variables)
	}
}

func TestServiceTaskCompletionAppliesOutputMappings(t *testing.T) {
	x, _ := startTask(t)
	eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: "t1", Element: "Charge",
		Variables: map[string]any{"receipt": "r-9", "noise": true}})
	if !reflect.DeepEqual(eff, Effects{CloseWaits: []WaitRef{{TokenID: "t1"}}, Completed: true, Passed: []string{"Charge", "F2", "Done"}}) {
		t.Errorf("effects = %+v", eff)
	}
	want := map[string]any{"order": map[string]any{"total": 30.0}, "payment": map[string]any{"receipt": "r-9"}}
	if !reflect.DeepEqual(x.in.State.Variables, want) {
		t.Errorf("variables = %v\nwant %v", x.in.State.Variables, want)
	}
}

func TestServiceTaskFailureRecreatesTaskOrRaisesIncident(t *testing.T) {
	tests := []struct {
		name     string
		retries  int
		wantTask int
		wantWait WaitKind
	}{
		{"retries left re-create the task", 2, 2, WaitTask},
		{"no retries left raise an incident", 0, -1, WaitIncident},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, _ := startTask(t)
			eff := x.step(Trigger{Kind: TriggerTaskFailed, TokenID: "t1", Retries: tt.retries, ErrorMessage: "card service down"})
			if !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1", Element: "Charge"}}) {
				t.Errorf("close = %+v", eff.CloseWaits)
			}
			tok := x.token("Charge")
			if tok.Wait != tt.wantWait || tok.ID != "t1" {
				t.Errorf("token = %+v", tok)
			}
			if tt.wantTask >= 0 {
				if len(eff.Tasks) != 1 || eff.Tasks[0].Retries != tt.wantTask || eff.Incidents != nil {
					t.Errorf("effects = %+v", eff)
				}
				return
			}
			if len(eff.Tasks) != 0 || len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentTaskFailed ||
				!strings.Contains(eff.Incidents[0].Message, "card service down") {
				t.Fatalf("effects = %+v", eff)
			}
			// The worker's error goes to the incident's row, not into the
			// instance's state.
			stored := eff.Incidents[0]
			if stored.ErrorMessage != "card service down" {
				t.Errorf("effect %+v, want the worker's error message", stored)
			}
			stored.ErrorMessage, stored.ErrorDetails = "", ""
			if *tok.Incident != stored {
				t.Errorf("token incident %+v, effect %+v", tok.Incident, eff.Incidents[0])
			}
			// The task is gone: a late completion is a recognised no-op.
			if err := x.fail(Trigger{Kind: TriggerTaskCompleted, TokenID: "t1"}); !fault.HasCode(err, fault.NotWaiting) {
				t.Errorf("late completion: %v", err)
			}
		})
	}
}

func TestServiceTaskBPMNErrorIsCaughtByBoundaryOrRaisesIncident(t *testing.T) {
	tests := []struct {
		code     string
		wantAt   []string
		wantCode string
	}{
		{"DECLINED", nil, ""},
		{"OTHER", []string{"Charge/incident"}, fault.IncidentError},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			x, _ := startTask(t)
			eff := x.step(Trigger{Kind: TriggerTaskError, TokenID: "t1", ErrorCode: tt.code})
			if !reflect.DeepEqual(x.at(), tt.wantAt) {
				t.Errorf("tokens at %v, want %v", x.at(), tt.wantAt)
			}
			if tt.wantCode == "" {
				if !eff.Completed || len(eff.Incidents) != 0 {
					t.Errorf("effects = %+v", eff)
				}
				return
			}
			if len(eff.Incidents) != 1 || eff.Incidents[0].Code != tt.wantCode || !strings.Contains(eff.Incidents[0].Message, tt.code) {
				t.Errorf("incidents = %+v", eff.Incidents)
			}
		})
	}
}

func TestTaskTriggerForAnotherTokenOrElementIsNotWaiting(t *testing.T) {
	x, _ := startTask(t)
	for _, tr := range []Trigger{
		{Kind: TriggerTaskCompleted, TokenID: "t9"},
		{Kind: TriggerTaskCompleted, TokenID: "t1", Element: "Other"},
		{Kind: TriggerTaskFailed, TokenID: "t2", Retries: 1},
		{Kind: TriggerTaskError, TokenID: "", ErrorCode: "DECLINED"},
	} {
		if err := x.fail(tr); !fault.HasCode(err, fault.NotWaiting) {
			t.Errorf("%+v: %v", tr, err)
		}
	}
}

func TestTaskTypeAndRetriesMayBeExpressions(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:serviceTask id="T"><bpmn:extensionElements>
		<zeebe:taskDefinition type="=kind + &quot;-v2&quot;" retries="=tries" /></bpmn:extensionElements></bpmn:serviceTask>`+flow("F", "S", "T"), "")
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"kind": "ship", "tries": 5.0}})
	if eff.Tasks[0].Type != "ship-v2" || eff.Tasks[0].Retries != 5 {
		t.Errorf("task = %+v", eff.Tasks[0])
	}
	x = newInstance(t, def)
	eff = x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"kind": "ship", "tries": -1.0}})
	if len(eff.Tasks) != 0 || len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentExpression {
		t.Errorf("negative retries: %+v", eff)
	}
}
