package engine

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// escalatingChild throws the escalation "=level" from an intermediate throw
// event, then waits for m1; with stop set it ends at an escalation end event
// (STOP) instead. Its own event subprocess catches INNER.
var escalatingChild = `<bpmn:startEvent id="CS" /><bpmn:exclusiveGateway id="G" default="FWarn" />
<bpmn:endEvent id="StopEnd"><bpmn:escalationEventDefinition escalationRef="EscStop" /></bpmn:endEvent>
<bpmn:intermediateThrowEvent id="Warn"><bpmn:escalationEventDefinition escalationRef="EscDyn" /></bpmn:intermediateThrowEvent>` +
	receive("Work", "M1") + `<bpmn:endEvent id="CE" />
<bpmn:subProcess id="OnInner" triggeredByEvent="true">
  <bpmn:startEvent id="InnerStart" isInterrupting="false"><bpmn:escalationEventDefinition escalationRef="EscInner" /></bpmn:startEvent>
  <bpmn:endEvent id="InnerEnd" />` + flow("FI", "InnerStart", "InnerEnd") + `
</bpmn:subProcess>` +
	flow("FC1", "CS", "G") + cond("FStop", "G", "StopEnd", "=stop") + flow("FWarn", "G", "Warn") + flow("FC2", "Warn", "Work") + flow("FC3", "Work", "CE")

// escalationCaller calls a child; its call activity catches STOP
// (interrupting), LATE (non-interrupting) and any other escalation
// (non-interrupting catch-all).
var escalationCaller = `<bpmn:startEvent id="S" />
<bpmn:callActivity id="Call"><bpmn:extensionElements><zeebe:calledElement processId="child" /></bpmn:extensionElements></bpmn:callActivity>
<bpmn:boundaryEvent id="Stop" attachedToRef="Call"><bpmn:escalationEventDefinition escalationRef="EscStop" /></bpmn:boundaryEvent>
<bpmn:boundaryEvent id="Late" cancelActivity="false" attachedToRef="Call"><bpmn:escalationEventDefinition escalationRef="EscLate" /></bpmn:boundaryEvent>
<bpmn:boundaryEvent id="Any" cancelActivity="false" attachedToRef="Call"><bpmn:escalationEventDefinition /></bpmn:boundaryEvent>` +
	receive("Done", "M1") + receive("Noted", "M2") + receive("Other", "M3") + `<bpmn:endEvent id="Stopped" />` +
	flow("F1", "S", "Call") + flow("F2", "Call", "Done") + flow("F3", "Stop", "Stopped") + flow("F4", "Late", "Noted") + flow("F5", "Any", "Other")

// scopedCaller calls a child inside subprocess Sub, whose non-interrupting
// event subprocess catches LATE; the call activity itself catches only STOP.
var scopedCaller = `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SubStart" />
  <bpmn:callActivity id="Call"><bpmn:extensionElements><zeebe:calledElement processId="child" /></bpmn:extensionElements></bpmn:callActivity>
  <bpmn:endEvent id="SubEnd" />
  <bpmn:subProcess id="OnLate" triggeredByEvent="true">
    <bpmn:startEvent id="LateStart" isInterrupting="false"><bpmn:escalationEventDefinition escalationRef="EscLate" /></bpmn:startEvent>` +
	receive("Seen", "M2") + flow("FL", "LateStart", "Seen") + `
  </bpmn:subProcess>
  <bpmn:boundaryEvent id="Stop" attachedToRef="Call"><bpmn:escalationEventDefinition escalationRef="EscStop" /></bpmn:boundaryEvent>
  <bpmn:endEvent id="Stopped" />` + flow("FS1", "SubStart", "Call") + flow("FS2", "Call", "SubEnd") + flow("FS3", "Stop", "Stopped") + `
</bpmn:subProcess>
<bpmn:endEvent id="E" />` + flow("F1", "S", "Sub") + flow("F2", "Sub", "E")

const callEscalationDefs = msgDefs + `<bpmn:escalation id="EscDyn" escalationCode="=level" />
<bpmn:escalation id="EscStop" escalationCode="STOP" /><bpmn:escalation id="EscLate" escalationCode="LATE" />
<bpmn:escalation id="EscInner" escalationCode="INNER" />`

