package engine

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// migrateV1 waits at service task "Pack" (timer boundary "Late") and, in
// parallel, at receive task "Confirm" inside subprocess "Sub".
var migrateV1 = `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" />
<bpmn:serviceTask id="Pack"><bpmn:extensionElements><zeebe:taskDefinition type="pack" /></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:boundaryEvent id="Late" attachedToRef="Pack"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />` + `<bpmn:receiveTask id="Confirm" messageRef="M1" /><bpmn:sequenceFlow id="FS" sourceRef="SS" targetRef="Confirm" /></bpmn:subProcess>` +
	flow("F0", "S", "Fork") + flow("F1", "Fork", "Pack") + flow("F2", "Fork", "Sub")

func startMigration(t *testing.T) *instance {
	x := newInstance(t, parse(t, migrateV1, msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	if got := x.at(); !reflect.DeepEqual(got, []string{"Pack/task", "Sub/scope", "Confirm/message"}) {
		t.Fatalf("tokens at %v", got)
	}
	return x
}

// migrate runs Migrate and checks that it left its input alone.
func (x *instance) migrate(to string, mapping map[string]string) (State, Effects, error) {
	x.t.Helper()
	before := snapshot(x.t, x.in.State)
	st, eff, err := Migrate(x.def, parse(x.t, to, msgDefs), x.in, mapping, x.now)
	if after := snapshot(x.t, x.in.State); after != before {
		x.t.Fatalf("Migrate modified its input state")
	}
	return st, eff, err
}

func TestMigrateKeepsWaitsAndRenamesTheirRows(t *testing.T) {
	x := startMigration(t)
	// v2 renames Pack → Packing and Late → TooLate, and gives it a message
	// boundary; Confirm now waits for another message.
	v2 := strings.NewReplacer(`id="Pack"`, `id="Packing"`, `"Pack"`, `"Packing"`, `id="Late" attachedToRef="Pack"`, `id="TooLate" attachedToRef="Packing"`,
		`messageRef="M1"`, `messageRef="M2"`).Replace(migrateV1) +
		`<bpmn:boundaryEvent id="Cancel" attachedToRef="Packing"><bpmn:messageEventDefinition messageRef="M3" /></bpmn:boundaryEvent>`
	v2 = strings.ReplaceAll(v2, `attachedToRef="Pack"`, `attachedToRef="Packing"`)
	v2 = strings.ReplaceAll(v2, `targetRef="Pack"`, `targetRef="Packing"`)
	st, eff, err := x.migrate(v2, map[string]string{"Pack": "Packing", "Late": "TooLate"})
	if err != nil {
		t.Fatal(err)
	}
	want := Effects{
		CloseWaits:    []WaitRef{{TokenID: "t3", Element: "Confirm"}},
		RenameWaits:   []WaitRename{{TokenID: "t1", From: "Pack", To: "Packing"}, {TokenID: "t1", From: "Late", To: "TooLate"}},
		Subscriptions: []Subscription{{TokenID: "t1", Element: "Cancel", Message: "m3"}, {TokenID: "t3", Element: "Confirm", Message: "m2"}},
	}
	if !reflect.DeepEqual(eff, want) {
		t.Errorf("effects = %+v\nwant %+v", eff, want)
	}
	if st.Tokens[0].Element != "Packing" || !reflect.DeepEqual(st.Tokens[0].Armed, []Armed{{Element: "Packing"}, {Element: "TooLate"}, {Element: "Cancel"}}) {
		t.Errorf("token = %+v", st.Tokens[0])
	}
	// The migrated instance runs on the new definition.
	x.def, x.in.State = parse(t, v2, msgDefs), stored(t, st)
	x.now = t0.Add(time.Hour)
	if eff := x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "TooLate"}); !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1"}}) {
		t.Errorf("timer after migration: %+v", eff)
	}
}

