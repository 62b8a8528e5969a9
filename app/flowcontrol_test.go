package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
)

// A broker short of memory or disk blocks the worker's connections
// (connection.blocked, sent here by the proxy): the worker is not ready
// and says why, shows it in sutra_broker_blocked, and still applies and
// acks relays, until the broker unblocks it.
func TestABrokerThatBlocksTheWorkerMakesItNotReadyWithTheReasonUntilItUnblocks(t *testing.T) {
	t.Parallel()
	var proxy *testkit.Proxy
	b := setup(t, nil, func(c *app.Config) {
		proxy = testkit.NewAMQPProxy(t)
		c.Broker.URL = proxy.Through(t, c.Broker.URL)
	})
	blocked := func(connection string) float64 {
		for _, m := range b.family(t, "sutra_broker_blocked").GetMetric() {
			if m.GetLabel()[0].GetValue() == connection {
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("no sutra_broker_blocked{connection=%q}", connection)
		return 0
	}
	flow := &b.w.Broker().TestSignals.Blocked
	flow.Init()
	proxy.SendAMQP(t, testkit.AMQPBlocked("low on disk"))
	flow.Until(t, "both connections shown blocked", func() bool {
		return blocked("consume") == 1 && blocked("publish") == 1
	})
	if err := b.w.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "blocks") || !strings.Contains(err.Error(), "low on disk") {
		t.Errorf("ready while blocked: %v, want not ready, saying why", err)
	}
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1) // a relay applied while blocked
	proxy.SendAMQP(t, testkit.AMQPUnblocked())
	flow.Until(t, "both connections unblocked", func() bool {
		return blocked("consume") == 0 && blocked("publish") == 0
	})
	if err := b.w.Ready(context.Background()); err != nil {
		t.Errorf("not ready once unblocked: %v", err)
	}
}
