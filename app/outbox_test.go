package app_test

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

// bindOutboxToRelays is what an operator declares to let processes message
// each other: the outbox exchange bound to the relay exchange (exchange to
// exchange), so that every outbox message is also a relay.
func bindOutboxToRelays(t *testing.T, env *testkit.Env) {
	t.Helper()
	conn, err := amqp.Dial(env.Config.AMQPURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	c := env.Config
	if err := ch.ExchangeDeclare(c.OutboxExchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeBind(c.RelayExchange, "#", c.OutboxExchange, false, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAMessageThrownByOneProcessAdvancesAnotherThroughTheOutboxToRelaysBinding(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Deploy(t, "../examples/quote-request.bpmn")
	env.Deploy(t, "../examples/quote-desk.bpmn")
	b := &bundle{env: env, pub: env.Publisher(t), cfg: apptest.Config(env)} // declares the relay exchange
	// Only the wake-up by the commit that wrote a row can publish it in time.
	b.cfg.Outbox.PollInterval = time.Hour
	bindOutboxToRelays(t, env)
	b.start(t, nil)

	b.pub.Publish(startOf("quote-desk", "desk-1", map[string]any{"requestId": "r-1"}))
	b.waitVersion(t, "desk-1", 1) // waits for quote-requested, key r-1
	b.pub.Publish(startOf("quote-request", "req-1", map[string]any{"requestId": "r-1", "item": "anvil"}))
	// req-1 throws quote-requested (r-1): desk-1 takes it and throws
	// quote-ready (r-1), which req-1 waits for.
	b.waitCommitted(t, "both instances completed", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed'") == 2
	})
	if price := b.env.Int(t, "SELECT (variables->>'price')::int FROM instances WHERE id = 'req-1'"); price != 120 {
		t.Errorf("req-1 got price %d, want the desk's 120", price)
	}
	// Each message was applied as a relay under its outbox row's id.
	for _, id := range []string{"req-1/1/Throw_Requested/t1", "desk-1/2/Throw_Ready/t2"} {
		if n := b.env.Int(t, "SELECT count(*) FROM inbox i JOIN outbox o ON o.id = i.message_id WHERE i.message_id = $1", id); n != 1 {
			t.Errorf("outbox row %s applied %d times as a relay, want once", id, n)
		}
	}
	b.waitCounter(t, "sutra_outbox_published_total", 2)
	if count, _ := b.histogram(t, "sutra_outbox_lag_seconds", 0); count != 2 {
		t.Errorf("lag samples = %d, want 2", count)
	}
	b.env.AssertNoOverlap(t, false)
	b.env.AssertNoClaimsHeld(t)
}
