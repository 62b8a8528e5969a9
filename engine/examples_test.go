package engine

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// Scenario tests: the example processes run through realistic paths.

func published(eff Effects) []string {
	var out []string
	for _, m := range eff.Publish {
		out = append(out, m.Message+"/"+m.CorrelationKey)
	}
	return out
}

func TestOrderFulfilmentExample(t *testing.T) {
	def := parseFile(t, "order-fulfilment.bpmn")
	start := func(t *testing.T) *instance {
		x := newInstance(t, def)
		eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1", "total": 30.0}})
		want := []OutboxMessage{{ID: "i-1/1/Event_RequestPayment/t1", Element: "Event_RequestPayment", Message: "payment-requested", CorrelationKey: "o-1",
			Variables: map[string]any{"orderId": "o-1", "amount": 30.0}}}
		if !reflect.DeepEqual(eff.Publish, want) {
			t.Fatalf("publish = %+v", eff.Publish)
		}
		if len(eff.Subscriptions) != 1 || len(eff.Timers) != 1 || !eff.Timers[0].DueAt.Equal(t0.Add(15*time.Minute)) {
			t.Fatalf("gateway waits = %+v", eff)
		}
		return x
	}
	t.Run("paid in full, then shipped", func(t *testing.T) {
		x := start(t)
		x.step(Trigger{Kind: TriggerMessage, Message: "payment-received", CorrelationKey: "o-1", Variables: map[string]any{"amount": 30.0, "card": "x"}})
		if x.in.State.Variables["paidAmount"] != 30.0 || x.in.State.Variables["card"] != nil {
			t.Errorf("variables = %v: only the output mapping is written", x.in.State.Variables)
		}
		x.token("Activity_AwaitShipment")
		if eff := x.step(Trigger{Kind: TriggerMessage, Message: "order-shipped", CorrelationKey: "o-1"}); !eff.Completed {
			t.Errorf("not completed: %+v", eff)
		}
	})
	t.Run("underpaid", func(t *testing.T) {
		x := start(t)
		eff := x.step(Trigger{Kind: TriggerMessage, Message: "payment-received", CorrelationKey: "o-1", Variables: map[string]any{"amount": 10.0}})
		if !slices.Equal(published(eff), []string{"refund-requested/o-1"}) || !eff.Completed {
			t.Errorf("effects = %+v", eff)
		}
	})
	t.Run("payment times out", func(t *testing.T) {
		x := start(t)
		eff := x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Event_PaymentTimeout"})
		if !slices.Equal(published(eff), []string{"order-cancelled/o-1"}) || !eff.Completed {
			t.Errorf("effects = %+v", eff)
		}
	})
}

func TestApprovalExample(t *testing.T) {
	def := parseFile(t, "approval.bpmn")
	start := func(t *testing.T) (*instance, Effects) {
		x := newInstance(t, def)
		return x, x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"requestId": "r-1", "request": map[string]any{"amount": 900.0}}})
	}
	t.Run("approved after reminders", func(t *testing.T) {
		x, eff := start(t)
		if len(eff.Tasks) != 1 || eff.Tasks[0].Type != "review-request" || eff.Tasks[0].Variables["amount"] != 900.0 ||
			eff.Tasks[0].Headers["queue"] != "approvals" || len(eff.Timers) != 2 {
			t.Fatalf("effects = %+v", eff)
		}
		for range 2 {
			eff = x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Event_Remind"})
			if !slices.Equal(published(eff), []string{"reviewer-reminder/r-1"}) {
				t.Fatalf("reminder = %+v", eff)
			}
		}
		eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: "t1", Variables: map[string]any{"approved": true, "comment": "ok"}})
		if !slices.Equal(published(eff), []string{"request-approved/r-1"}) || !eff.Completed {
			t.Errorf("effects = %+v", eff)
		}
		if !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1"}}) {
			t.Errorf("the task, the reminder cycle and the escalation timer must all close: %+v", eff.CloseWaits)
		}
	})
	t.Run("escalated and rejected", func(t *testing.T) {
		x, _ := start(t)
		eff := x.step(Trigger{Kind: TriggerTimer, TokenID: "t1", Element: "Event_Escalate"})
		if len(eff.Tasks) != 1 || eff.Tasks[0].Type != "manager-review" {
			t.Fatalf("effects = %+v", eff)
		}
		eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID, Variables: map[string]any{"approved": false}})
		if !slices.Equal(published(eff), []string{"request-rejected/r-1"}) || !eff.Completed {
			t.Errorf("effects = %+v", eff)
		}
	})
}

func TestShippingInvoicingExample(t *testing.T) {
	def := parseFile(t, "shipping-invoicing.bpmn")
	start := func(t *testing.T) (*instance, map[string]string) {
		x := newInstance(t, def)
		eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1", "total": 30.0}})
		tasks := map[string]string{}
		for _, task := range eff.Tasks {
			tasks[task.Type] = task.TokenID
		}
		if len(tasks) != 2 || len(eff.Timers) != 1 || eff.Timers[0].Element != "Event_PaymentOverdue" {
			t.Fatalf("effects = %+v", eff)
		}
		return x, tasks
	}
	t.Run("both branches finish", func(t *testing.T) {
		x, tasks := start(t)
		eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["create-invoice"], Variables: map[string]any{"invoiceId": "inv-7"}})
		if len(eff.Subscriptions) != 1 || eff.Subscriptions[0].CorrelationKey != "inv-7" {
			t.Fatalf("effects = %+v", eff)
		}
		x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["ship-goods"]})
		x.step(Trigger{Kind: TriggerMessage, Message: "delivered", CorrelationKey: "o-1"})
		x.token("Gateway_Join")
		eff = x.step(Trigger{Kind: TriggerMessage, Message: "invoice-paid", CorrelationKey: "inv-7"})
		if !slices.Equal(published(eff), []string{"order-closed/o-1"}) || !eff.Completed {
			t.Errorf("effects = %+v", eff)
		}
	})
	t.Run("rejected invoice is fixed", func(t *testing.T) {
		x, tasks := start(t)
		eff := x.step(Trigger{Kind: TriggerTaskError, TokenID: tasks["create-invoice"], ErrorCode: "INVOICE_REJECTED"})
		if len(eff.Tasks) != 1 || eff.Tasks[0].Type != "fix-billing" || len(eff.CloseWaits) != 2 {
			t.Fatalf("effects = %+v: the subprocess (with its timer) and its task close", eff)
		}
		x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID})
		x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["ship-goods"]})
		eff = x.step(Trigger{Kind: TriggerMessage, Message: "delivered", CorrelationKey: "o-1"})
		if !eff.Completed {
			t.Errorf("effects = %+v", eff)
		}
	})
}
