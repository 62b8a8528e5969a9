package engine

import (
	"testing"
)

// benchProcess has 20 flow nodes. The benchmarked step takes a message at
// C1 and runs the token through an exclusive gateway, a message throw and a
// parallel fork to park it at a service task with a boundary timer and a
// receive task: the busy kind of step.
var benchProcess = `<bpmn:startEvent id="S" />` +
	catchMsg("C1", "MKey") +
	`<bpmn:exclusiveGateway id="G1" default="FLow" />
<bpmn:intermediateThrowEvent id="Notify"><bpmn:extensionElements><zeebe:ioMapping>
  <zeebe:input source="=orderId" target="orderId" /><zeebe:input source="=total * 1.2" target="gross" />
</zeebe:ioMapping></bpmn:extensionElements><bpmn:messageEventDefinition messageRef="MKey" /></bpmn:intermediateThrowEvent>
<bpmn:parallelGateway id="Fork" />
<bpmn:serviceTask id="Ship"><bpmn:extensionElements><zeebe:taskDefinition type="ship" retries="3" />
  <zeebe:ioMapping><zeebe:input source="=customer.address" target="address" /><zeebe:output source="=tracking" target="tracking" /></zeebe:ioMapping>
</bpmn:extensionElements></bpmn:serviceTask>
<bpmn:boundaryEvent id="ShipLate" attachedToRef="Ship"><bpmn:timerEventDefinition><bpmn:timeDuration>P2D</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
<bpmn:receiveTask id="Invoice" messageRef="MKey2" />
<bpmn:parallelGateway id="Join" />
<bpmn:exclusiveGateway id="G2" default="FDone" />` +
	catchMsg("C2", "MKey2") + catchMsg("C3", "MKey3") +
	timerCatch("Cool", "timeDuration", "PT1H") +
	`<bpmn:endEvent id="Done" /><bpmn:endEvent id="Low" /><bpmn:endEvent id="Late" /><bpmn:endEvent id="Retry" />
<bpmn:intermediateThrowEvent id="Mark" /><bpmn:intermediateThrowEvent id="Mark2" /><bpmn:intermediateThrowEvent id="Mark3" />` +
	flow("F0", "S", "C1") + flow("F1", "C1", "G1") + cond("FHigh", "G1", "Notify", "=total &gt; 10 and customer.tier != &quot;blocked&quot;") +
	flow("FLow", "G1", "Low") + flow("F2", "Notify", "Fork") + flow("F3", "Fork", "Ship") + flow("F4", "Fork", "Invoice") +
	flow("F5", "Ship", "Join") + flow("F6", "Invoice", "Join") + flow("F7", "ShipLate", "Late") + flow("F8", "Join", "G2") +
	cond("FRetry", "G2", "C2", "=tracking = null") + flow("FDone", "G2", "Mark") + flow("F9", "Mark", "C3") +
	flow("F10", "C3", "Cool") + flow("F11", "Cool", "Mark3") + flow("F14", "Mark3", "Mark2") + flow("F12", "Mark2", "Done") + flow("F13", "C2", "Retry")

const benchDefs = `
<bpmn:message id="MKey" name="order-paid"><bpmn:extensionElements><zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements></bpmn:message>
<bpmn:message id="MKey2" name="invoiced"><bpmn:extensionElements><zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements></bpmn:message>
<bpmn:message id="MKey3" name="closed" />`

func BenchmarkStep(b *testing.B) {
	def := parse(b, benchProcess, benchDefs)
	if n := len(def.Elements()); n != 20 {
		b.Fatalf("%d elements, want 20", n)
	}
	x := newInstance(b, def)
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{
		"orderId": "o-1", "total": 30.0,
		"customer": map[string]any{"tier": "gold", "address": "1 Main St"},
		"lines":    []any{map[string]any{"sku": "a", "qty": 1.0}, map[string]any{"sku": "b", "qty": 2.0}},
	}})
	in := x.in // the state the benchmarked step starts from
	tr := Trigger{Kind: TriggerMessage, Message: "order-paid", CorrelationKey: "o-1", Variables: map[string]any{"paid": 30.0}}
	if eff := x.step(tr); len(eff.Tasks) != 1 || len(eff.Timers) != 1 || len(eff.Subscriptions) != 1 || len(eff.Publish) != 1 {
		b.Fatalf("effects = %+v", eff)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := Step(def, in, tr, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMultiInstance measures a parallel multi-instance service task
// over 100 items: the step that starts the body and its 100 tasks, and the
// step that completes one inner instance among 100 (collecting its result).
func BenchmarkMultiInstance(b *testing.B) {
	def := parse(b, miTask("false", "", ""), "")
	start := Trigger{Kind: TriggerStart, Variables: map[string]any{"items": items(100)}}
	b.Run("start-100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, eff, err := Step(def, Instance{ID: "i-1"}, start, t0); err != nil || len(eff.Tasks) != 100 {
				b.Fatal(err, len(eff.Tasks))
			}
		}
	})
	b.Run("complete-1-of-100", func(b *testing.B) {
		x := newInstance(b, def)
		eff := x.step(start)
		tr := Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[50].TokenID, Variables: map[string]any{"result": "r"}}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, _, err := Step(def, x.in, tr, t0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
