package engine

import (
	"reflect"
	"testing"

	"github.com/sutra-run/worker/fault"
)

const signalDefs = `<bpmn:signal id="G" name="go" /><bpmn:signal id="GX" name="=&quot;sig-&quot; + kind" />`

const signalTask = `<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="work" /></bpmn:extensionElements></bpmn:serviceTask>`

func TestSignalCatchResumesTheWaitItNames(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />
		<bpmn:intermediateCatchEvent id="C"><bpmn:signalEventDefinition signalRef="GX" /></bpmn:intermediateCatchEvent>
		<bpmn:endEvent id="E" />`+flow("f1", "S", "C")+flow("f2", "C", "E"), signalDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"kind": "a"}})
	want := []Subscription{{TokenID: "t1", Element: "C", Message: "sig-a", Signal: true}}
	if !reflect.DeepEqual(eff.Subscriptions, want) || x.token("C").Wait != WaitSignal {
		t.Fatalf("start: subscriptions %+v, tokens %v", eff.Subscriptions, x.at())
	}
	for _, tr := range []Trigger{
		{Kind: TriggerSignal, Signal: "sig-b", TokenID: "t1", Element: "C"}, // another signal
		{Kind: TriggerSignal, Signal: "sig-a", TokenID: "t9", Element: "C"}, // another token
		{Kind: TriggerMessage, Message: "sig-a"},                            // a message is no signal
	} {
		if err := x.fail(tr); !fault.HasCode(err, fault.NotWaiting) {
			t.Errorf("%+v: err = %v, want %s", tr, err, fault.NotWaiting)
		}
	}
	eff = x.step(Trigger{Kind: TriggerSignal, Signal: "sig-a", TokenID: "t1", Element: "C", Variables: map[string]any{"got": true}})
	if !eff.Completed || !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1"}}) || x.in.State.Variables["got"] != true {
		t.Errorf("signal: effects %+v, variables %v", eff, x.in.State.Variables)
	}
}

func TestSignalBoundaryEvents(t *testing.T) {
	for _, interrupting := range []bool{true, false} {
		cancel := "false"
		if interrupting {
			cancel = "true"
		}
		def := parse(t, `<bpmn:startEvent id="S" />`+signalTask+`
			<bpmn:boundaryEvent id="B" attachedToRef="T" cancelActivity="`+cancel+`"><bpmn:signalEventDefinition signalRef="G" /></bpmn:boundaryEvent>
			<bpmn:endEvent id="E" /><bpmn:endEvent id="EB" />`+flow("f1", "S", "T")+flow("f2", "T", "E")+flow("f3", "B", "EB"), signalDefs)
		x := newInstance(t, def)
		x.step(Trigger{Kind: TriggerStart})
		tr := Trigger{Kind: TriggerSignal, Signal: "go", TokenID: "t1", Element: "B"}
		eff := x.step(tr)
		if interrupting {
			if !eff.Completed || len(x.in.State.Tokens) != 0 {
				t.Errorf("interrupting: effects %+v, tokens %v", eff, x.at())
			}
			continue
		}
		if eff.Completed || x.token("T").Wait != WaitTask || len(eff.CloseWaits) != 0 {
			t.Fatalf("non-interrupting: effects %+v, tokens %v", eff, x.at())
		}
		// The wait stays: the next broadcast reaches it again.
		x.step(tr)
		x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: "t1", Element: "T"})
		if x.in.State.Status != StatusCompleted {
			t.Errorf("after the task: %s %v", x.in.State.Status, x.at())
		}
		if err := x.fail(tr); !fault.HasCode(err, fault.NotWaiting) {
			t.Errorf("signal after completion: %v", err)
		}
	}
}

func TestSignalEventSubprocessAndStart(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:startEvent id="SS"><bpmn:signalEventDefinition signalRef="G" /></bpmn:startEvent>`+signalTask+`
		<bpmn:endEvent id="E" />`+flow("f1", "S", "T")+flow("f2", "T", "E")+flow("f3", "SS", "T")+`
		<bpmn:subProcess id="ESP" triggeredByEvent="true"><bpmn:startEvent id="ES" isInterrupting="false"><bpmn:signalEventDefinition signalRef="G" /></bpmn:startEvent>
		<bpmn:endEvent id="EE" />`+flow("g1", "ES", "EE")+`</bpmn:subProcess>`, signalDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart})
	if len(x.in.State.Armed) != 1 || !reflect.DeepEqual(eff.Subscriptions, []Subscription{{Element: "ES", Message: "go", Signal: true}}) {
		t.Fatalf("start: armed %v, subscriptions %+v", x.in.State.Armed, eff.Subscriptions)
	}
	x.step(Trigger{Kind: TriggerSignal, Signal: "go", Element: "ES", Variables: map[string]any{"n": 1.0}})
	if x.token("T").Wait != WaitTask || len(x.in.State.Armed) != 1 || x.in.State.Variables["n"] != 1.0 {
		t.Errorf("after the event subprocess: %v, armed %v, variables %v", x.at(), x.in.State.Armed, x.in.State.Variables)
	}

	y := newInstance(t, def)
	y.step(Trigger{Kind: TriggerStart, Element: "SS", Variables: map[string]any{"n": 2.0}})
	if y.token("T").Wait != WaitTask || y.in.State.Variables["n"] != 2.0 {
		t.Errorf("signal start: %v, variables %v", y.at(), y.in.State.Variables)
	}
}

func TestSignalThrowAndEndEvents(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />
		<bpmn:intermediateThrowEvent id="TH"><bpmn:extensionElements><zeebe:ioMapping><zeebe:input source="=kind" target="k" /></zeebe:ioMapping></bpmn:extensionElements>
		<bpmn:signalEventDefinition signalRef="GX" /></bpmn:intermediateThrowEvent>
		<bpmn:endEvent id="E"><bpmn:signalEventDefinition signalRef="G" /></bpmn:endEvent>`+flow("f1", "S", "TH")+flow("f2", "TH", "E"), signalDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"kind": "x"}})
	want := []SignalThrow{
		{ID: "i-1/1/TH/t1", Element: "TH", Signal: "sig-x", Variables: map[string]any{"k": "x"}},
		{ID: "i-1/1/E/t1", Element: "E", Signal: "go", Variables: map[string]any{"kind": "x"}},
	}
	if !eff.Completed || !reflect.DeepEqual(eff.Signals, want) {
		t.Errorf("signals = %+v\nwant %+v", eff.Signals, want)
	}

	y := newInstance(t, def)
	y.step(Trigger{Kind: TriggerStart})
	if tok := y.token("TH"); tok.Incident == nil {
		t.Errorf("a name expression that fails: %v", y.at())
	}
}
