package app_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
)

// Scenario tests run the example processes through the real pipeline
// (relay or resume in → rows out) and check that every effect is written,
// and cancelled, in the step's commit exactly as the semantics say.

// resume hands r straight to the lanes (as the timer poller and the task API
// do) and waits for its outcome.
func (b *bundle) resume(t *testing.T, r lanes.Resume) lanes.Result {
	t.Helper()
	done := make(chan lanes.Result, 1)
	r.Done = func(o lanes.Result) { done <- o }
	b.w.Lanes().Dispatch(r)
	select {
	case o := <-done:
		return o
	case <-time.After(20 * time.Second):
		t.Fatalf("no outcome for %+v", r)
		return lanes.Result{}
	}
}

// rows is the count of an instance's rows in table.
func (b *bundle) rows(t *testing.T, table, id string) int64 {
	return b.env.Int(t, "SELECT count(*) FROM "+table+" WHERE instance_id = $1", id)
}

// timer returns the id and token of the instance's timer at element.
func (b *bundle) timer(t *testing.T, id, element string) (int64, string, time.Time) {
	t.Helper()
	var timerID int64
	var token string
	var due time.Time
	err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT id, token_id, due_at FROM timers WHERE instance_id = $1 AND element_id = $2",
		id, element).Scan(&timerID, &token, &due)
	if err != nil {
		t.Fatalf("timer %s of %s: %v", element, id, err)
	}
	return timerID, token, due
}

// task returns the token of the instance's pull task at element.
func (b *bundle) task(t *testing.T, id, element string) string {
	t.Helper()
	var token string
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT token_id FROM tasks WHERE instance_id = $1 AND element_id = $2",
		id, element).Scan(&token); err != nil {
		t.Fatalf("task %s of %s: %v", element, id, err)
	}
	return token
}

func byKey(msgID, message, key string, vars map[string]any) testkit.Relay {
	return testkit.Relay{MessageID: msgID, Body: map[string]any{"message": message, "correlation_key": key, "variables": vars}}
}

func startOf(def, id string, vars map[string]any) testkit.Relay {
	return testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": def, "instance_id": id, "variables": vars}}
}

func within(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if d := got.Sub(want); d < -time.Minute || d > time.Minute {
		t.Errorf("%s due at %v, want about %v", what, got, want)
	}
}

func TestOrderFulfilmentWritesAndCancelsItsWaitsInEachCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "../examples/order-fulfilment.bpmn")
	b.pub.Publish(startOf("order-fulfilment", "f-1", map[string]any{"orderId": "f-1", "total": 100}))
	b.waitVersion(t, "f-1", 1)

	// The start published the payment request and parked on the event-based gateway.
	var outboxID, key string
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT id, correlation_key FROM outbox WHERE instance_id = 'f-1' AND message_name = 'payment-requested'").
		Scan(&outboxID, &key); err != nil {
		t.Fatalf("payment request not in the outbox: %v", err)
	}
	if key != "f-1" || outboxID == "" {
		t.Errorf("outbox row id %q key %q", outboxID, key)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE instance_id = 'f-1' AND message_name = 'payment-received' AND correlation_key = 'f-1'"); n != 1 {
		t.Errorf("payment subscription rows = %d", n)
	}
	_, _, due := b.timer(t, "f-1", "Event_PaymentTimeout")
	within(t, "payment timeout", due, time.Now().Add(15*time.Minute))

	// Payment wins the gateway: its timer goes in the same commit.
	b.pub.Publish(byKey("paid-f-1", "payment-received", "f-1", map[string]any{"amount": 100}))
	b.waitVersion(t, "f-1", 2)
	if n := b.env.Int(t, "SELECT count(*) FROM timers WHERE instance_id = 'f-1' AND element_id = 'Event_PaymentTimeout'"); n != 0 {
		t.Errorf("the losing timer survived the gateway: %d rows", n)
	}
	_, _, due = b.timer(t, "f-1", "Event_ShipmentOverdue")
	within(t, "shipment boundary timer", due, time.Now().Add(72*time.Hour))

	b.pub.Publish(byKey("shipped-f-1", "order-shipped", "f-1", nil))
	b.waitVersion(t, "f-1", 3)
	for _, table := range []string{"subscriptions", "timers", "tasks", "incidents"} {
		if n := b.rows(t, table, "f-1"); n != 0 {
			t.Errorf("%d %s left after completion", n, table)
		}
	}
	if n := b.rows(t, "outbox", "f-1"); n != 1 {
		t.Errorf("outbox rows = %d, want only the payment request", n)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'f-1' AND status = 'completed'"); n != 1 {
		t.Error("instance not completed")
	}
}

