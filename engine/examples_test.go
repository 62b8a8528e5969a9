package engine

import (
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
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

// TestClaimExample runs claim.bpmn and the payout.bpmn it calls, relaying
// between them as the store does: a ChildStart starts the child with its
// Parent, the child's NotifyParent completes the parent's call activity.
func TestClaimExample(t *testing.T) {
	claimDef, payoutDef := parseFile(t, "claim.bpmn"), parseFile(t, "payout.bpmn")
	submit := Trigger{Kind: TriggerStart, Element: "Event_ClaimSubmitted", Message: "claim-submitted", Variables: map[string]any{
		"claim": map[string]any{"id": "c-1", "amount": 100.0, "deadline": "2025-03-08T12:00:00Z"},
	}}
	// assessed runs the claim to its payout call, returning the child start.
	assessed := func(t *testing.T) (*instance, ChildStart) {
		x := newInstance(t, claimDef)
		eff := x.step(submit)
		if len(eff.Tasks) != 1 || eff.Tasks[0].User.DueDate != "2025-03-08T12:00:00Z" || !slices.Equal(eff.Tasks[0].User.CandidateGroups, []string{"adjusters"}) ||
			len(eff.Subscriptions) != 2 || eff.Subscriptions[0].CorrelationKey != "c-1" || len(eff.Timers) != 1 {
			t.Fatalf("after submit: %+v", eff)
		}
		if r, _ := x.in.State.Variables["reserve"].(float64); math.Abs(r-110) > 1e-9 {
			t.Errorf("reserve = %v", x.in.State.Variables["reserve"])
		}
		eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID, Variables: map[string]any{
			"approved": true, "items": []any{"roof", "window"}, "note": "ok",
		}})
		if len(eff.Tasks) != 2 || eff.Tasks[1].Type != "price-item" || eff.Tasks[1].Variables["item"] != "window" {
			t.Fatalf("after assessment: %+v", eff)
		}
		x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[1].TokenID, Variables: map[string]any{"price": 40.0}})
		eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID, Variables: map[string]any{"price": 60.0}})
		if len(eff.StartChildren) != 1 {
			t.Fatalf("after pricing: %+v", eff)
		}
		c := eff.StartChildren[0]
		if c.DefinitionKey != "payout" || !reflect.DeepEqual(c.Variables, map[string]any{"claimId": "c-1", "amounts": []any{60.0, 40.0}}) {
			t.Errorf("child = %+v", c)
		}
		return x, c
	}
	// payout runs the child to its end and returns what it tells the parent.
	payout := func(t *testing.T, c ChildStart, result map[string]any) *ChildResult {
		y := newInstance(t, payoutDef)
		y.in.ID = c.InstanceID
		eff := y.step(Trigger{Kind: TriggerStart, Variables: c.Variables, Parent: &ParentRef{InstanceID: "i-1", TokenID: c.TokenID, Element: c.Element}})
		eff = y.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID, Variables: result})
		if eff.NotifyParent == nil {
			t.Fatalf("child did not report: %+v", eff)
		}
		return eff.NotifyParent
	}
	relay := func(r *ChildResult) Trigger {
		return Trigger{Kind: TriggerChildCompleted, TokenID: r.Parent.TokenID, Element: r.Parent.Element, Variables: r.Variables, ErrorCode: r.ErrorCode}
	}

	t.Run("paid out while an update is reviewed", func(t *testing.T) {
		x, c := assessed(t)
		eff := x.step(Trigger{Kind: TriggerMessage, Message: "claim-updated", CorrelationKey: "c-1"})
		if len(eff.Tasks) != 1 || eff.Tasks[0].Element != "Activity_ReviewUpdate" {
			t.Fatalf("update: %+v", eff)
		}
		review := eff.Tasks[0].TokenID
		eff = x.step(relay(payout(t, c, map[string]any{"transferred": true, "paymentRef": "p-9"})))
		if !slices.Equal(published(eff), []string{"claim-settled/c-1"}) || eff.Completed || x.in.State.Variables["paymentRef"] != "p-9" {
			t.Fatalf("settled: %+v, variables %v: the update review still runs", eff, x.in.State.Variables)
		}
		if eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: review}); !eff.Completed || !slices.Contains(eff.CloseWaits, WaitRef{TokenID: ""}) {
			t.Errorf("review done: %+v", eff)
		}
	})
	t.Run("payout fails and is done by hand", func(t *testing.T) {
		x, c := assessed(t)
		r := payout(t, c, map[string]any{"transferred": false})
		if r.ErrorCode != "PAYOUT_FAILED" {
			t.Fatalf("child result = %+v", r)
		}
		eff := x.step(relay(r))
		if len(eff.Tasks) != 1 || eff.Tasks[0].Type != bpmn.UserTaskType || eff.Tasks[0].User.FormKey != "camunda-forms:bpmn:userTaskForm_manualPayout" {
			t.Fatalf("manual payout: %+v", eff)
		}
		if eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID, Variables: map[string]any{"paymentRef": "manual-1"}}); !eff.Completed {
			t.Errorf("effects = %+v", eff)
		}
	})
	t.Run("withdrawn during the payout", func(t *testing.T) {
		x, c := assessed(t)
		eff := x.step(Trigger{Kind: TriggerMessage, Message: "claim-withdrawn", CorrelationKey: "c-1"})
		if !eff.Completed || !slices.Equal(eff.CancelChildren, []string{c.InstanceID}) {
			t.Errorf("effects = %+v", eff)
		}
	})
}