func TestAChildRelaysToItsParentOnlyTheEscalationsNoneOfItsScopesCatchAndRunsOn(t *testing.T) {
	parent := &ParentRef{InstanceID: "i-1", TokenID: "t1", Element: "Call"}
	start := func(p *ParentRef, vars map[string]any) (*instance, Effects) {
		x := newInstance(t, parse(t, escalatingChild, callEscalationDefs))
		x.in.ID = "i-1/t1"
		return x, x.step(Trigger{Kind: TriggerStart, Parent: p, Variables: vars})
	}

	x, eff := start(parent, map[string]any{"stop": false, "level": "LATE"})
	want := &ParentEscalation{ID: "i-1/t1/1", Parent: *parent, Codes: []string{"LATE"}}
	if !reflect.DeepEqual(eff.EscalateParent, want) || eff.NotifyParent != nil {
		t.Errorf("intermediate throw: effects = %+v\nwant escalation %+v", eff, want)
	}
	if got := x.at(); !slices.Equal(got, []string{"Work/message"}) {
		t.Errorf("the thrower went on: tokens at %v, want Work", got)
	}

	// The child counts the escalation relays it sent; its end tells the
	// parent how many came before it.
	if x.in.State.Escalated != 1 {
		t.Errorf("escalation relays counted: %d, want 1", x.in.State.Escalated)
	}
	eff = x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	if eff.NotifyParent == nil || eff.NotifyParent.Escalated != 1 || eff.EscalateParent != nil {
		t.Errorf("the child's end: effects = %+v, want its notice to count 1 escalation relay before it", eff)
	}

	x, eff = start(parent, map[string]any{"stop": false, "level": "INNER"})
	if eff.EscalateParent != nil || !slices.Equal(x.at(), []string{"Work/message"}) {
		t.Errorf("caught by the child's own event subprocess: effects = %+v, tokens at %v", eff, x.at())
	}

	x, eff = start(nil, map[string]any{"stop": false, "level": "LATE"})
	if eff.EscalateParent != nil || !slices.Equal(x.at(), []string{"Work/message"}) {
		t.Errorf("no parent: an uncaught escalation changes nothing: effects = %+v, tokens at %v", eff, x.at())
	}

	// An escalation end event ends the child: the escalation and the end
	// leave in the same step, the escalation in the end's relay.
	x, eff = start(parent, map[string]any{"stop": true})
	want = &ParentEscalation{ID: "i-1/t1/1", Parent: *parent, Codes: []string{"STOP"}}
	if !reflect.DeepEqual(eff.EscalateParent, want) || eff.NotifyParent == nil || eff.NotifyParent.Escalated != 0 || !eff.Completed || x.in.State.Status != StatusCompleted {
		t.Errorf("end event: effects = %+v, status %s", eff, x.in.State.Status)
	}
}

// startEscalationCaller starts def, whose call activity waits on token t1
// (t2 inside a subprocess).
func startEscalationCaller(t *testing.T, def string, parent *ParentRef) *instance {
	x := newInstance(t, parse(t, def, callEscalationDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Parent: parent})
	if len(eff.StartChildren) != 1 || x.token("Call").Wait != WaitChild {
		t.Fatalf("effects = %+v", eff)
	}
	return x
}

func TestACallActivityCatchesItsRunningChildsEscalationsOnItsBoundaryEvents(t *testing.T) {
	tests := []struct {
		name   string
		codes  []string
		at     []string
		cancel bool
	}{
		{"a code-specific non-interrupting boundary: the call activity waits on", []string{"LATE"}, []string{"Call/child", "Noted/message"}, false},
		{"the catch-all takes any other code", []string{"OTHER"}, []string{"Call/child", "Other/message"}, false},
		{"an interrupting boundary ends the call activity and cancels the child", []string{"STOP"}, nil, true},
		{"in order, until an interrupting one ends the call activity", []string{"LATE", "STOP", "OTHER"}, []string{"Noted/message"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := startEscalationCaller(t, escalationCaller, nil)
			eff := x.step(Trigger{Kind: TriggerChildEscalated, TokenID: "t1", Element: "Call", Escalations: tt.codes})
			got := x.at()
			slices.Sort(got)
			if !slices.Equal(got, tt.at) {
				t.Errorf("tokens at %v, want %v", got, tt.at)
			}
			if cancelled := slices.Equal(eff.CancelChildren, []string{"i-1/t1"}); cancelled != tt.cancel || eff.EscalateParent != nil {
				t.Errorf("effects = %+v, want the child cancelled: %v", eff, tt.cancel)
			}
			if tt.cancel {
				// A later relay of the cancelled child finds nothing waiting.
				err := x.fail(Trigger{Kind: TriggerChildEscalated, TokenID: "t1", Element: "Call", Escalations: []string{"LATE"}})
				if !fault.HasCode(err, fault.NotWaiting) {
					t.Errorf("a late escalation: %v, want %s", err, fault.NotWaiting)
				}
			}
		})
	}
}

