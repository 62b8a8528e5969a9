package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// passThrough is start → undefined task → manual task (with local inputs
// its outputs read) → script task → link throw; the link's catch event
// leads to a receive task.
const passThrough = `<bpmn:startEvent id="S" /><bpmn:task id="Draft" />
<bpmn:manualTask id="Sign"><bpmn:extensionElements><zeebe:ioMapping>
  <zeebe:input source="=name + &quot; signed&quot;" target="note" /><zeebe:output source="=note" target="signature" />
</zeebe:ioMapping></bpmn:extensionElements></bpmn:manualTask>
<bpmn:scriptTask id="Total"><bpmn:extensionElements><zeebe:script expression="=price * qty" resultVariable="total" /></bpmn:extensionElements></bpmn:scriptTask>
<bpmn:intermediateThrowEvent id="GoOn"><bpmn:linkEventDefinition name="page2" /></bpmn:intermediateThrowEvent>
<bpmn:intermediateCatchEvent id="Page2"><bpmn:linkEventDefinition name="page2" /></bpmn:intermediateCatchEvent>
` + `<bpmn:receiveTask id="Wait" messageRef="M1" />` +
	`<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Draft" /><bpmn:sequenceFlow id="F2" sourceRef="Draft" targetRef="Sign" />
<bpmn:sequenceFlow id="F3" sourceRef="Sign" targetRef="Total" /><bpmn:sequenceFlow id="F4" sourceRef="Total" targetRef="GoOn" />
<bpmn:sequenceFlow id="F5" sourceRef="Page2" targetRef="Wait" />`

func TestPassThroughTasksScriptsAndLinksRunWithinTheStep(t *testing.T) {
	x := newInstance(t, parse(t, passThrough, msgDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"name": "ada", "price": 2.5, "qty": 4.0}})
	if len(eff.Subscriptions) != 1 || eff.Subscriptions[0].Element != "Wait" {
		t.Fatalf("effects = %+v", eff)
	}
	want := map[string]any{"name": "ada", "price": 2.5, "qty": 4.0, "signature": "ada signed", "total": 10.0}
	if !reflect.DeepEqual(x.in.State.Variables, want) {
		t.Errorf("variables = %v\nwant %v", x.in.State.Variables, want)
	}
	if tok := x.token("Wait"); tok.Flow != "F5" || tok.Vars != nil {
		t.Errorf("token = %+v", tok)
	}
}

func TestScriptThatFailsRaisesAnIncidentARetryResolves(t *testing.T) {
	x := newInstance(t, parse(t, passThrough, msgDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"name": "ada", "price": "free", "qty": 4.0}})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Element != "Total" || !strings.Contains(eff.Incidents[0].Message, "script of Total") {
		t.Fatalf("effects = %+v", eff)
	}
	tok := x.token("Total")
	eff = x.step(Trigger{Kind: TriggerRetry, TokenID: tok.ID, Variables: map[string]any{"price": 1.0}})
	if !slices.Equal(eff.ResolvedIncidents, []string{tok.ID}) || len(eff.Subscriptions) != 1 || x.in.State.Variables["total"] != 4.0 {
		t.Errorf("retry = %+v, variables %v", eff, x.in.State.Variables)
	}
}

// localScope is a subprocess with a local variable declared by an input
// without source and one mapped from the instance; a task inside writes
// both and a global.
const localScope = `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:extensionElements><zeebe:ioMapping>
    <zeebe:input target="attempt" /><zeebe:input source="=order.id" target="orderId" />
    <zeebe:output source="=attempt" target="lastAttempt" />
  </zeebe:ioMapping></bpmn:extensionElements>
  <bpmn:startEvent id="SS" />
  <bpmn:serviceTask id="Try"><bpmn:extensionElements><zeebe:taskDefinition type="try" /></bpmn:extensionElements></bpmn:serviceTask>
  <bpmn:sequenceFlow id="FS" sourceRef="SS" targetRef="Try" />
</bpmn:subProcess>
<bpmn:receiveTask id="After" messageRef="M1" />` + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Sub" /><bpmn:sequenceFlow id="F2" sourceRef="Sub" targetRef="After" />`

