package bpmn

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// FuzzParse checks that no input makes ParseAll panic or fail without a
// code, and that whatever it accepts is internally consistent.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "*.bpmn"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(doc(`<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" /></bpmn:subProcess>`+
		`<bpmn:sequenceFlow id="F" sourceRef="S" targetRef="Sub" />`, msgDefs)))
	// Every element the parser reads, in one file each way it can be written.
	f.Add([]byte(doc(coverageSeed, msgDefs+`<bpmn:escalation id="Esc" escalationCode="LATE" />`)))
	f.Add([]byte(doc(espDoc, msgDefs)))
	f.Add([]byte(doc(`<bpmn:startEvent id="S" />`+compTask("A", "UndoA")+`<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />`+compTask("B", "UndoB")+
		`<bpmn:endEvent id="X"><bpmn:compensateEventDefinition activityRef="B" /></bpmn:endEvent></bpmn:subProcess>`+
		`<bpmn:intermediateThrowEvent id="T"><bpmn:compensateEventDefinition activityRef="Sub" /></bpmn:intermediateThrowEvent>`, "")))
	f.Add([]byte(doc(`<bpmn:startEvent id="S" />`, `<bpmn:process id="q" isExecutable="true"><bpmn:startEvent id="M"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent></bpmn:process>`+msgDefs)))
	f.Add([]byte(doc(`<bpmn:startEvent id="S" /><bpmn:inclusiveGateway id="G" default="FC" /><bpmn:task id="A" /><bpmn:task id="C" />`+
		`<bpmn:sequenceFlow id="F0" sourceRef="S" targetRef="G" /><bpmn:sequenceFlow id="FA" sourceRef="G" targetRef="A"><bpmn:conditionExpression>=a</bpmn:conditionExpression></bpmn:sequenceFlow>`+
		`<bpmn:sequenceFlow id="FC" sourceRef="G" targetRef="C" /><bpmn:sequenceFlow id="FJ" sourceRef="A" targetRef="C" />`, "")))
	f.Add([]byte(doc(`<bpmn:startEvent id="T1"><bpmn:timerEventDefinition><bpmn:timeCycle>R3/2030-01-01T00:00:00Z/P1D</bpmn:timeCycle></bpmn:timerEventDefinition></bpmn:startEvent>`+
		`<bpmn:startEvent id="T2"><bpmn:timerEventDefinition><bpmn:timeDate>=now() + duration("PT1M")</bpmn:timeDate></bpmn:timerEventDefinition></bpmn:startEvent>`+
		`<bpmn:startEvent id="T3"><bpmn:timerEventDefinition><bpmn:timeDuration>="PT" + "5M"</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:startEvent>`, "")))
	f.Add([]byte(`<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:camunda="http://camunda.org/schema/1.0/bpmn" id="D">` +
		`<bpmn:process id="p" isExecutable="true"><bpmn:startEvent id="S" camunda:asyncBefore="true" /></bpmn:process></bpmn:definitions>`))
	f.Add([]byte(`<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:camunda="http://camunda.org/schema/1.0/bpmn" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="D">` +
		`<bpmn:process id="p" isExecutable="true"><bpmn:startEvent id="S" /><bpmn:serviceTask id="T" camunda:asyncBefore="true"><bpmn:extensionElements>` +
		`<zeebe:taskDefinition type="a" /></bpmn:extensionElements></bpmn:serviceTask></bpmn:process></bpmn:definitions>`))
	f.Add([]byte(doc(`<bpmn:extensionElements><zeebe:executionListeners><zeebe:executionListener eventType="end" type="p" /></zeebe:executionListeners></bpmn:extensionElements>`+
		`<bpmn:startEvent id="S"><bpmn:extensionElements><zeebe:executionListeners><zeebe:executionListener eventType="end" type="s" retries="=r" /></zeebe:executionListeners></bpmn:extensionElements></bpmn:startEvent>`+
		`<bpmn:userTask id="U"><bpmn:extensionElements><zeebe:userTask /><zeebe:executionListeners><zeebe:executionListener type="=t" /></zeebe:executionListeners>`+
		`<zeebe:taskListeners><zeebe:taskListener eventType="complete" type="c" /><zeebe:taskListener eventType="creating" type="c" /></zeebe:taskListeners></bpmn:extensionElements></bpmn:userTask>`+
		`<bpmn:sequenceFlow id="F" sourceRef="S" targetRef="U" />`, "")))
	f.Fuzz(func(t *testing.T, src []byte) {
		ps, err := ParseAll(bytes.NewReader(src))
		if err != nil {
			if fault.Code(err) == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		for _, p := range ps {
			checkConsistent(t, p)
		}
	})
}

