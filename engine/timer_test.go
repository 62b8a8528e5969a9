package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

func timerCatch(id, kind, value string) string {
	return `<bpmn:intermediateCatchEvent id="` + id + `"><bpmn:timerEventDefinition><bpmn:` + kind +
		` xsi:type="bpmn:tFormalExpression">` + value + `</bpmn:` + kind + `></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>`
}

func TestTimerCatchEventArmsTimerDueFromNow(t *testing.T) {
	tests := []struct {
		name, kind, value string
		vars              map[string]any
		want              time.Time
	}{
		{"duration", "timeDuration", "PT15M", nil, t0.Add(15 * time.Minute)},
		{"duration with days", "timeDuration", "P1DT2H", nil, t0.Add(26 * time.Hour)},
		{"date", "timeDate", "2025-03-02T08:30:00Z", nil, time.Date(2025, 3, 2, 8, 30, 0, 0, time.UTC)},
		{"duration expression", "timeDuration", "=delay", map[string]any{"delay": "PT1H"}, t0.Add(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+timerCatch("Wait", tt.kind, tt.value)+flow("F", "S", "Wait"), ""))
			eff := x.step(Trigger{Kind: TriggerStart, Variables: tt.vars})
			want := []Timer{{TokenID: "t1", Element: "Wait", DueAt: tt.want}}
			if !reflect.DeepEqual(eff.Timers, want) || x.token("Wait").Wait != WaitTimer {
				t.Fatalf("timers = %+v, want %+v", eff.Timers, want)
			}
			eff = x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Wait"})
			if !reflect.DeepEqual(eff, Effects{CloseWaits: []WaitRef{{TokenID: "t1"}}, Completed: true, Passed: []string{"Wait"}}) {
				t.Errorf("fire = %+v", eff)
			}
		})
	}
}

func TestTimerExpressionThatFailsRaisesIncident(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+timerCatch("Wait", "timeDuration", "=delay")+flow("F", "S", "Wait"), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"delay": "soon"}})
	if len(eff.Timers) != 0 || len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentExpression || x.token("Wait").Wait != WaitIncident {
		t.Errorf("effects = %+v", eff)
	}
}

func TestStaleTimerFireIsNotWaiting(t *testing.T) {
	// A loop back to the same timer: the re-armed timer belongs to a new token
	// id, so the old fire (read by the poller before the first one was
	// deleted) cannot fire it early.
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" />`+timerCatch("Wait", "timeDuration", "PT1M")+
		flow("F1", "S", "G")+flow("F2", "G", "Wait")+flow("F3", "Wait", "G"), "")
	x := newInstance(t, def)
	x.step(Trigger{Kind: TriggerStart})
	eff := x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Wait"})
	if len(eff.Timers) != 1 || eff.Timers[0].TokenID == "t1" {
		t.Fatalf("re-armed timer = %+v", eff.Timers)
	}
	if err := x.fail(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Wait"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("stale fire: %v", err)
	}
}

