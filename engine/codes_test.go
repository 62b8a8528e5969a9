package engine

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// thrownCodes throws, inside subprocess Sub, an escalation and then an error
// whose codes are expressions over the variables; Sub's boundary events
// catch each code by its evaluated value.
var thrownCodes = `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />
  <bpmn:intermediateThrowEvent id="Warn"><bpmn:escalationEventDefinition escalationRef="EscDyn" /></bpmn:intermediateThrowEvent>
  <bpmn:endEvent id="Fail"><bpmn:errorEventDefinition errorRef="ErrDyn" /></bpmn:endEvent>
  <bpmn:sequenceFlow id="FS1" sourceRef="SS" targetRef="Warn" /><bpmn:sequenceFlow id="FS2" sourceRef="Warn" targetRef="Fail" />
</bpmn:subProcess>
<bpmn:boundaryEvent id="Noted" cancelActivity="false" attachedToRef="Sub"><bpmn:escalationEventDefinition escalationRef="EscLate" /></bpmn:boundaryEvent>
<bpmn:boundaryEvent id="Declined" attachedToRef="Sub"><bpmn:errorEventDefinition errorRef="ErrDeclined" /></bpmn:boundaryEvent>
<bpmn:boundaryEvent id="Other" attachedToRef="Sub"><bpmn:errorEventDefinition /></bpmn:boundaryEvent>` +
	receive("Manager", "M1") + receive("Handle", "M2") + receive("Else", "M3") +
	`<bpmn:sequenceFlow id="F0" sourceRef="S" targetRef="Sub" /><bpmn:sequenceFlow id="F1" sourceRef="Noted" targetRef="Manager" />
<bpmn:sequenceFlow id="F2" sourceRef="Declined" targetRef="Handle" /><bpmn:sequenceFlow id="F3" sourceRef="Other" targetRef="Else" />`

const thrownCodeDefs = msgDefs + `<bpmn:escalation id="EscDyn" escalationCode="=level" /><bpmn:escalation id="EscLate" escalationCode="LATE" />
<bpmn:error id="ErrDyn" errorCode="=&quot;DECLINED_&quot; + reason" /><bpmn:error id="ErrDeclined" errorCode="DECLINED_LIMIT" />`

func TestThrownCodesAreEvaluatedWhenTheEventIsReached(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]any
		at   []string
	}{
		{"caught by the codes they evaluate to", map[string]any{"level": "LATE", "reason": "LIMIT"}, []string{"Handle/message", "Manager/message"}},
		{"another error code is caught by the catch-all", map[string]any{"level": "LATE", "reason": "FRAUD"}, []string{"Else/message", "Manager/message"}},
		{"an escalation nobody catches changes nothing", map[string]any{"level": "MINOR", "reason": "LIMIT"}, []string{"Handle/message"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, thrownCodes, thrownCodeDefs))
			x.step(Trigger{Kind: TriggerStart, Variables: tt.vars})
			if got := strings.Join(x.at(), " "); got != strings.Join(tt.at, " ") {
				t.Errorf("tokens at %s, want %s", got, strings.Join(tt.at, " "))
			}
		})
	}
}

func TestThrownCodeThatFailsIsAnIncident(t *testing.T) {
	tests := []struct {
		name    string
		vars    map[string]any
		element string
		msg     string
	}{
		{"escalation code missing", map[string]any{"reason": "LIMIT"}, "Warn", `escalation code of Warn: "=level" evaluated to null, not a non-empty string`},
		{"escalation code not a string", map[string]any{"level": 3.0}, "Warn", `escalation code of Warn: "=level" evaluated to a number`},
		{"error code failing", map[string]any{"level": "LATE", "reason": 1.0}, "Fail", `error code of Fail: feel: evaluating "=\"DECLINED_\" + reason"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, thrownCodes, thrownCodeDefs))
			eff := x.step(Trigger{Kind: TriggerStart, Variables: tt.vars})
			if len(eff.Incidents) != 1 || eff.Incidents[0].Element != tt.element || eff.Incidents[0].Code != fault.IncidentExpression ||
				!strings.Contains(eff.Incidents[0].Message, tt.msg) {
				t.Fatalf("incidents = %+v, want one at %s containing %q", eff.Incidents, tt.element, tt.msg)
			}
		})
	}
}