// checkConsistent checks the invariants the engine relies on.
func checkConsistent(t *testing.T, p *Process) {
	for _, el := range append(p.Elements(), p.Self()) {
		for _, l := range el.Listeners {
			if l.Type == nil || l.Retries == nil || len(el.ListenersOf(l.Event)) == 0 {
				t.Fatalf("listener of %s is inconsistent: %+v", el.ID, l)
			}
		}
	}
	if p.Start == nil && len(p.MessageStarts()) == 0 && len(p.TimerStarts()) == 0 {
		t.Fatalf("accepted process %s without a none, message or timer start event", p.ID)
	}
	for _, s := range p.TimerStarts() {
		if s.Kind != KindStart || s.Timer == nil || s.Message != nil || s.Parent != nil || p.Element(s.ID) != s {
			t.Fatalf("timer start %s is inconsistent", s.ID)
		}
	}
	if p.Start != nil && (p.Start.Kind != KindStart || p.Element(p.Start.ID) != p.Start || p.Start.Message != nil) {
		t.Fatalf("accepted a process with a bad none start event: %+v", p.Start)
	}
	for _, s := range p.MessageStarts() {
		if s.Kind != KindStart || s.Message == nil || s.Parent != nil {
			t.Fatalf("message start %s is inconsistent", s.ID)
		}
	}
	checkEventSubs(t, p.EventSubs, nil)
	for _, el := range p.Elements() {
		for _, fl := range el.Outgoing {
			if fl.Source != el || fl.Target == nil || fl.Target.Parent != el.Parent {
				t.Fatalf("flow %s is inconsistent", fl.ID)
			}
		}
		switch el.Kind {
		case KindSubProcess:
			if el.SubStart == nil || el.SubStart.Parent != el || el.SubStart.Message != nil || el.SubStart.Timer != nil {
				t.Fatalf("subprocess %s has no none start of its own", el.ID)
			}
			checkEventSubs(t, el.EventSubs, el)
		case KindEventSubProcess:
			if !el.SubStart.IsEventSubStart() || el.SubStart.Parent != el || len(el.Incoming)+len(el.Outgoing) > 0 {
				t.Fatalf("event subprocess %s is inconsistent", el.ID)
			}
			checkEventSubs(t, el.EventSubs, el)
		case KindLink:
			if el.LinkTarget == nil || el.LinkTarget.Parent != el.Parent || len(el.Outgoing) > 0 {
				t.Fatalf("link %s is inconsistent", el.ID)
			}
		case KindTask:
			if el.Task == nil {
				t.Fatalf("task %s has no definition", el.ID)
			}
		case KindCallActivity:
			if el.Call == nil {
				t.Fatalf("call activity %s has no called element", el.ID)
			}
		case KindScript:
			if el.Script == nil {
				t.Fatalf("script task %s has no script", el.ID)
			}
		case KindBoundary:
			if el.AttachedTo == nil || !slices.Contains(el.AttachedTo.Boundaries, el) {
				t.Fatalf("boundary %s is not attached", el.ID)
			}
		case KindErrorEnd:
			if el.Error == nil || (el.Error.Code == "") == (el.Error.Expression == nil) {
				t.Fatalf("error end %s throws no code, or two", el.ID)
			}
		}
		if h := el.Handler; h != nil && (el.Kind != KindBoundary || !h.ForCompensation || h.Parent != el.Parent ||
			len(h.Incoming)+len(h.Outgoing)+len(h.Boundaries)+len(el.Outgoing) > 0) {
			t.Fatalf("compensation boundary %s or its handler is inconsistent", el.ID)
		}
		if c := el.Compensation; c != nil && c.Activity != nil && c.Activity.Parent != el.Parent &&
			(el.Parent == nil || el.Parent.Kind != KindEventSubProcess || c.Activity.Parent != el.Parent.Parent) {
			t.Fatalf("compensation %s names activity %s outside its scope", el.ID, c.Activity.ID)
		}
		if m := el.Message; m != nil && (m.Name == "") == (m.NameExpression == nil) {
			t.Fatalf("message %s of %s has a name and a name expression, or neither", m.ID, el.ID)
		}
		if el.Loop != nil && (el.Loop.InputCollection == nil || (el.Loop.OutputCollection == "") != (el.Loop.OutputElement == nil)) {
			t.Fatalf("multi-instance %s is inconsistent", el.ID)
		}
	}
}

func checkEventSubs(t *testing.T, subs []*Element, parent *Element) {
	for _, esp := range subs {
		if esp.Kind != KindEventSubProcess || esp.Parent != parent || esp.SubStart == nil {
			t.Fatalf("event subprocess %s is misplaced", esp.ID)
		}
	}
}