func TestEventBasedGatewayRaceHasExactlyOneWinnerAndNoZombieWait(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "../examples/order-fulfilment.bpmn")
	const n = 20
	var starts []testkit.Relay
	for i := range n {
		id := fmt.Sprintf("race-%d", i)
		starts = append(starts, startOf("order-fulfilment", id, map[string]any{"orderId": id, "total": 10}))
	}
	b.pub.Publish(starts...)
	timerWins, messageWins := 0, 0
	for i := range n {
		id := fmt.Sprintf("race-%d", i)
		b.waitVersion(t, id, 1)
		timerID, token, _ := b.timer(t, id, "Event_PaymentTimeout")
		// The timer fire and the message arrive in the same instant.
		var wg sync.WaitGroup
		var fire lanes.Result
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i%4) * time.Millisecond) // vary which one lands first
			fire = b.resume(t, lanes.Resume{Cause: lanes.TimerFire{InstanceID: id, TimerID: timerID, TokenID: token, Element: "Event_PaymentTimeout"}})
		}()
		b.pub.Publish(byKey("paid-"+id, "payment-received", id, map[string]any{"amount": 10}))
		wg.Wait()
		for fire.Kind == lanes.Refused { // the message held the claim: fire again, as the poller would
			fire = b.resume(t, lanes.Resume{Cause: lanes.TimerFire{InstanceID: id, TimerID: timerID, TokenID: token, Element: "Event_PaymentTimeout"}})
		}
		b.waitVersion(t, id, 2) // exactly one of the two applied
		switch {
		case fire.Kind == lanes.Applied:
			timerWins++
			if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE instance_id = $1 AND message_name = 'order-cancelled'", id); n != 1 {
				t.Errorf("%s: timer won but no cancellation published", id)
			}
		case fire.Kind == lanes.Rejected:
			messageWins++
		default:
			t.Fatalf("%s: timer fire outcome %v (%v)", id, fire.Kind, fire.Err)
		}
		if n := b.env.Int(t, "SELECT count(*) FROM timers WHERE instance_id = $1 AND element_id = 'Event_PaymentTimeout'", id); n != 0 {
			t.Errorf("%s: zombie gateway timer", id)
		}
		if n := b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE instance_id = $1 AND message_name = 'payment-received'", id); n != 0 {
			t.Errorf("%s: zombie gateway subscription", id)
		}
	}
	// The losing messages were dead-lettered as uncorrelated: nothing lost, nothing applied twice.
	if timerWins > 0 {
		dead := b.pub.DeadLetters(timerWins, 10*time.Second)
		for _, d := range dead {
			if d.Code != fault.RelayUncorrelated && d.Code != fault.NotWaiting {
				t.Errorf("losing message %s dead-lettered with %s", d.MessageID, d.Code)
			}
		}
		if len(dead) != timerWins {
			t.Errorf("%d losing messages dead-lettered, want %d", len(dead), timerWins)
		}
	}
	t.Logf("timer won %d, message won %d", timerWins, messageWins)
	b.env.AssertNoOverlap(t, false)
}

func TestParallelSplitCreatesBothTasksAndJoinsWhenBothBranchesEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "../examples/shipping-invoicing.bpmn")
	b.pub.Publish(startOf("shipping-invoicing", "s-1", map[string]any{"orderId": "s-1", "total": 50}))
	b.waitVersion(t, "s-1", 1)

	var headers, vars map[string]any
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT headers FROM tasks WHERE instance_id = 's-1' AND type = 'ship-goods' AND retries = 5").
		Scan(&headers); err != nil {
		t.Fatalf("ship-goods task: %v", err)
	}
	if headers["carrier"] != "default" {
		t.Errorf("task headers = %v", headers)
	}
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT variables FROM tasks WHERE instance_id = 's-1' AND type = 'create-invoice'").
		Scan(&vars); err != nil {
		t.Fatalf("create-invoice task: %v", err)
	}
	if vars["orderId"] != "s-1" || vars["amount"] != float64(50) {
		t.Errorf("input mapping gave %v", vars)
	}
	b.timer(t, "s-1", "Event_PaymentOverdue") // the subprocess's non-interrupting reminder

	complete := func(element string, out map[string]any) {
		t.Helper()
		o := b.resume(t, lanes.Resume{Cause: lanes.TaskOutcome{InstanceID: "s-1",
			Trigger: engine.Trigger{Kind: engine.TriggerTaskCompleted, TokenID: b.task(t, "s-1", element), Element: element, Variables: out}}})
		if o.Kind != lanes.Applied {
			t.Fatalf("completing %s: %v %v", element, o.Kind, o.Err)
		}
	}
	complete("Activity_Ship", nil)
	complete("Activity_CreateInvoice", map[string]any{"invoiceId": "inv-1"})
	if n := b.rows(t, "tasks", "s-1"); n != 0 {
		t.Errorf("%d tasks left after completion", n)
	}
	b.pub.Publish(byKey("delivered-s-1", "delivered", "s-1", nil))
	b.pub.Publish(byKey("paid-inv-1", "invoice-paid", "inv-1", nil))
	b.waitCommitted(t, "instance completed", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 's-1' AND status = 'completed'") == 1
	})
	for _, table := range []string{"subscriptions", "timers", "tasks"} {
		if n := b.rows(t, table, "s-1"); n != 0 {
			t.Errorf("%d %s left after the join completed the instance", n, table)
		}
	}
}

