package app_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

func TestWorkerRidesOutBrokerAndDatabaseOutagesUnderLoadAndIsNotReadyMeanwhile(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	pgURL, _ := url.Parse(env.Config.DatabaseURL)
	amqpURL, _ := url.Parse(env.Config.AMQPURL)
	pg, broker := testkit.NewProxy(t, pgURL.Host), testkit.NewProxy(t, amqpURL.Host)
	appName := "sutra-outage-" + env.Schema
	env.Deploy(t, "../examples/order.bpmn")
	b := &bundle{env: env, pub: env.Publisher(t), cfg: apptest.Config(env)} // the test publishes around the outages
	q := pgURL.Query()
	q.Set("application_name", appName)
	pgURL.RawQuery = q.Encode()
	b.cfg.Database.URL = pg.Through(t, pgURL.String())
	b.cfg.Broker.URL = broker.Through(t, env.Config.AMQPURL)
	b.start(t, nil)
	// Each outage lasts until the worker has met it: not ready, and the
	// work published meanwhile refused by it.
	outage := func(what string, cut func(), met func(), restore func()) {
		t.Helper()
		cut()
		testkit.Eventually(t, 10*time.Second, "not ready while "+what, func() bool {
			return b.w.Ready(context.Background()) != nil
		})
		met()
		restore()
		testkit.Eventually(t, 20*time.Second, "ready after "+what, func() bool {
			return b.w.Ready(context.Background()) == nil
		})
	}

	const n = 300
	var starts, paids, ships []testkit.Relay
	for i := range n {
		id := fmt.Sprintf("o-%d", i)
		starts, paids, ships = append(starts, start(id)), append(paids, paid(id)), append(ships, shippedByKey(id))
	}
	b.w.Consumer().TestSignals.Init()
	outage("the broker is unreachable", broker.Cut, func() {
		b.pub.Publish(starts...) // queued in the broker meanwhile
		b.w.Consumer().TestSignals.Disconnected.WaitOrTimeout(t)
		b.w.Consumer().TestSignals.Disconnected.WaitOrTimeout(t) // a reconnect failed too
	}, broker.Restore)
	b.waitCommitted(t, "every order started", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE version >= 1") == n
	})
	outage("the database is unreachable", func() {
		pg.Cut()
		b.pub.Publish(paids...) // taken by the worker and refused meanwhile
	}, func() {
		b.w.Consumer().TestSignals.Requeued.Until(t, "the worker meets the outage: the database is unreachable", func() bool {
			return b.counter(t, "sutra_relay_requeues_total", "reason", "unavailable") > 0
		})
	}, pg.Restore)
	b.waitCommitted(t, "every order paid", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE version >= 2") == n
	})
	b.pub.Publish(ships...)
	// And as an operator would: close the worker's broker connection and
	// terminate its database sessions, under load.
	testkit.CloseBrokerConnection(t, "sutra-worker/"+b.cfg.ReplicaID)
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", appName); err != nil {
		t.Fatal(err)
	}
	b.waitCommitted(t, "every order completed", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed' AND version = 3") == n
	})
	b.w.Consumer().TestSignals.Acked.Until(t, "relay queue drained", func() bool { return b.pub.QueueDepth(b.env.Config.RelayQueue) == 0 })
	if got := b.env.Int(t, "SELECT count(*) FROM inbox"); got != 3*n {
		t.Errorf("inbox has %d message ids, want %d: every relay applied once", got, 3*n)
	}
	if got := b.pub.QueueDepth(b.env.Config.DeadQueue); got != 0 {
		dead := b.pub.DeadLetters(got, time.Second)
		var codes []string
		for _, d := range dead {
			codes = append(codes, d.MessageID+":"+d.Code)
		}
		t.Errorf("%d relays dead-lettered: %s", got, strings.Join(codes, ", "))
	}
	b.env.AssertNoOverlap(t, true)
	b.env.AssertNoClaimsHeld(t)
}
