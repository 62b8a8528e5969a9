package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

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
		c.AMQPURL = proxy.Through(t, c.AMQPURL)
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
	proxy.SendAMQP(t, testkit.AMQPBlocked("low on disk"))
	testkit.Eventually(t, 10*time.Second, "not ready, saying why, while blocked", func() bool {
		err := b.w.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "blocks") && strings.Contains(err.Error(), "low on disk")
	})
	testkit.Eventually(t, 10*time.Second, "both connections shown blocked", func() bool {
		return blocked("consume") == 1 && blocked("publish") == 1
	})
	b.pub.Publish(start("o-1"))
	testkit.Eventually(t, 20*time.Second, "a relay applied while blocked", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1'") == 1
	})
	proxy.SendAMQP(t, testkit.AMQPUnblocked())
	testkit.Eventually(t, 10*time.Second, "ready once unblocked", func() bool { return b.w.Ready(context.Background()) == nil })
	if blocked("consume") != 0 || blocked("publish") != 0 {
		t.Error("sutra_broker_blocked still 1 once unblocked")
	}
}