func TestMigrateClosesBoundaryEventsTheTargetDropped(t *testing.T) {
	x := startMigration(t)
	v2 := strings.Replace(migrateV1, `<bpmn:boundaryEvent id="Late" attachedToRef="Pack"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>`, "", 1)
	_, eff, err := x.migrate(v2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(eff, Effects{CloseWaits: []WaitRef{{TokenID: "t1", Element: "Late"}}}) {
		t.Errorf("effects = %+v", eff)
	}
}

func TestMigratePreflightRefusesTokensWithNowhereToGo(t *testing.T) {
	tests := []struct {
		name, to string
		mapping  map[string]string
		want     string
	}{
		{"element gone", strings.ReplaceAll(migrateV1, `"Confirm"`, `"Confirmed"`), nil, `token t3 at Confirm: the target definition has no element "Confirm"`},
		{"wait of another nature", strings.Replace(migrateV1, `<bpmn:receiveTask id="Confirm" messageRef="M1" />`,
			`<bpmn:serviceTask id="Confirm"><bpmn:extensionElements><zeebe:taskDefinition type="c" /></bpmn:extensionElements></bpmn:serviceTask>`, 1),
			nil, `token t3 at Confirm: target serviceTask "Confirm" cannot hold a token waiting as message`},
		{"out of its scope", migrateV1 + receive("Outside", "M1"), map[string]string{"Confirm": "Outside"},
			`token t3 at Confirm: target "Outside" is not inside "Sub"`},
		{"service task onto a user task", strings.Replace(migrateV1, `<bpmn:serviceTask id="Pack"><bpmn:extensionElements><zeebe:taskDefinition type="pack" /></bpmn:extensionElements></bpmn:serviceTask>`,
			`<bpmn:userTask id="Pack" />`, 1), nil, `token t1 at Pack: target userTask "Pack" cannot hold a token waiting as task`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := startMigration(t)
			st, _, err := x.migrate(tt.to, tt.mapping)
			if !fault.HasCode(err, fault.MigrateUnreachable) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %s: %s", err, fault.MigrateUnreachable, tt.want)
			}
			if st.Tokens != nil || st.Status != "" {
				t.Errorf("a refused migration returned state %+v", st)
			}
		})
	}
}

func TestMigrateMovesProcessLevelEventSubprocessWaits(t *testing.T) {
	x, _ := startEventSubs(t)
	// v2 drops the timer event subprocess, renames the message one's start
	// and adds a timer-started one.
	v2 := strings.NewReplacer(
		`<bpmn:startEvent id="TimeoutStart"><bpmn:timerEventDefinition><bpmn:timeDuration>P1D</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:startEvent>`,
		`<bpmn:startEvent id="TimeoutStart"><bpmn:messageEventDefinition messageRef="M3" /></bpmn:startEvent>`,
		`id="UpdateStart"`, `id="OnUpdateStart"`, `sourceRef="UpdateStart"`, `sourceRef="OnUpdateStart"`,
	).Replace(eventSubs)
	st, eff, err := Migrate(x.def, parse(t, v2, eventSubDefs), x.in, map[string]string{"UpdateStart": "OnUpdateStart"}, x.now)
	if err != nil {
		t.Fatal(err)
	}
	want := Effects{
		CloseWaits:    []WaitRef{{TokenID: "", Element: "TimeoutStart"}},
		RenameWaits:   []WaitRename{{TokenID: "", From: "UpdateStart", To: "OnUpdateStart"}},
		Subscriptions: []Subscription{{TokenID: "", Element: "TimeoutStart", Message: "m3"}},
	}
	if !reflect.DeepEqual(eff, want) {
		t.Errorf("effects = %+v\nwant %+v", eff, want)
	}
	if !reflect.DeepEqual(st.Armed, []Armed{{Element: "OnUpdateStart", Key: "o-1"}, {Element: "TimeoutStart"}}) {
		t.Errorf("process-level waits = %+v", st.Armed)
	}
}

func TestMigrateMovesAMultiInstanceBodyWithItsInnerInstances(t *testing.T) {
	x := newInstance(t, parse(t, miTask("false", "", ""), ""))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": items(2)}})
	v2 := strings.NewReplacer(`id="Ship"`, `id="Deliver"`, `"Ship"`, `"Deliver"`).Replace(miTask("false", "", ""))
	st, eff, err := x.migrate(v2, map[string]string{"Ship": "Deliver"})
	if err != nil {
		t.Fatal(err)
	}
	if len(eff.RenameWaits) != 2 || len(eff.CloseWaits)+len(eff.Timers)+len(eff.Subscriptions) != 0 {
		t.Errorf("effects = %+v: the two task rows move, the body's timer stays", eff)
	}
	for _, tok := range st.Tokens {
		if tok.Element != "Deliver" {
			t.Errorf("token %+v", tok)
		}
	}
	// Without the marker in the target nothing can hold the inner instances.
	plain := regexp.MustCompile(`(?s)<bpmn:multiInstanceLoopCharacteristics.*</bpmn:multiInstanceLoopCharacteristics>`).ReplaceAllString(miTask("false", "", ""), "")
	if _, _, err = x.migrate(plain, nil); !fault.HasCode(err, fault.MigrateUnreachable) || !strings.Contains(err.Error(), "token t1 at Ship: target serviceTask \"Ship\" cannot hold a token waiting as multi") {
		t.Errorf("migrating a multi-instance body onto a plain task: %v", err)
	}
}

func TestMigrateRefusesAnInstanceThatEnded(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`, ""))
	x.step(Trigger{Kind: TriggerStart})
	if _, _, err := x.migrate(`<bpmn:startEvent id="S" />`, nil); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("err = %v", err)
	}
}