// coverageSeed uses every element kind, extension and marker the parser accepts.
const coverageSeed = `<bpmn:extensionElements><zeebe:userTaskForm id="F1">{}</zeebe:userTaskForm></bpmn:extensionElements>
<bpmn:startEvent id="S"><bpmn:extensionElements><zeebe:formDefinition formKey="camunda-forms:bpmn:F1" /></bpmn:extensionElements></bpmn:startEvent>
<bpmn:startEvent id="MS"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent>
<bpmn:startEvent id="TS"><bpmn:timerEventDefinition><bpmn:timeCycle>R/PT1H</bpmn:timeCycle></bpmn:timerEventDefinition></bpmn:startEvent>
<bpmn:receiveTask id="RX" messageRef="MX" />
<bpmn:subProcess id="OnDyn" triggeredByEvent="true"><bpmn:startEvent id="ED" isInterrupting="false"><bpmn:messageEventDefinition messageRef="MX" /></bpmn:startEvent></bpmn:subProcess>
<bpmn:userTask id="U"><bpmn:extensionElements><zeebe:userTask /><zeebe:assignmentDefinition assignee="=a" candidateGroups="g1,g2" />
  <zeebe:taskSchedule dueDate="=d" /><zeebe:priorityDefinition priority="60" /><zeebe:formDefinition formId="f" /></bpmn:extensionElements>
  <bpmn:multiInstanceLoopCharacteristics isSequential="true"><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=items" inputElement="item" outputCollection="out" outputElement="=r" /></bpmn:extensionElements>
  <bpmn:completionCondition>=numberOfCompletedInstances &gt; 1</bpmn:completionCondition></bpmn:multiInstanceLoopCharacteristics></bpmn:userTask>
<bpmn:task id="T" /><bpmn:manualTask id="MT" />
<bpmn:scriptTask id="Sc"><bpmn:extensionElements><zeebe:script expression="=1 + 1" resultVariable="two" /></bpmn:extensionElements></bpmn:scriptTask>
<bpmn:callActivity id="C"><bpmn:extensionElements><zeebe:calledElement processId="child" propagateAllChildVariables="false" />
  <zeebe:ioMapping><zeebe:input source="=a" target="b" /><zeebe:output source="=c" target="d" /></zeebe:ioMapping></bpmn:extensionElements></bpmn:callActivity>
<bpmn:boundaryEvent id="CT" attachedToRef="C"><bpmn:timerEventDefinition><bpmn:timeDuration>PT30s</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
<bpmn:subProcess id="Sub"><bpmn:extensionElements><zeebe:ioMapping><zeebe:input target="local" /></zeebe:ioMapping></bpmn:extensionElements>
  <bpmn:startEvent id="SS" /><bpmn:intermediateThrowEvent id="Esc1"><bpmn:escalationEventDefinition escalationRef="Esc" /></bpmn:intermediateThrowEvent>
  <bpmn:endEvent id="EscEnd"><bpmn:escalationEventDefinition escalationRef="Esc" /></bpmn:endEvent>
  <bpmn:subProcess id="Inner" triggeredByEvent="true"><bpmn:startEvent id="IS" isInterrupting="false"><bpmn:timerEventDefinition><bpmn:timeCycle>R2/PT1M</bpmn:timeCycle></bpmn:timerEventDefinition></bpmn:startEvent></bpmn:subProcess>
  <bpmn:sequenceFlow id="FS1" sourceRef="SS" targetRef="Esc1" /><bpmn:sequenceFlow id="FS2" sourceRef="Esc1" targetRef="EscEnd" />
  <bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=items" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>
</bpmn:subProcess>
<bpmn:boundaryEvent id="SE" cancelActivity="false" attachedToRef="Sub"><bpmn:escalationEventDefinition escalationRef="Esc" /></bpmn:boundaryEvent>
<bpmn:subProcess id="OnError" triggeredByEvent="true"><bpmn:startEvent id="ES"><bpmn:errorEventDefinition /></bpmn:startEvent></bpmn:subProcess>
<bpmn:subProcess id="OnMsg" triggeredByEvent="true"><bpmn:startEvent id="EM" isInterrupting="false"><bpmn:messageEventDefinition messageRef="M1" /></bpmn:startEvent></bpmn:subProcess>
<bpmn:intermediateThrowEvent id="L"><bpmn:linkEventDefinition name="go" /></bpmn:intermediateThrowEvent>
<bpmn:intermediateCatchEvent id="LC"><bpmn:linkEventDefinition name="go" /></bpmn:intermediateCatchEvent>
<bpmn:endEvent id="E" /><bpmn:endEvent id="EX1"><bpmn:errorEventDefinition errorRef="EX" /></bpmn:endEvent>
<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="U" /><bpmn:sequenceFlow id="F2" sourceRef="U" targetRef="T" /><bpmn:sequenceFlow id="F3" sourceRef="T" targetRef="MT" />
<bpmn:sequenceFlow id="F4" sourceRef="MT" targetRef="Sc" /><bpmn:sequenceFlow id="F5" sourceRef="Sc" targetRef="C" /><bpmn:sequenceFlow id="F6" sourceRef="C" targetRef="Sub" />
<bpmn:sequenceFlow id="F7" sourceRef="Sub" targetRef="L" /><bpmn:sequenceFlow id="F8" sourceRef="LC" targetRef="E" /><bpmn:sequenceFlow id="F9" sourceRef="MS" targetRef="U" />`
