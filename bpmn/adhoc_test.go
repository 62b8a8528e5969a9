package bpmn

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// adHocDoc is a process running an ad-hoc subprocess with content inside.
func adHocDoc(attrs, ext, content string) string {
	return doc(`<bpmn:startEvent id="S"><bpmn:outgoing>F1</bpmn:outgoing></bpmn:startEvent>
	<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="AH" />
	<bpmn:adHocSubProcess id="AH" `+attrs+`><bpmn:extensionElements>`+ext+`</bpmn:extensionElements>`+content+`</bpmn:adHocSubProcess>
	<bpmn:boundaryEvent id="B" attachedToRef="AH"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>`, msgDefs)
}

func TestParseAdHocSubProcessAsZeebeRunsIt(t *testing.T) {
	p := mustParse(t, adHocDoc(`cancelRemainingInstances="false"`,
		`<zeebe:adHoc activeElementsCollection="=tools" outputCollection="results" outputElement="=result" />`,
		`<bpmn:serviceTask id="A" name="Look up"><bpmn:documentation>Finds the order.</bpmn:documentation>
			<bpmn:extensionElements><zeebe:taskDefinition type="lookup" /><zeebe:properties><zeebe:property name="kind" value="tool" /></zeebe:properties>
			<zeebe:ioMapping><zeebe:input source="=fromAi(toolCall.orderId, &quot;the order&quot;)" target="orderId" /></zeebe:ioMapping></bpmn:extensionElements></bpmn:serviceTask>
		<bpmn:task id="T" /><bpmn:sequenceFlow id="F2" sourceRef="T" targetRef="After" /><bpmn:manualTask id="After" />
		<bpmn:boundaryEvent id="BA" attachedToRef="A"><bpmn:errorEventDefinition /></bpmn:boundaryEvent>
		<bpmn:completionCondition xsi:type="bpmn:tFormalExpression">=done</bpmn:completionCondition>`))
	ah := p.Element("AH")
	if ah.Kind != KindAdHoc || ah.AdHoc == nil || ah.Task != nil {
		t.Fatalf("AH = kind %v, adHoc %v, task %v; want a BPMN-implemented ad-hoc subprocess", ah.Kind, ah.AdHoc, ah.Task)
	}
	a := ah.AdHoc
	if a.CancelRemaining || a.ActiveElements.Source() != "=tools" || a.CompletionCondition.Source() != "=done" ||
		a.OutputCollection != "results" || a.OutputElement.Source() != "=result" {
		t.Errorf("AdHoc = %+v", a)
	}
	var ids []string
	for _, x := range a.Activities {
		ids = append(ids, x.Element.ID)
	}
	// After is entered by a flow, BA is attached: neither is activated alone.
	if strings.Join(ids, ",") != "A,T" {
		t.Fatalf("activities = %v, want A,T", ids)
	}
	if got := a.Activities[0]; got.Documentation != "Finds the order." || got.Properties["kind"] != "tool" ||
		len(got.Parameters) != 1 || got.Parameters[0].Name != "toolCall.orderId" || got.Parameters[0].Description != "the order" {
		t.Errorf("activity A = %+v", got)
	}
	if a.Activity("After") != nil || a.Activity("T") != p.Element("T") {
		t.Error("Activity looks up only the activatable elements")
	}
	if p.Element("A").Parent != ah || len(ah.Boundaries) != 1 {
		t.Error("the content's parent is the ad-hoc subprocess, which holds its timer boundary event")
	}
}

func TestParseAdHocSubProcessWithAJobWorker(t *testing.T) {
	p := mustParse(t, adHocDoc(``,
		`<zeebe:taskDefinition type="agent" retries="2" /><zeebe:taskHeaders><zeebe:header key="k" value="v" /></zeebe:taskHeaders>
		 <zeebe:ioMapping><zeebe:input target="agentContext" /><zeebe:output source="=agent" target="agent" /></zeebe:ioMapping>
		 <zeebe:adHoc outputCollection="toolCallResults" outputElement="={id: toolCall.id, content: toolCallResult}" />`,
		`<bpmn:task id="T" />`))
	ah := p.Element("AH")
	if ah.Task == nil || ah.Task.Type.Source() != "agent" || ah.Task.Headers["k"] != "v" || !ah.AdHoc.CancelRemaining {
		t.Fatalf("AH task = %+v, adHoc %+v", ah.Task, ah.AdHoc)
	}
	if len(ah.Inputs) != 1 || len(ah.Outputs) != 1 {
		t.Errorf("mappings = %d in, %d out", len(ah.Inputs), len(ah.Outputs))
	}
}

func TestParseRefusesAdHocSubProcessesZeebeRefuses(t *testing.T) {
	tests := []struct {
		name, attrs, ext, content, code, want string
	}{
		{"start event inside", ``, ``, `<bpmn:startEvent id="S2" /><bpmn:task id="T" />`, fault.BPMNInvalid, `has start event "S2"`},
		{"end event inside", ``, ``, `<bpmn:task id="T" /><bpmn:endEvent id="E2" />`, fault.BPMNInvalid, `holds end event "E2"`},
		{"no activity", ``, ``, `<bpmn:intermediateThrowEvent id="X" />`, fault.BPMNInvalid, `holds no activity`},
		{"output collection alone", ``, `<zeebe:adHoc outputCollection="r" />`, `<bpmn:task id="T" />`, fault.BPMNInvalid, `both outputCollection and outputElement`},
		{"job worker and active elements", ``, `<zeebe:taskDefinition type="a" /><zeebe:adHoc activeElementsCollection="=[&quot;T&quot;]" />`, `<bpmn:task id="T" />`,
			fault.BPMNInvalid, `its job worker chooses`},
		{"job worker without type", ``, `<zeebe:taskDefinition />`, `<bpmn:task id="T" />`, fault.BPMNInvalid, `has no type`},
		{"event subprocess inside", ``, ``, `<bpmn:task id="T" /><bpmn:subProcess id="ES" triggeredByEvent="true"><bpmn:startEvent id="ES_S"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1M</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:startEvent></bpmn:subProcess>`,
			fault.BPMNUnsupported, `an event subprocess inside an ad-hoc subprocess`},
		{"active elements that do not compile", ``, `<zeebe:adHoc activeElementsCollection="=[" />`, `<bpmn:task id="T" />`, fault.BPMNExpression, `active elements collection of "AH"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(adHocDoc(tt.attrs, tt.ext, tt.content)))
			if !fault.HasCode(err, tt.code) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %s naming %s", err, tt.code, tt.want)
			}
		})
	}
}
