package bpmn

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// doc wraps process content and root-level definitions in a Camunda Modeler
// style document.
func doc(process, defs string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
  xmlns:zeebe="http://camunda.org/schema/zeebe/1.0"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  id="Definitions_1" targetNamespace="http://bpmn.io/schema/bpmn">
  <bpmn:process id="p" name="P" isExecutable="true">` + process + `</bpmn:process>` + defs + `
</bpmn:definitions>`
}

const msgDefs = `
  <bpmn:message id="M1" name="m1"><bpmn:extensionElements><zeebe:subscription correlationKey="=key" /></bpmn:extensionElements></bpmn:message>
  <bpmn:message id="M2" name="m2" />
  <bpmn:message id="MX" name="=dynamic" />
  <bpmn:error id="E1" name="Boom" errorCode="BOOM" />
  <bpmn:error id="EX" errorCode="=code" />`

func mustParse(t *testing.T, src string) *Process {
	t.Helper()
	p, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestParseOrderExampleAsCamundaModelerSavesIt(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "examples", "order.bpmn"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if p.Key() != "order" || p.ID != "order" || p.Name != "Order" {
		t.Errorf("key %q id %q name %q", p.Key(), p.ID, p.Name)
	}
	if p.Start == nil || p.Start.ID != "StartEvent_1" || p.Start.Kind != KindStart {
		t.Fatalf("start = %+v", p.Start)
	}
	catch := p.Element("Event_PaymentReceived")
	if catch.Kind != KindMessageCatch || catch.Message.Name != "payment-received" || catch.Message.CorrelationKey == nil {
		t.Errorf("catch = %+v", catch)
	}
	recv := p.Element("Activity_AwaitShipment")
	if recv.Kind != KindMessageCatch || recv.Message.Name != "order-shipped" || recv.Type != "receiveTask" {
		t.Errorf("receive task = %+v", recv)
	}
	if got := p.Start.Outgoing[0].Target; got != catch {
		t.Errorf("start leads to %v", got.ID)
	}
	if got := p.MessageNames(); !slices.Equal(got, []string{"order-shipped", "payment-received"}) {
		t.Errorf("MessageNames = %v", got)
	}
	if n := len(p.Elements()); n != 4 {
		t.Errorf("%d elements, want 4", n)
	}
}

func TestParseRefusesUnsupportedElementsNamingIDAndType(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"converging inclusive gateway", `<bpmn:task id="A" /><bpmn:task id="B" /><bpmn:inclusiveGateway id="G_1" />` +
			`<bpmn:sequenceFlow id="FA" sourceRef="A" targetRef="G_1" /><bpmn:sequenceFlow id="FB" sourceRef="B" targetRef="G_1" />`,
			`"G_1" (inclusiveGateway): a converging (joining) inclusive gateway`},
		{"complex gateway", `<bpmn:complexGateway id="C_1" />`, `"C_1" (complexGateway)`},
		{"transaction", `<bpmn:transaction id="T_1" />`, `"T_1" (transaction)`},
		{"compensation event subprocess", `<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" /><bpmn:subProcess id="ESP" triggeredByEvent="true">` +
			`<bpmn:startEvent id="CS_1"><bpmn:compensateEventDefinition /></bpmn:startEvent></bpmn:subProcess></bpmn:subProcess>`,
			`"CS_1" (startEvent): a compensation start event`},
		{"timer cycle on catch event", `<bpmn:intermediateCatchEvent id="E_2"><bpmn:timerEventDefinition><bpmn:timeCycle>R3/PT1M</bpmn:timeCycle></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>`,
			`"E_2" (intermediateCatchEvent): a timeCycle`},
		{"compensation catch", `<bpmn:intermediateCatchEvent id="T_4"><bpmn:compensateEventDefinition /></bpmn:intermediateCatchEvent>`,
			`"T_4" (intermediateCatchEvent): compensateEventDefinition`},
		{"conditional catch", `<bpmn:intermediateCatchEvent id="E_4"><bpmn:conditionalEventDefinition /></bpmn:intermediateCatchEvent>`,
			`"E_4" (intermediateCatchEvent): conditionalEventDefinition`},
		{"decision id expression", `<bpmn:businessRuleTask id="B_1"><bpmn:extensionElements><zeebe:calledDecision decisionId="=d" resultVariable="r" /></bpmn:extensionElements></bpmn:businessRuleTask>`,
			`"B_1" (businessRuleTask): a decisionId that is an expression`},
		{"sequential ad-hoc subprocess", `<bpmn:adHocSubProcess id="A_1" ordering="Sequential"><bpmn:task id="T_1" /></bpmn:adHocSubProcess>`,
			`"A_1" (adHocSubProcess): ordering="Sequential"`},
		{"multi-instance ad-hoc subprocess", `<bpmn:adHocSubProcess id="A_2"><bpmn:task id="T_2" /><bpmn:multiInstanceLoopCharacteristics /></bpmn:adHocSubProcess>`,
			`"A_2" (adHocSubProcess): a multi-instance ad-hoc subprocess`},
		{"loop marker", `<bpmn:serviceTask id="Task_3"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements><bpmn:standardLoopCharacteristics /></bpmn:serviceTask>`,
			`"Task_3" (serviceTask): a loop marker`},
		{"loop cardinality", `<bpmn:serviceTask id="Task_4"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements><bpmn:multiInstanceLoopCharacteristics><bpmn:loopCardinality>3</bpmn:loopCardinality></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>`,
			`"Task_4" (serviceTask): a multi-instance loopCardinality`},
		{"multi-instance event", `<bpmn:intermediateCatchEvent id="E_5"><bpmn:messageEventDefinition messageRef="M1" /><bpmn:multiInstanceLoopCharacteristics /></bpmn:intermediateCatchEvent>`,
			`"E_5" (intermediateCatchEvent): multiInstanceLoopCharacteristics`},
		{"input mapping on a start event", `<bpmn:startEvent id="S_5"><bpmn:extensionElements><zeebe:ioMapping><zeebe:input source="=a" target="b" /></zeebe:ioMapping></bpmn:extensionElements><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent>`,
			`"S_5" (startEvent): input mappings`},
		{"an extension on a receive task", `<bpmn:receiveTask id="R_2" messageRef="M1"><bpmn:extensionElements><zeebe:linkedResources /></bpmn:extensionElements></bpmn:receiveTask>`,
			`"R_2" (receiveTask): extension zeebe:linkedResources`},
		{"error code expression on a catch event", `<bpmn:receiveTask id="R" messageRef="M1" /><bpmn:boundaryEvent id="B_9" attachedToRef="R"><bpmn:errorEventDefinition errorRef="EX" /></bpmn:boundaryEvent>`,
			`element "B_9" catches error "EX", whose errorCode is an expression ("=code"): a catch event's code must be static, as in Zeebe`},
		{"condition on a flow out of a task", `<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements></bpmn:serviceTask><bpmn:endEvent id="E" />
			<bpmn:sequenceFlow id="F9" sourceRef="T" targetRef="E"><bpmn:conditionExpression>=x</bpmn:conditionExpression></bpmn:sequenceFlow>`,
			`"F9" (sequenceFlow): a condition`},
		{"message start named by an expression", `<bpmn:startEvent id="S_6"><bpmn:messageEventDefinition messageRef="MX" /></bpmn:startEvent>`,
			`"S_6" (startEvent): a message name expression that reads variables, now() or uuid() on a message start event of the process`},
		{"cycle on an interrupting boundary", `<bpmn:receiveTask id="R" messageRef="M1" /><bpmn:boundaryEvent id="B" attachedToRef="R"><bpmn:timerEventDefinition><bpmn:timeCycle>R2/PT1M</bpmn:timeCycle></bpmn:timerEventDefinition></bpmn:boundaryEvent>`,
			`"B" (boundaryEvent): a timeCycle on an interrupting boundary event`},
		{"task definition on a receive task", `<bpmn:receiveTask id="R" messageRef="M1"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements></bpmn:receiveTask>`,
			`"R" (receiveTask): extension zeebe:taskDefinition`},
		{"boundary on a catch event", `<bpmn:intermediateCatchEvent id="C"><bpmn:messageEventDefinition messageRef="M1" /></bpmn:intermediateCatchEvent>
			<bpmn:boundaryEvent id="B" attachedToRef="C"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:boundaryEvent>`,
			`"B" (boundaryEvent): attaching to intermediateCatchEvent "C"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `<bpmn:startEvent id="Start" />` + tt.body
			_, err := Parse(strings.NewReader(doc(body, msgDefs)))
			if !fault.HasCode(err, fault.BPMNUnsupported) {
				t.Fatalf("err = %v, want %s", err, fault.BPMNUnsupported)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to name %s", err, tt.want)
			}
		})
	}
}

func TestParseRefusesInvalidFiles(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"not XML", "hello", "reading BPMN XML"},
		{"truncated", doc(`<bpmn:startEvent id="S">`, ""), "reading BPMN XML"},
		{"not BPMN", `<foo/>`, "want BPMN 2.0"},
		{"no executable process", strings.Replace(doc(`<bpmn:startEvent id="S" />`, ""), `isExecutable="true"`, `isExecutable="false"`, 1),
			"no executable process"},
		{"two executable processes", doc(`<bpmn:startEvent id="S" />`, `<bpmn:process id="q" isExecutable="true"><bpmn:startEvent id="S2" /></bpmn:process>`),
			`2 executable processes ("p", "q")`},
		{"no start event", doc(`<bpmn:endEvent id="End" />`, ""), "no none start event"},
		{"two none start events", doc(`<bpmn:startEvent id="S1" /><bpmn:startEvent id="S2" />`, ""), `two none start events ("S1", "S2")`},
		{"duplicate id", doc(`<bpmn:startEvent id="S" /><bpmn:endEvent id="S" />`, ""), `id "S" is used twice`},
		{"dangling flow", doc(`<bpmn:startEvent id="S" /><bpmn:sequenceFlow id="F" sourceRef="S" targetRef="nowhere" />`, ""), `"nowhere"`},
		{"undefined message", doc(`<bpmn:startEvent id="S" /><bpmn:receiveTask id="R" messageRef="M9" />`, ""), `message "M9"`},
		{"message without name", doc(`<bpmn:startEvent id="S" /><bpmn:receiveTask id="R" messageRef="M" />`, `<bpmn:message id="M" />`), `message "M" has no name`},
		{"receive task without message", doc(`<bpmn:startEvent id="S" /><bpmn:receiveTask id="R" />`, ""), `"R" has no messageRef`},
		{"service task without task definition", doc(`<bpmn:startEvent id="S" /><bpmn:serviceTask id="T" />`, ""), "no zeebe:taskDefinition"},
		{"bad duration", doc(`<bpmn:startEvent id="S" /><bpmn:intermediateCatchEvent id="E"><bpmn:timerEventDefinition><bpmn:timeDuration>15 minutes</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>`, ""),
			`timer "E"`},
		{"flow into start", doc(`<bpmn:startEvent id="S" /><bpmn:endEvent id="End" /><bpmn:sequenceFlow id="F" sourceRef="End" targetRef="S" />`, ""), `leaves endEvent "End"`},
		{"unconditioned flow out of a splitting exclusive gateway", doc(`<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" /><bpmn:endEvent id="A" /><bpmn:endEvent id="B" />
			<bpmn:sequenceFlow id="F1" sourceRef="G" targetRef="A" /><bpmn:sequenceFlow id="F2" sourceRef="G" targetRef="B" />`, ""), `"F1" out of exclusive gateway "G" has no condition`},
		{"default flow of another element", doc(`<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" default="F1" /><bpmn:endEvent id="A" />
			<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="A" />`, ""), `default flow "F1"`},
		{"error end without code", doc(`<bpmn:startEvent id="S" /><bpmn:endEvent id="End"><bpmn:errorEventDefinition errorRef="E" /></bpmn:endEvent>`, `<bpmn:error id="E" />`), "no errorCode"},
		{"boundary on nothing", doc(`<bpmn:startEvent id="S" /><bpmn:boundaryEvent id="B" attachedToRef="X"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1M</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>`, ""),
			`attached to "X"`},
		{"event gateway to a task", doc(`<bpmn:startEvent id="S" /><bpmn:eventBasedGateway id="G" /><bpmn:receiveTask id="R" messageRef="M1" /><bpmn:intermediateCatchEvent id="C"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:intermediateCatchEvent>
			<bpmn:sequenceFlow id="F1" sourceRef="G" targetRef="R" /><bpmn:sequenceFlow id="F2" sourceRef="G" targetRef="C" />`, msgDefs), `leads to receiveTask "R"`},
		{"event gateway waiting twice for one message", doc(`<bpmn:startEvent id="S" /><bpmn:eventBasedGateway id="G" /><bpmn:intermediateCatchEvent id="C1"><bpmn:messageEventDefinition messageRef="M1" /></bpmn:intermediateCatchEvent><bpmn:intermediateCatchEvent id="C2"><bpmn:messageEventDefinition messageRef="M1" /></bpmn:intermediateCatchEvent>
			<bpmn:sequenceFlow id="F1" sourceRef="G" targetRef="C1" /><bpmn:sequenceFlow id="F2" sourceRef="G" targetRef="C2" />`, msgDefs), `waits for message "m1" twice`},
		{"non-interrupting error boundary", doc(`<bpmn:startEvent id="S" /><bpmn:receiveTask id="R" messageRef="M1" /><bpmn:boundaryEvent id="B" cancelActivity="false" attachedToRef="R"><bpmn:errorEventDefinition /></bpmn:boundaryEvent>`, msgDefs),
			`error boundary event "B" must interrupt`},
		{"retries not a number", doc(`<bpmn:startEvent id="S" /><bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="a" retries="many" /></bpmn:extensionElements></bpmn:serviceTask>`, ""),
			`retries "many"`},
		{"flow across a subprocess border", doc(`<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" /></bpmn:subProcess><bpmn:sequenceFlow id="F" sourceRef="S" targetRef="SS" />`, ""),
			"crosses a subprocess boundary"},
		{"subprocess without start", doc(`<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:endEvent id="SE" /></bpmn:subProcess>`, ""), `subprocess "Sub" has no none start event`},
		// Zeebe takes only expressions here: a value without "=" is refused
		// (a Zeebe 0.x file's JSONPath condition, a forgotten "=").
		{"static condition", doc(`<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" default="F2" /><bpmn:endEvent id="A" /><bpmn:endEvent id="B" />
			<bpmn:sequenceFlow id="F1" sourceRef="G" targetRef="A"><bpmn:conditionExpression>$.approved == true</bpmn:conditionExpression></bpmn:sequenceFlow><bpmn:sequenceFlow id="F2" sourceRef="G" targetRef="B" />`, ""),
			`condition of "F1" is the static value "$.approved == true": it must be an expression`},
		{"static script", doc(`<bpmn:startEvent id="S" /><bpmn:scriptTask id="T"><bpmn:extensionElements><zeebe:script expression="a + 1" resultVariable="b" /></bpmn:extensionElements></bpmn:scriptTask>`, ""),
			`script of "T" is the static value "a + 1"`},
		{"static output mapping", doc(`<bpmn:startEvent id="S" /><bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="a" /><zeebe:ioMapping><zeebe:output source="result" target="r" /></zeebe:ioMapping></bpmn:extensionElements></bpmn:serviceTask>`, ""),
			`mapping to r of "T" is the static value "result"`},
		{"static correlation key", doc(`<bpmn:startEvent id="S" /><bpmn:receiveTask id="R" messageRef="M" />`, `<bpmn:message id="M" name="m"><bpmn:extensionElements><zeebe:subscription correlationKey="order-1" /></bpmn:extensionElements></bpmn:message>`),
			`correlation key of "M" is the static value "order-1"`},
		{"static input collection", doc(`<bpmn:startEvent id="S" /><bpmn:task id="T"><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="items" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:task>`, ""),
			`input collection of "T" is the static value "items"`},
		{"static output element", doc(`<bpmn:startEvent id="S" /><bpmn:task id="T"><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=items" outputCollection="out" outputElement="result" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:task>`, ""),
			`output element of "T" is the static value "result"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.src))
			if !fault.HasCode(err, fault.BPMNInvalid) {
				t.Fatalf("err = %v, want %s", err, fault.BPMNInvalid)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %s", err, tt.want)
			}
		})
	}
}

func TestParseRefusesExpressionsThatDoNotCompile(t *testing.T) {
	bad := []struct{ name, body, defs string }{
		{"condition", `<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" /><bpmn:endEvent id="A" />
			<bpmn:sequenceFlow id="F" sourceRef="G" targetRef="A"><bpmn:conditionExpression xsi:type="bpmn:tFormalExpression">=a &gt;&gt; 1</bpmn:conditionExpression></bpmn:sequenceFlow>`, ""},
		{"correlation key", `<bpmn:startEvent id="S" /><bpmn:receiveTask id="R" messageRef="M" />`,
			`<bpmn:message id="M" name="m"><bpmn:extensionElements><zeebe:subscription correlationKey="=(" /></bpmn:extensionElements></bpmn:message>`},
		{"output mapping", `<bpmn:startEvent id="S"><bpmn:extensionElements><zeebe:ioMapping><zeebe:output source="=a +" target="b" /></zeebe:ioMapping></bpmn:extensionElements></bpmn:startEvent>`, ""},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(doc(tt.body, tt.defs)))
			if !fault.HasCode(err, fault.BPMNExpression) {
				t.Fatalf("err = %v, want %s", err, fault.BPMNExpression)
			}
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Err == nil {
				t.Errorf("err = %v, want the compiler's error wrapped", err)
			}
		})
	}
}

func TestParseIgnoresDiagramsAnnotationsAndForeignExtensions(t *testing.T) {
	src := doc(`
    <bpmn:documentation>Order handling</bpmn:documentation>
    <bpmn:extensionElements><zeebe:versionTag value="1.0" /><zeebe:properties><zeebe:property name="a" value="b" /></zeebe:properties></bpmn:extensionElements>
    <bpmn:laneSet id="LaneSet_1"><bpmn:lane id="Lane_1"><bpmn:flowNodeRef>S</bpmn:flowNodeRef></bpmn:lane></bpmn:laneSet>
    <bpmn:startEvent id="S"><bpmn:extensionElements><other:thing xmlns:other="urn:other" /></bpmn:extensionElements></bpmn:startEvent>
    <bpmn:textAnnotation id="A"><bpmn:text>note</bpmn:text></bpmn:textAnnotation>
    <bpmn:association id="As" sourceRef="S" targetRef="A" />
    <bpmn:dataObjectReference id="D" dataObjectRef="DO" /><bpmn:dataObject id="DO" />`,
		`<bpmn:collaboration id="C"><bpmn:participant id="P1" processRef="p" /></bpmn:collaboration>
  <bpmn:process id="other" isExecutable="false"><bpmn:userTask id="U" /></bpmn:process>
  <bpmndi:BPMNDiagram id="D1" xmlns:bpmndi="http://www.omg.org/spec/BPMN/20100524/DI"><bpmndi:BPMNPlane id="Pl" bpmnElement="C" /></bpmndi:BPMNDiagram>`)
	p := mustParse(t, src)
	if len(p.Elements()) != 1 || p.Start.ID != "S" {
		t.Errorf("elements = %v", p.Elements())
	}
}

func TestParseAcceptsEveryExample(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.bpmn"))
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p := mustParse(t, string(b))
		if want := strings.TrimSuffix(filepath.Base(name), ".bpmn"); p.Key() != want {
			t.Errorf("%s: key %q, want the file's name", name, p.Key())
		}
	}
}
