package api_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

// The process of testdata/throw-then-task.bpmn throws notice.unbound, to
// which no queue is bound, then waits at a service task (topic after-throw).

// startThrower starts instance id of throw-then-task: the start answers once
// its step, which creates the task, committed.
func (b *adminBundle) startThrower(t *testing.T, id string) {
	t.Helper()
	if status, body := b.do(t, http.MethodPost, "/instances", map[string]any{"definition": "throw-then-task", "instance_id": id,
		"variables": map[string]any{"orderId": id}}); status != http.StatusCreated {
		t.Fatalf("starting %s: %d %v", id, status, body)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = $1", id); n != 1 {
		t.Fatalf("%s has %d tasks once started, want 1", id, n)
	}
}

func setupThrower(t *testing.T, maxAttempts int) *adminBundle {
	t.Helper()
	b := setupAdmin(t, nil, func(c *app.Config) { c.Outbox.MaxAttempts = maxAttempts })
	b.env.Deploy(t, "testdata/throw-then-task.bpmn")
	return b
}

func TestATaskCompletionAdvancesItsInstanceWhileTheMessageItThrewIsReturnedAndRetried(t *testing.T) {
	t.Parallel()
	b := setupThrower(t, 1000)
	b.startThrower(t, "t-1")
	task := b.fetch(t, "w", "after-throw", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w"})
	b.stepped(t, "t-1", "completed", outcome(task.ID))
	// The message was not published: it is still being retried.
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE instance_id = 't-1' AND target = 'outbox' AND published_at IS NULL"); n != 1 {
		t.Errorf("%d unpublished messages of t-1, want its notice still retried", n)
	}
	if n := testkit.Counter(t, b.reg, "sutra_outbox_publish_errors_total", "reason", "returned"); n < 1 {
		t.Errorf("%v returned publishes counted, want the notice's", n)
	}
}

type parkedMessage struct {
	ID, InstanceID, Message, Code string
	Attempts                      float64
}

// parked lists the parked messages through the admin API.
func (b *adminBundle) parked(t *testing.T) []parkedMessage {
	t.Helper()
	status, body := b.do(t, http.MethodGet, "/outbox/parked", nil)
	list, ok := asList(body["parked"])
	if status != http.StatusOK || !ok {
		t.Fatalf("listing parked messages: %d %v", status, body)
	}
	var out []parkedMessage
	for _, p := range list {
		out = append(out, parkedMessage{ID: p["id"].(string), InstanceID: p["instance_id"].(string), Message: p["message"].(string),
			Code: p["code"].(string), Attempts: p["attempts"].(float64)})
	}
	return out
}

// waitParked waits until instance id's message is parked and returns it.
func (b *adminBundle) waitParked(t *testing.T, id string) parkedMessage {
	t.Helper()
	var got parkedMessage
	b.w.Outbox().TestSignals.Settled.Until(t, "the notice of "+id+" parked", func() bool {
		for _, p := range b.parked(t) {
			if p.InstanceID == id {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

func TestAnUnroutableMessageIsParkedAndTheAdminAPIRetriesOrDiscardsIt(t *testing.T) {
	t.Parallel()
	const attempts = 2
	b := setupThrower(t, attempts)
	b.startThrower(t, "p-1")
	b.startThrower(t, "p-2")
	retried, discarded := b.waitParked(t, "p-1"), b.waitParked(t, "p-2")
	for _, p := range []parkedMessage{retried, discarded} {
		if p.Message != "notice.unbound" || p.Code != fault.OutboxUnroutable || p.Attempts != attempts {
			t.Fatalf("parked %+v, want notice.unbound with %s after %d attempts", p, fault.OutboxUnroutable, attempts)
		}
	}
	if n := testkit.Counter(t, b.reg, "sutra_outbox_parked_total", "", ""); n != 2 {
		t.Errorf("sutra_outbox_parked_total = %v, want 2", n)
	}
	// The instances go on regardless.
	var outcomes []string
	for _, task := range b.fetch(t, "w", "after-throw", 2, time.Minute, 0) {
		b.answer(t, task.ID, "complete", map[string]any{"workerId": "w"})
		outcomes = append(outcomes, outcome(task.ID))
	}
	b.stepped(t, "p-1", "completed", outcomes...)
	b.stepped(t, "p-2", "completed")

	// An operator discards one, binds a queue for the message and retries
	// the other: it is published once, the discarded one never.
	discard := "/outbox/parked/" + url.PathEscape(discarded.ID)
	if status, body := b.do(t, http.MethodPost, discard+"/discard", map[string]any{}); status != http.StatusOK || body["status"] != "discarded" {
		t.Fatalf("discard: %d %v", status, body)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE id = $1", discarded.ID); n != 0 {
		t.Errorf("the discarded message is back in the outbox")
	}
	deliveries := bindOutbox(t, b.env.Config.OutboxExchange, "notice.unbound")
	retry := "/outbox/parked/" + url.PathEscape(retried.ID)
	if status, body := b.do(t, http.MethodPost, retry+"/retry", map[string]any{}); status != http.StatusOK || body["status"] != "requeued" {
		t.Fatalf("retry: %d %v", status, body)
	}
	select {
	case m := <-deliveries:
		if m.MessageId != retried.ID {
			t.Fatalf("delivered %s, want %s", m.MessageId, retried.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the retried message was not published")
	}
	b.w.Outbox().TestSignals.Settled.Until(t, "the retried message marked published", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM outbox WHERE id = $1 AND published_at IS NOT NULL", retried.ID) == 1
	})
	if list := b.parked(t); len(list) != 0 {
		t.Errorf("still parked: %+v", list)
	}
	for _, call := range []string{retry + "/retry", retry + "/discard", discard + "/discard", discard + "/retry"} {
		if status, body := b.do(t, http.MethodPost, call, map[string]any{}); status != http.StatusNotFound || body["code"] != fault.AdminNotFound {
			t.Errorf("%s: %d %v, want 404 %s", call, status, body, fault.AdminNotFound)
		}
	}
}

// bindOutbox binds a queue of its own to exchange for key and returns its
// deliveries.
func bindOutbox(t *testing.T, exchange, key string) <-chan amqp.Delivery {
	t.Helper()
	conn, err := amqp.Dial(testkit.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, key, exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	d, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
