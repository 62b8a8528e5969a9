package engine

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// eventSubs is a process waiting at a service task, with three event
// subprocesses: a non-interrupting message one (keyed by orderId), an
// interrupting timer one and an interrupting error one.
const eventSubs = `<bpmn:startEvent id="S" />
<bpmn:serviceTask id="Work"><bpmn:extensionElements><zeebe:taskDefinition type="work" /></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:endEvent id="E" />
<bpmn:subProcess id="OnUpdate" triggeredByEvent="true">
  <bpmn:startEvent id="UpdateStart" isInterrupting="false"><bpmn:messageEventDefinition messageRef="MUpdate" /></bpmn:startEvent>
  <bpmn:receiveTask id="Ack" messageRef="M1" /><bpmn:sequenceFlow id="FU" sourceRef="UpdateStart" targetRef="Ack" />
</bpmn:subProcess>
<bpmn:subProcess id="OnTimeout" triggeredByEvent="true">
  <bpmn:startEvent id="TimeoutStart"><bpmn:timerEventDefinition><bpmn:timeDuration>P1D</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:startEvent>
  <bpmn:endEvent id="TimedOut" /><bpmn:sequenceFlow id="FT" sourceRef="TimeoutStart" targetRef="TimedOut" />
</bpmn:subProcess>
<bpmn:subProcess id="OnError" triggeredByEvent="true">
  <bpmn:startEvent id="ErrorStart"><bpmn:errorEventDefinition errorRef="Err" /></bpmn:startEvent>
  <bpmn:receiveTask id="Repair" messageRef="M2" /><bpmn:sequenceFlow id="FE" sourceRef="ErrorStart" targetRef="Repair" />
</bpmn:subProcess>` + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Work" /><bpmn:sequenceFlow id="F2" sourceRef="Work" targetRef="E" />`

const eventSubDefs = msgDefs + `<bpmn:message id="MUpdate" name="update"><bpmn:extensionElements><zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements></bpmn:message>
<bpmn:error id="Err" errorCode="BROKEN" />`

func startEventSubs(t *testing.T) (*instance, Effects) {
	x := newInstance(t, parse(t, eventSubs, eventSubDefs))
	return x, x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
}

func TestProcessLevelEventSubprocessesArmWithTheInstance(t *testing.T) {
	x, eff := startEventSubs(t)
	if want := []Subscription{{TokenID: "", Element: "UpdateStart", Message: "update", CorrelationKey: "o-1"}}; !reflect.DeepEqual(eff.Subscriptions, want) {
		t.Errorf("subscriptions = %+v", eff.Subscriptions)
	}
	if want := []Timer{{TokenID: "", Element: "TimeoutStart", DueAt: t0.Add(24 * time.Hour)}}; !reflect.DeepEqual(eff.Timers, want) {
		t.Errorf("timers = %+v", eff.Timers)
	}
	want := []Armed{{Element: "UpdateStart", Key: "o-1"}, {Element: "TimeoutStart"}}
	if !reflect.DeepEqual(x.in.State.Armed, want) {
		t.Errorf("process-level waits = %+v", x.in.State.Armed)
	}
}

func TestNonInterruptingMessageEventSubprocessRunsBesideTheProcessAgainAndAgain(t *testing.T) {
	x, eff := startEventSubs(t)
	task := eff.Tasks[0].TokenID
	for n := 1; n <= 2; n++ {
		eff = x.step(Trigger{Kind: TriggerMessage, Message: "update", CorrelationKey: "o-1", Variables: map[string]any{"n": float64(n)}})
		if len(eff.CloseWaits) != 0 || len(eff.Subscriptions) != 1 || eff.Subscriptions[0].Element != "Ack" {
			t.Fatalf("update %d: %+v", n, eff)
		}
	}
	if got := x.at(); !slices.Equal(got, []string{"Work/task", "OnUpdate/scope", "Ack/message", "OnUpdate/scope", "Ack/message"}) {
		t.Errorf("tokens at %v", got)
	}
	// The main path ends; the process waits for its event subprocesses.
	if eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: task}); eff.Completed {
		t.Fatalf("completed with event subprocesses running")
	}
	x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	eff = x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	if n := len(eff.CloseWaits); !eff.Completed || n == 0 || eff.CloseWaits[n-1] != (WaitRef{TokenID: ""}) {
		t.Errorf("last effects = %+v: the process-level waits close with the process", eff)
	}
	if x.in.State.Armed != nil {
		t.Errorf("armed = %+v", x.in.State.Armed)
	}
}