func TestAChildsEscalationIsCaughtAroundTheCallActivityOrGoesOnToTheGrandparent(t *testing.T) {
	x := startEscalationCaller(t, scopedCaller, nil)
	eff := x.step(Trigger{Kind: TriggerChildEscalated, TokenID: "t2", Element: "Call", Escalations: []string{"LATE"}})
	got := x.at()
	slices.Sort(got)
	if want := []string{"Call/child", "OnLate/scope", "Seen/message", "Sub/scope"}; !slices.Equal(got, want) || len(eff.CancelChildren) != 0 {
		t.Errorf("the subprocess's event subprocess: tokens at %v, want %v; effects %+v", got, want, eff)
	}

	eff = x.step(Trigger{Kind: TriggerChildEscalated, TokenID: "t2", Element: "Call", Escalations: []string{"NOPE"}})
	if !reflect.DeepEqual(eff, Effects{}) || x.token("Call").Wait != WaitChild {
		t.Errorf("no parent: an uncaught escalation changes nothing: %+v", eff)
	}

	grandparent := &ParentRef{InstanceID: "g-1", TokenID: "t9", Element: "Outer"}
	x = startEscalationCaller(t, scopedCaller, grandparent)
	eff = x.step(Trigger{Kind: TriggerChildEscalated, TokenID: "t2", Element: "Call", Escalations: []string{"NOPE", "STOP"}})
	want := &ParentEscalation{ID: "i-1/2", Parent: *grandparent, Codes: []string{"NOPE"}}
	if !reflect.DeepEqual(eff.EscalateParent, want) || !slices.Equal(eff.CancelChildren, []string{"i-1/t2"}) || !eff.Completed {
		t.Errorf("uncaught here, relayed to the grandparent; STOP caught: effects = %+v\nwant escalation %+v", eff, want)
	}
}

func TestEscalationsThrownAsTheChildEndedAreCaughtBeforeItsEnd(t *testing.T) {
	x := startEscalationCaller(t, escalationCaller, nil)
	eff := x.step(Trigger{Kind: TriggerChildCompleted, TokenID: "t1", Element: "Call", Escalations: []string{"STOP"}})
	if !eff.Completed || len(eff.CancelChildren) != 0 || len(x.in.State.Tokens) != 0 {
		t.Errorf("interrupting: the boundary flow ends the instance, the ended child is not cancelled: %+v, tokens %v", eff, x.at())
	}

	x = startEscalationCaller(t, escalationCaller, nil)
	eff = x.step(Trigger{Kind: TriggerChildCompleted, TokenID: "t1", Element: "Call", Escalations: []string{"LATE"}})
	got := x.at()
	slices.Sort(got)
	if want := []string{"Done/message", "Noted/message"}; !slices.Equal(got, want) || len(eff.CancelChildren) != 0 {
		t.Errorf("non-interrupting: both the boundary flow and the completion: tokens at %v, want %v; effects %+v", got, want, eff)
	}
}

func TestAChildsEndThatOvertookItsEscalationIsRefusedUntilTheEscalationIsApplied(t *testing.T) {
	x := startEscalationCaller(t, escalationCaller, nil)
	end := Trigger{Kind: TriggerChildCompleted, TokenID: "t1", Element: "Call", Escalated: 1}
	if err := x.fail(end); !fault.HasCode(err, fault.ChildEndEarly) {
		t.Fatalf("an end before the escalation relay sent ahead of it: %v, want %s", err, fault.ChildEndEarly)
	}
	x.step(Trigger{Kind: TriggerChildEscalated, TokenID: "t1", Element: "Call", Escalations: []string{"LATE"}})
	x.step(end)
	got := x.at()
	slices.Sort(got)
	if want := []string{"Done/message", "Noted/message"}; !slices.Equal(got, want) {
		t.Errorf("tokens at %v, want %v: the escalation caught, then the end applied", got, want)
	}
}

func TestACallActivityCountsTheEscalationsOfEachChildItCallsAfresh(t *testing.T) {
	// One token calls two children in turn.
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:callActivity id="Call"><bpmn:extensionElements><zeebe:calledElement processId="child" /></bpmn:extensionElements></bpmn:callActivity>
<bpmn:callActivity id="Again"><bpmn:extensionElements><zeebe:calledElement processId="child" /></bpmn:extensionElements></bpmn:callActivity>
<bpmn:endEvent id="E" />`+flow("F1", "S", "Call")+flow("F2", "Call", "Again")+flow("F3", "Again", "E"), callEscalationDefs))
	first := x.step(Trigger{Kind: TriggerStart}).StartChildren[0]
	x.step(Trigger{Kind: TriggerChildEscalated, TokenID: first.TokenID, Element: "Call", Escalations: []string{"LATE"}})
	eff := x.step(Trigger{Kind: TriggerChildCompleted, TokenID: first.TokenID, Element: "Call", Escalated: 1})
	if len(eff.StartChildren) != 1 {
		t.Fatalf("the second call activity did not call its child: %+v", eff)
	}
	second := eff.StartChildren[0]
	err := x.fail(Trigger{Kind: TriggerChildCompleted, TokenID: second.TokenID, Element: "Again", Escalated: 1})
	if !fault.HasCode(err, fault.ChildEndEarly) {
		t.Errorf("the second child's end counted the first child's escalation: %v, want %s", err, fault.ChildEndEarly)
	}
}
