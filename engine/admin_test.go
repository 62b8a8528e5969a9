package engine

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

func TestRetryRecreatesATaskWhoseRetriesRanOut(t *testing.T) {
	x := newInstance(t, parse(t, boundaryTimers, ""))
	x.step(Trigger{Kind: TriggerStart})
	eff := x.step(Trigger{Kind: TriggerTaskFailed, TokenID: "t1", Retries: 0, ErrorMessage: "down"})
	if len(eff.Incidents) != 1 || x.token("Approve").Wait != WaitIncident {
		t.Fatalf("effects = %+v", eff)
	}
	for _, tt := range []struct {
		retries, want int
	}{{5, 5}, {0, 3}} {
		y := &instance{t: t, def: x.def, in: x.in, now: x.now}
		eff = y.step(Trigger{Kind: TriggerRetry, TokenID: "t1", Retries: tt.retries})
		want := Effects{ResolvedIncidents: []string{"t1"}, Tasks: []Task{{TokenID: "t1", Element: "Approve", Type: "approve", Retries: tt.want}}}
		if !reflect.DeepEqual(eff, want) {
			t.Errorf("retry with %d: %+v\nwant %+v: the boundary timers stay as they are", tt.retries, eff, want)
		}
		if tok := y.token("Approve"); tok.Wait != WaitTask || len(tok.Armed) != 3 {
			t.Errorf("token = %+v", tok)
		}
	}
}

func TestRetryReappliesFailedOutputMappings(t *testing.T) {
	x := newInstance(t, parse(t, catchWithOutputs(`<zeebe:output source="=amount &lt; limit" target="small" />`), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"amount": 5.0}})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Stage != StageComplete {
		t.Fatalf("effects = %+v", eff)
	}
	tok := x.token("C")
	eff = x.step(Trigger{Kind: TriggerRetry, TokenID: tok.ID, Variables: map[string]any{"limit": 10.0}})
	if !slices.Equal(eff.ResolvedIncidents, []string{tok.ID}) || len(eff.Subscriptions) != 1 || x.in.State.Variables["small"] != true {
		t.Errorf("retry = %+v, variables %v", eff, x.in.State.Variables)
	}
}

func TestRetryThatFailsAgainRaisesANewIncident(t *testing.T) {
	x := newInstance(t, parse(t, catchWithOutputs(`<zeebe:output source="=amount &lt; limit" target="small" />`), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"amount": 5.0}})
	tok := x.token("C")
	eff := x.step(Trigger{Kind: TriggerRetry, TokenID: tok.ID})
	if !slices.Equal(eff.ResolvedIncidents, []string{tok.ID}) || len(eff.Incidents) != 1 || eff.Incidents[0].TokenID != tok.ID {
		t.Errorf("effects = %+v: resolved, then raised again (the store writes them in that order)", eff)
	}
}

func TestRetryOfATokenNotInAnIncidentIsNotWaiting(t *testing.T) {
	x, _ := startTask(t)
	for _, id := range []string{"t1", "t9"} {
		if err := x.fail(Trigger{Kind: TriggerRetry, TokenID: id}); !fault.HasCode(err, fault.NotWaiting) {
			t.Errorf("retry of %s: %v", id, err)
		}
	}
}

func TestKillingATokenInAnIncidentResolvesIt(t *testing.T) {
	x := newInstance(t, parse(t, boundaryTimers, ""))
	x.step(Trigger{Kind: TriggerStart})
	x.step(Trigger{Kind: TriggerTaskFailed, TokenID: "t1", Retries: 0})
	eff := x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Expire"})
	if !slices.Equal(eff.ResolvedIncidents, []string{"t1"}) || !eff.Completed {
		t.Errorf("effects = %+v", eff)
	}
}

func TestTaskFailureWithARetryTimeoutDelaysTheNewTask(t *testing.T) {
	x, _ := startTask(t)
	eff := x.step(Trigger{Kind: TriggerTaskFailed, TokenID: "t1", Retries: 2, RetryTimeout: 30 * time.Second})
	if len(eff.Tasks) != 1 || !eff.Tasks[0].NotBefore.Equal(t0.Add(30*time.Second)) || eff.Tasks[0].Retries != 2 {
		t.Errorf("tasks = %+v", eff.Tasks)
	}
	eff = x.step(Trigger{Kind: TriggerTaskFailed, TokenID: "t1", Retries: 1})
	if !eff.Tasks[0].NotBefore.IsZero() {
		t.Errorf("no timeout: NotBefore = %v", eff.Tasks[0].NotBefore)
	}
}

func TestTaskErrorVariablesReachTheCatchingEventOfAnOuterScope(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />
		<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="t" /></bpmn:extensionElements></bpmn:serviceTask>
		<bpmn:sequenceFlow id="FS" sourceRef="SS" targetRef="T" /></bpmn:subProcess>
		<bpmn:boundaryEvent id="Caught" attachedToRef="Sub"><bpmn:extensionElements><zeebe:ioMapping><zeebe:output source="=why" target="reason" /></zeebe:ioMapping></bpmn:extensionElements>
		<bpmn:errorEventDefinition /></bpmn:boundaryEvent>`+flow("F1", "S", "Sub"), "")
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart})
	eff = x.step(Trigger{Kind: TriggerTaskError, TokenID: eff.Tasks[0].TokenID, ErrorCode: "ANY", Variables: map[string]any{"why": "limit"}})
	if !eff.Completed || !reflect.DeepEqual(x.in.State.Variables, map[string]any{"reason": "limit"}) {
		t.Errorf("effects = %+v, variables %v", eff, x.in.State.Variables)
	}
}