func TestInterruptingTimerEventSubprocessEndsTheProcessContent(t *testing.T) {
	x, eff := startEventSubs(t)
	task := eff.Tasks[0].TokenID
	x.now = t0.Add(24 * time.Hour)
	eff = x.step(Trigger{Kind: TriggerTimer, TokenID: "", Element: "TimeoutStart"})
	want := []WaitRef{{TokenID: "", Element: "UpdateStart"}, {TokenID: "", Element: "TimeoutStart"}, {TokenID: task}}
	if !reflect.DeepEqual(eff.CloseWaits, want) || !eff.Completed {
		t.Errorf("effects = %+v\nwant close %+v", eff, want)
	}
	if err := x.fail(Trigger{Kind: TriggerTaskCompleted, TokenID: task}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("task completion after the timeout: %v", err)
	}
}

func TestErrorEventSubprocessCatchesAnErrorFromATask(t *testing.T) {
	x, eff := startEventSubs(t)
	eff = x.step(Trigger{Kind: TriggerTaskError, TokenID: eff.Tasks[0].TokenID, ErrorCode: "BROKEN", Variables: map[string]any{"why": "disk"}})
	if got := x.at(); !slices.Equal(got, []string{"OnError/scope", "Repair/message"}) {
		t.Errorf("tokens at %v", got)
	}
	if x.in.State.Variables["why"] != "disk" || len(x.in.State.Armed) != 0 {
		t.Errorf("variables %v, armed %+v: the interrupting event subprocess closed the others", x.in.State.Variables, x.in.State.Armed)
	}
}

func TestEventSubprocessInsideASubprocessArmsOnItsToken(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />`+receive("Inner", "M1")+
		`<bpmn:sequenceFlow id="FS" sourceRef="SS" targetRef="Inner" />
		<bpmn:subProcess id="Ping" triggeredByEvent="true"><bpmn:startEvent id="PingStart" isInterrupting="false"><bpmn:timerEventDefinition><bpmn:timeCycle>R2/PT10M</bpmn:timeCycle></bpmn:timerEventDefinition></bpmn:startEvent>
		<bpmn:intermediateThrowEvent id="Pinged" /><bpmn:sequenceFlow id="FP" sourceRef="PingStart" targetRef="Pinged" /></bpmn:subProcess>
		</bpmn:subProcess>`+receive("After", "M2")+flow("F1", "S", "Sub")+flow("F2", "Sub", "After"), msgDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart})
	sub := x.token("Sub")
	if want := []Timer{{TokenID: sub.ID, Element: "PingStart", DueAt: t0.Add(10 * time.Minute), Repeat: 1, Interval: "PT10M"}}; !reflect.DeepEqual(eff.Timers, want) {
		t.Fatalf("timers = %+v", eff.Timers)
	}
	x.now = t0.Add(10 * time.Minute)
	eff = x.step(Trigger{Kind: TriggerTimer, TokenID: sub.ID, Element: "PingStart"})
	if len(eff.Timers) != 1 || eff.Timers[0].Repeat != 0 || !slices.Equal(x.at(), []string{"Sub/scope", "Inner/message"}) {
		t.Fatalf("ping: %+v, tokens at %v: the cycle re-arms and the event subprocess ran through", eff, x.at())
	}
	eff = x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	if !slices.Contains(eff.CloseWaits, WaitRef{TokenID: sub.ID}) || !slices.Equal(x.at(), []string{"After/message"}) {
		t.Errorf("effects = %+v: the subprocess's timer closes with it", eff)
	}
}

func TestEventSubprocessKeyThatFailsStopsTheStartAndARetryArmsIt(t *testing.T) {
	x := newInstance(t, parse(t, eventSubs, eventSubDefs))
	eff := x.step(Trigger{Kind: TriggerStart})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Element != "S" || eff.Incidents[0].Stage != StageLeave || len(eff.Subscriptions)+len(eff.Timers) != 0 {
		t.Fatalf("effects = %+v", eff)
	}
	eff = x.step(Trigger{Kind: TriggerRetry, TokenID: eff.Incidents[0].TokenID, Variables: map[string]any{"orderId": "o-2"}})
	if len(eff.Subscriptions) != 1 || eff.Subscriptions[0].CorrelationKey != "o-2" || len(eff.Tasks) != 1 {
		t.Errorf("retry = %+v", eff)
	}
}
