package engine

import (
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/sutra-run/worker/fault"
)

func TestStepRunsOrderExampleFromStartToCompletion(t *testing.T) {
	x := newInstance(t, parseFile(t, "order.bpmn"))

	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
	want := Effects{Subscriptions: []Subscription{{TokenID: "t1", Element: "Event_PaymentReceived", Message: "payment-received", CorrelationKey: "o-1"}},
		Passed: []string{"StartEvent_1", "Flow_0k1x2ab"}}
	if !reflect.DeepEqual(eff, want) {
		t.Fatalf("start effects = %+v\nwant %+v", eff, want)
	}
	if x.in.State.Status != StatusActive || x.token("Event_PaymentReceived").Wait != WaitMessage {
		t.Fatalf("after start: %s %v", x.in.State.Status, x.at())
	}

	eff = x.step(Trigger{Kind: TriggerMessage, Message: "payment-received", CorrelationKey: "o-1", Variables: map[string]any{"paid": 42.0}})
	want = Effects{
		CloseWaits:    []WaitRef{{TokenID: "t1"}},
		Subscriptions: []Subscription{{TokenID: "t2", Element: "Activity_AwaitShipment", Message: "order-shipped", CorrelationKey: "o-1"}},
		Passed:        []string{"Event_PaymentReceived", "Flow_1m7c3de"},
	}
	if !reflect.DeepEqual(eff, want) {
		t.Fatalf("payment effects = %+v\nwant %+v", eff, want)
	}
	if x.in.State.Variables["paid"] != 42.0 || x.in.State.Variables["orderId"] != "o-1" {
		t.Errorf("variables = %v", x.in.State.Variables)
	}

	eff = x.step(Trigger{Kind: TriggerMessage, Message: "order-shipped"})
	want = Effects{CloseWaits: []WaitRef{{TokenID: "t2"}}, Completed: true, Passed: []string{"Activity_AwaitShipment", "Flow_0z9y8xw", "EndEvent_1"}}
	if !reflect.DeepEqual(eff, want) {
		t.Fatalf("shipped effects = %+v\nwant %+v", eff, want)
	}
	if x.in.State.Status != StatusCompleted || len(x.in.State.Tokens) != 0 {
		t.Errorf("after shipping: %s %v", x.in.State.Status, x.at())
	}
	if err := x.fail(Trigger{Kind: TriggerMessage, Message: "order-shipped"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("message to a completed instance: %v, want %s", err, fault.NotWaiting)
	}
}

func TestStepRefusesMessageNoWaitMatches(t *testing.T) {
	x := newInstance(t, parseFile(t, "order.bpmn"))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
	for _, tr := range []Trigger{
		{Kind: TriggerMessage, Message: "order-shipped"},                           // not waiting for it yet
		{Kind: TriggerMessage, Message: "payment-received", CorrelationKey: "o-2"}, // someone else's key
		{Kind: TriggerTimer, TokenID: "t1", Element: "Event_PaymentReceived"},      // no timer there
		{Kind: TriggerTaskCompleted, TokenID: "t1"},                                // no task there
	} {
		if err := x.fail(tr); !fault.HasCode(err, fault.NotWaiting) {
			t.Errorf("%+v: err = %v, want %s", tr, err, fault.NotWaiting)
		}
	}
}

func TestStepCorrelatesByInstanceWhenTriggerHasNoKey(t *testing.T) {
	x := newInstance(t, parseFile(t, "order.bpmn"))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
	x.step(Trigger{Kind: TriggerMessage, Message: "payment-received"})
	x.token("Activity_AwaitShipment")
}

func TestStepKeepsTheKeyASubscriptionOpenedWith(t *testing.T) {
	x := newInstance(t, parseFile(t, "order.bpmn"))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
	// Variables change under an open subscription (here through a message
	// that does not match, so nothing happens; the state is edited directly).
	x.in.State.Variables = map[string]any{"orderId": "o-9"}
	if err := x.fail(Trigger{Kind: TriggerMessage, Message: "payment-received", CorrelationKey: "o-9"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("new key matched: %v", err)
	}
	x.step(Trigger{Kind: TriggerMessage, Message: "payment-received", CorrelationKey: "o-1"})
}

func TestStepPrintsNumericCorrelationKeysWithoutFraction(t *testing.T) {
	x := newInstance(t, parseFile(t, "order.bpmn"))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": 1234.0}})
	if got := eff.Subscriptions[0].CorrelationKey; got != "1234" {
		t.Errorf("key = %q, want 1234", got)
	}
}

func TestStepRefusesSecondStart(t *testing.T) {
	x := newInstance(t, parseFile(t, "order.bpmn"))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
	if err := x.fail(Trigger{Kind: TriggerStart}); !fault.HasCode(err, fault.InstanceExists) {
		t.Errorf("err = %v, want %s", err, fault.InstanceExists)
	}
}

func TestStepRefusesTriggerBeforeStart(t *testing.T) {
	x := newInstance(t, parseFile(t, "order.bpmn"))
	if err := x.fail(Trigger{Kind: TriggerMessage, Message: "payment-received"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("err = %v, want %s", err, fault.NotWaiting)
	}
}

func TestStepSharesOneDefinitionAcrossGoroutines(t *testing.T) {
	def := parseFile(t, "order-fulfilment.bpmn")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := Instance{ID: "i-" + strconv.Itoa(g)}
			st, _, err := Step(def, in, Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": in.ID, "total": 5.0}}, t0)
			if err != nil {
				t.Error(err)
				return
			}
			in.State = st
			if _, _, err := Step(def, in, Trigger{Kind: TriggerMessage, Message: "payment-received", CorrelationKey: in.ID,
				Variables: map[string]any{"amount": 5.0}}, t0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
