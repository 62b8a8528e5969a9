package bpmn

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// compTask is service task id with a compensation boundary event leading
// to handler undo (a service task marked isForCompensation).
func compTask(id, undo string) string {
	return `<bpmn:serviceTask id="` + id + `"><bpmn:extensionElements><zeebe:taskDefinition type="do" /></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:boundaryEvent id="` + id + `_Comp" attachedToRef="` + id + `"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent>
<bpmn:serviceTask id="` + undo + `" isForCompensation="true"><bpmn:extensionElements><zeebe:taskDefinition type="undo" /></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:association id="` + id + `_Assoc" associationDirection="One" sourceRef="` + id + `_Comp" targetRef="` + undo + `" />`
}

func TestParseCompensation(t *testing.T) {
	p := parseBody(t, `<bpmn:startEvent id="S" />`+compTask("A", "UndoA")+`
		<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />`+compTask("B", "UndoB")+`
			<bpmn:intermediateThrowEvent id="Inner"><bpmn:compensateEventDefinition activityRef="B" /></bpmn:intermediateThrowEvent>
		</bpmn:subProcess>
		<bpmn:intermediateThrowEvent id="All"><bpmn:compensateEventDefinition waitForCompletion="true" /></bpmn:intermediateThrowEvent>
		<bpmn:endEvent id="End"><bpmn:compensateEventDefinition activityRef="Sub" /></bpmn:endEvent>`, "")
	a, b := p.Element("A"), p.Element("B")
	if a.CompensationHandler() != p.Element("UndoA") || !p.Element("UndoA").ForCompensation || b.CompensationHandler() != p.Element("UndoB") {
		t.Errorf("handlers: %+v %+v", a.CompensationHandler(), b.CompensationHandler())
	}
	if c := p.Element("A_Comp"); c.Kind != KindBoundary || c.Interrupting || c.Armable() || c.Handler != p.Element("UndoA") {
		t.Errorf("boundary = %+v", c)
	}
	if e := p.Element("All"); e.Kind != KindThrow || e.Compensation == nil || e.Compensation.Activity != nil {
		t.Errorf("throw = %+v", e)
	}
	if e := p.Element("Inner"); e.Compensation.Activity != b {
		t.Errorf("inner throw compensates %+v", e.Compensation.Activity)
	}
	if e := p.Element("End"); e.Kind != KindEnd || e.Compensation.Activity != p.Element("Sub") {
		t.Errorf("end = %+v", e)
	}
	if p.Element("Sub").CompensationHandler() != nil {
		t.Error("Sub has no handler")
	}
}

// TestParseRefusesCompensationAsZeebeDoes checks every rule Zeebe's
// validators apply to compensation, with their messages.
func TestParseRefusesCompensationAsZeebeDoes(t *testing.T) {
	task := `<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="do" /></bpmn:extensionElements></bpmn:serviceTask>`
	undo := `<bpmn:serviceTask id="U" isForCompensation="true"><bpmn:extensionElements><zeebe:taskDefinition type="undo" /></bpmn:extensionElements></bpmn:serviceTask>`
	boundary := `<bpmn:boundaryEvent id="C" attachedToRef="T"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent>`
	assoc := `<bpmn:association id="A1" sourceRef="C" targetRef="U" />`
	tests := []struct{ name, body, want string }{
		{"boundary without an association", task + undo + boundary,
			`compensation boundary event "C": compensation boundary events must have a compensation association and no outgoing sequence flows`},
		{"boundary with an outgoing flow", task + undo + boundary + assoc + `<bpmn:endEvent id="E" />` + `<bpmn:sequenceFlow id="F" sourceRef="C" targetRef="E" />`,
			`compensation boundary events must have a compensation association and no outgoing sequence flows`},
		{"association to an ordinary activity", task + boundary + `<bpmn:task id="U" />` + assoc,
			`is associated with "U", which is not a compensation handler`},
		{"handler with an incoming flow", task + undo + boundary + assoc + `<bpmn:sequenceFlow id="F" sourceRef="S" targetRef="U" />`,
			`compensation handler "U": a compensation handler should have no incoming sequence flows`},
		{"handler with an outgoing flow", task + undo + boundary + assoc + `<bpmn:endEvent id="E" /><bpmn:sequenceFlow id="F" sourceRef="U" targetRef="E" />`,
			`compensation handler "U": a compensation handler should have no outgoing sequence flows`},
		{"handler with a boundary event", task + undo + boundary + assoc + `<bpmn:boundaryEvent id="B2" attachedToRef="U"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1M</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>`,
			`compensation handler "U": a compensation handler should have no boundary events`},
		{"an event marked as handler", `<bpmn:intermediateThrowEvent id="X" isForCompensation="true" />`,
			`intermediateThrowEvent "X" is marked isForCompensation`},
		{"throw that does not wait", `<bpmn:intermediateThrowEvent id="X"><bpmn:compensateEventDefinition waitForCompletion="false" /></bpmn:intermediateThrowEvent>`,
			`compensation event "X": its waitForCompletion attribute must be true or not present`},
		{"end that does not wait", `<bpmn:endEvent id="X"><bpmn:compensateEventDefinition waitForCompletion="false" /></bpmn:endEvent>`,
			`its waitForCompletion attribute must be true or not present`},
		{"activityRef to nothing", `<bpmn:endEvent id="X"><bpmn:compensateEventDefinition activityRef="Nope" /></bpmn:endEvent>`,
			`compensation event "X": the referenced compensation activity "Nope" doesn't exist`},
		{"activityRef to an activity without handler", task + `<bpmn:endEvent id="X"><bpmn:compensateEventDefinition activityRef="T" /></bpmn:endEvent>`,
			`the referenced compensation activity "T" must have either a compensation boundary event or be a subprocess`},
		{"activityRef to another scope", task + undo + boundary + assoc + `<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" /><bpmn:endEvent id="X"><bpmn:compensateEventDefinition activityRef="T" /></bpmn:endEvent></bpmn:subProcess>`,
			`the referenced compensation activity "T" must be in the same scope as the compensation throw event`},
		{"two compensation boundaries", task + undo + boundary + assoc + `<bpmn:boundaryEvent id="C2" attachedToRef="T"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent><bpmn:association id="A2" sourceRef="C2" targetRef="U" />`,
			`activity "T" has two compensation boundary events`},
		{"handler in another scope", task + boundary + `<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />` + undo + `</bpmn:subProcess>` + assoc,
			`compensation handler "U" is not in the scope of its activity "T"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" />`+tt.body, "")))
			if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %s containing %q", err, fault.BPMNInvalid, tt.want)
			}
		})
	}
	// An activityRef from inside an event subprocess may name an activity
	// of the event subprocess's own scope, as in Zeebe.
	parseBody(t, `<bpmn:startEvent id="S" />`+task+undo+boundary+assoc+`<bpmn:subProcess id="ESP" triggeredByEvent="true">
		<bpmn:startEvent id="ES"><bpmn:errorEventDefinition /></bpmn:startEvent>
		<bpmn:endEvent id="X"><bpmn:compensateEventDefinition activityRef="T" /></bpmn:endEvent></bpmn:subProcess>`, "")
}