func TestSubprocessInputsCreateLocalsThatWritesFind(t *testing.T) {
	x := newInstance(t, parse(t, localScope, msgDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"id": "o-1"}}})
	sub := x.token("Sub")
	if !reflect.DeepEqual(sub.Vars, map[string]any{"attempt": nil, "orderId": "o-1"}) {
		t.Fatalf("subprocess locals = %v", sub.Vars)
	}
	if v := eff.Tasks[0].Variables; !reflect.DeepEqual(v, map[string]any{"attempt": nil, "orderId": "o-1"}) {
		t.Errorf("task variables = %v: a task carries its scope's locals, not a copy of the instance's variables", v)
	}
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID, Variables: map[string]any{"attempt": 2.0, "outcome": "ok"}})
	want := map[string]any{"order": map[string]any{"id": "o-1"}, "outcome": "ok", "lastAttempt": 2.0}
	if !reflect.DeepEqual(x.in.State.Variables, want) {
		t.Errorf("variables = %v\nwant %v: the local took attempt, the instance outcome, the output lastAttempt", x.in.State.Variables, want)
	}
	if tok := x.token("After"); tok.Vars != nil {
		t.Errorf("locals left the subprocess: %+v", tok)
	}
}

func TestLocalsFromAFailingInputMappingRaiseAnIncident(t *testing.T) {
	x := newInstance(t, parse(t, strings.Replace(localScope, "=order.id", "=order.id + 1", 1), msgDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"id": "o-1"}}})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Element != "Sub" || eff.Incidents[0].Code != fault.IncidentExpression || len(eff.Tasks) != 0 {
		t.Errorf("effects = %+v", eff)
	}
}

// escalations: a subprocess raises an escalation twice: a non-interrupting
// boundary catches the intermediate one, an escalation event subprocess
// inside a second subprocess catches the end one.
const escalations = `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" />
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />
  <bpmn:intermediateThrowEvent id="Warn"><bpmn:escalationEventDefinition escalationRef="EscLate" /></bpmn:intermediateThrowEvent>
  <bpmn:receiveTask id="Work" messageRef="M1" />
  <bpmn:sequenceFlow id="FS1" sourceRef="SS" targetRef="Warn" /><bpmn:sequenceFlow id="FS2" sourceRef="Warn" targetRef="Work" />
</bpmn:subProcess>
<bpmn:boundaryEvent id="Noted" cancelActivity="false" attachedToRef="Sub"><bpmn:escalationEventDefinition escalationRef="EscLate" /></bpmn:boundaryEvent>
<bpmn:receiveTask id="Manager" messageRef="M2" />
<bpmn:subProcess id="Sub2"><bpmn:startEvent id="SS2" />
  <bpmn:endEvent id="GiveUp"><bpmn:escalationEventDefinition escalationRef="EscStop" /></bpmn:endEvent>
  <bpmn:sequenceFlow id="FT1" sourceRef="SS2" targetRef="GiveUp" />
  <bpmn:subProcess id="OnStop" triggeredByEvent="true"><bpmn:startEvent id="StopStart"><bpmn:escalationEventDefinition /></bpmn:startEvent>
    <bpmn:receiveTask id="Cleanup" messageRef="M3" /><bpmn:sequenceFlow id="FO" sourceRef="StopStart" targetRef="Cleanup" /></bpmn:subProcess>
</bpmn:subProcess>` +
	`<bpmn:sequenceFlow id="F0" sourceRef="S" targetRef="Fork" /><bpmn:sequenceFlow id="F1" sourceRef="Fork" targetRef="Sub" />
<bpmn:sequenceFlow id="F2" sourceRef="Fork" targetRef="Sub2" /><bpmn:sequenceFlow id="F3" sourceRef="Noted" targetRef="Manager" />`

const escalationDefs = msgDefs + `<bpmn:escalation id="EscLate" escalationCode="LATE" /><bpmn:escalation id="EscStop" escalationCode="STOP" />`

func TestEscalationsAreCaughtByBoundaryEventsAndEventSubprocesses(t *testing.T) {
	x := newInstance(t, parse(t, escalations, escalationDefs))
	x.step(Trigger{Kind: TriggerStart})
	got := x.at()
	want := []string{"Sub/scope", "Sub2/scope", "Work/message", "Manager/message", "OnStop/scope", "Cleanup/message"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tokens at %v\nwant %v: the boundary spawned Manager and the thrower went on; the interrupting event subprocess replaced Sub2's content", got, want)
	}
}

func TestUncaughtEscalationChangesNothing(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:intermediateThrowEvent id="Warn"><bpmn:escalationEventDefinition escalationRef="EscLate" /></bpmn:intermediateThrowEvent>`+
		receive("R", "M1")+flow("F1", "S", "Warn")+flow("F2", "Warn", "R"), escalationDefs)
	x := newInstance(t, def)
	x.step(Trigger{Kind: TriggerStart})
	if got := x.at(); !slices.Equal(got, []string{"R/message"}) {
		t.Errorf("tokens at %v", got)
	}
}