func TestTaskErrorIsCaughtByTheSubprocessBoundaryAndCancelsTheScope(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "../examples/shipping-invoicing.bpmn")
	b.pub.Publish(startOf("shipping-invoicing", "s-2", map[string]any{"orderId": "s-2", "total": 50}))
	b.waitVersion(t, "s-2", 1)
	o := b.resume(t, lanes.Resume{Cause: lanes.TaskOutcome{InstanceID: "s-2", Trigger: engine.Trigger{
		Kind: engine.TriggerTaskError, TokenID: b.task(t, "s-2", "Activity_CreateInvoice"), Element: "Activity_CreateInvoice",
		ErrorCode: "INVOICE_REJECTED"}}})
	if o.Kind != lanes.Applied {
		t.Fatalf("task error: %v %v", o.Kind, o.Err)
	}
	b.task(t, "s-2", "Activity_FixBilling")
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 's-2' AND element_id = 'Activity_CreateInvoice'"); n != 0 {
		t.Error("the failed task was not closed")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM timers WHERE instance_id = 's-2' AND element_id = 'Event_PaymentOverdue'"); n != 0 {
		t.Error("the subprocess's boundary timer survived the scope")
	}
	b.task(t, "s-2", "Activity_Ship") // the other branch is untouched
}

func TestIncidentStopsTheTokenCommitsWithTheStepAndLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "../examples/order-fulfilment.bpmn")
	b.pub.Publish(startOf("order-fulfilment", "f-2", map[string]any{"orderId": "f-2", "total": 100}))
	b.waitVersion(t, "f-2", 1)
	// No paidAmount: the gateway's condition cannot be evaluated.
	b.pub.Publish(byKey("paid-f-2", "payment-received", "f-2", nil))
	b.waitVersion(t, "f-2", 2)
	var code, element string
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT code, element_id FROM incidents WHERE instance_id = 'f-2' AND resolved_at IS NULL").
		Scan(&code, &element); err != nil {
		t.Fatalf("incident not written: %v", err)
	}
	if code != fault.IncidentExpression || element != "Gateway_PaidInFull" {
		t.Errorf("incident %s at %s", code, element)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'f-2' AND status = 'active' AND tokens::text LIKE '%incident%'"); n != 1 {
		t.Error("the incident is not visible in the instance state")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = 'paid-f-2'"); n != 1 {
		t.Error("the relay that hit the incident was not recorded as applied")
	}
	if b.relays(t, "dead_lettered") != 0 {
		t.Error("an incident dead-lettered its relay")
	}
}

func TestTaskRetriesCountDownThenRaiseAnIncident(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "../examples/approval.bpmn")
	b.pub.Publish(startOf("approval", "a-1", map[string]any{"requestId": "a-1", "request": map[string]any{"amount": 10}}))
	b.waitVersion(t, "a-1", 1)
	fail := func(retries int) {
		t.Helper()
		o := b.resume(t, lanes.Resume{Cause: lanes.TaskOutcome{InstanceID: "a-1", Trigger: engine.Trigger{
			Kind: engine.TriggerTaskFailed, TokenID: b.task(t, "a-1", "Activity_Review"), Element: "Activity_Review",
			Retries: retries, ErrorMessage: "reviewer service down"}}})
		if o.Kind != lanes.Applied {
			t.Fatalf("task failure: %v %v", o.Kind, o.Err)
		}
	}
	fail(1)
	if n := b.env.Int(t, "SELECT retries FROM tasks WHERE instance_id = 'a-1' AND element_id = 'Activity_Review'"); n != 1 {
		t.Errorf("retries = %d, want 1", n)
	}
	fail(0)
	if n := b.env.Int(t, "SELECT count(*) FROM incidents WHERE instance_id = 'a-1' AND code = $1", fault.IncidentTaskFailed); n != 1 {
		t.Errorf("no retries-exhausted incident")
	}
	if n := b.rows(t, "tasks", "a-1"); n != 0 {
		t.Errorf("%d tasks left after retries ran out", n)
	}
	// The escalation and reminder timers stay armed.
	b.timer(t, "a-1", "Event_Escalate")
	b.timer(t, "a-1", "Event_Remind")
}