const boundaryTimers = `
<bpmn:startEvent id="S" />
<bpmn:serviceTask id="Approve"><bpmn:extensionElements><zeebe:taskDefinition type="approve" /></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:boundaryEvent id="Remind" cancelActivity="false" attachedToRef="Approve">
  <bpmn:timerEventDefinition><bpmn:timeCycle xsi:type="bpmn:tFormalExpression">R3/PT10M</bpmn:timeCycle></bpmn:timerEventDefinition>
</bpmn:boundaryEvent>
<bpmn:boundaryEvent id="Expire" attachedToRef="Approve">
  <bpmn:timerEventDefinition><bpmn:timeDuration xsi:type="bpmn:tFormalExpression">P2D</bpmn:timeDuration></bpmn:timerEventDefinition>
</bpmn:boundaryEvent>
<bpmn:intermediateThrowEvent id="Reminded" />
<bpmn:endEvent id="Done" />
<bpmn:endEvent id="Expired" />
` + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Approve" />
<bpmn:sequenceFlow id="F2" sourceRef="Approve" targetRef="Done" />
<bpmn:sequenceFlow id="F3" sourceRef="Remind" targetRef="Reminded" />
<bpmn:sequenceFlow id="F4" sourceRef="Expire" targetRef="Expired" />`

func TestBoundaryTimersArmWithTheirActivity(t *testing.T) {
	x := newInstance(t, parse(t, boundaryTimers, ""))
	eff := x.step(Trigger{Kind: TriggerStart})
	want := []Timer{
		{TokenID: "t1", Element: "Remind", DueAt: t0.Add(10 * time.Minute), Repeat: 2, Interval: "PT10M"},
		{TokenID: "t1", Element: "Expire", DueAt: t0.Add(48 * time.Hour)},
	}
	if !reflect.DeepEqual(eff.Timers, want) || len(eff.Tasks) != 1 {
		t.Fatalf("timers = %+v\nwant %+v", eff.Timers, want)
	}
}

func TestNonInterruptingCycleTimerFiresItsRepetitionsThenCloses(t *testing.T) {
	x := newInstance(t, parse(t, boundaryTimers, ""))
	x.step(Trigger{Kind: TriggerStart})
	for n, wantRepeat := range []int{1, 0, -1} {
		x.now = t0.Add(time.Duration(n+1) * 10 * time.Minute)
		eff := x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Remind"})
		if !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1", Element: "Remind"}}) || eff.Completed {
			t.Fatalf("firing %d: close = %+v", n+1, eff.CloseWaits)
		}
		if wantRepeat < 0 {
			if len(eff.Timers) != 0 {
				t.Errorf("firing %d re-armed after the last repetition: %+v", n+1, eff.Timers)
			}
			continue
		}
		want := []Timer{{TokenID: "t1", Element: "Remind", DueAt: x.now.Add(10 * time.Minute), Repeat: wantRepeat, Interval: "PT10M"}}
		if !reflect.DeepEqual(eff.Timers, want) {
			t.Errorf("firing %d: timers = %+v\nwant %+v", n+1, eff.Timers, want)
		}
	}
	if tok := x.token("Approve"); tok.Wait != WaitTask || len(tok.Armed) != 2 {
		t.Errorf("the task and its other timer must stay armed: %+v", tok)
	}
	if err := x.fail(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Remind"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("fourth firing: %v", err)
	}
}

func TestInterruptingBoundaryTimerCancelsTaskAndOtherTimers(t *testing.T) {
	x := newInstance(t, parse(t, boundaryTimers, ""))
	x.step(Trigger{Kind: TriggerStart})
	eff := x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Expire"})
	if !reflect.DeepEqual(eff, Effects{CloseWaits: []WaitRef{{TokenID: "t1"}}, Completed: true, Passed: []string{"Approve", "Expire", "F4", "Expired"}}) {
		t.Errorf("effects = %+v", eff)
	}
	if err := x.fail(Trigger{Kind: TriggerTaskCompleted, TokenID: "t1"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("completion after the timer won: %v", err)
	}
}

func TestEventGatewayMessageAndTimerRaceHasExactlyOneWinner(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:eventBasedGateway id="G" />`+catchMsg("Paid", "M1")+
		timerCatch("Timeout", "timeDuration", "PT30M")+`<bpmn:endEvent id="E1" /><bpmn:endEvent id="E2" />`+
		flow("F0", "S", "G")+flow("F1", "G", "Paid")+flow("F2", "G", "Timeout")+flow("F3", "Paid", "E1")+flow("F4", "Timeout", "E2"), msgDefs)
	message := Trigger{Kind: TriggerMessage, Message: "m1"}
	timer := Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Timeout"}
	paths := map[TriggerKind][]string{TriggerMessage: {"G", "F1", "Paid", "F3", "E1"}, TriggerTimer: {"G", "F2", "Timeout", "F4", "E2"}}
	for _, order := range [][2]Trigger{{message, timer}, {timer, message}} {
		x := newInstance(t, def)
		eff := x.step(Trigger{Kind: TriggerStart})
		if len(eff.Subscriptions) != 1 || len(eff.Timers) != 1 {
			t.Fatalf("gateway waits: %+v", eff)
		}
		eff = x.step(order[0])
		if !reflect.DeepEqual(eff, Effects{CloseWaits: []WaitRef{{TokenID: "t1"}}, Completed: true, Passed: paths[order[0].Kind]}) {
			t.Errorf("%s wins: %+v", order[0].Kind, eff)
		}
		if err := x.fail(order[1]); !fault.HasCode(err, fault.NotWaiting) {
			t.Errorf("%s after %s: %v, want %s", order[1].Kind, order[0].Kind, err, fault.NotWaiting)
		}
	}
}
