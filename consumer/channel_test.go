package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/consumer"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
)

// Opening the consumer's channel (with its QoS and consume) waits for the
// broker's answers: a broker that does not give them (its replies held by
// the proxy) makes the consumer give up at the owner's channel deadline and
// try again, not wait until the heartbeat closes the connection; it
// consumes once the broker answers.
func TestTheConsumerGivesUpOpeningItsChannelAtTheDeadlineAndConsumesOnceTheBrokerAnswers(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	pub := env.Publisher(t)
	c := env.Config
	proxy := testkit.NewAMQPProxy(t)
	owner := broker.New(testkit.Logger(t), broker.Config{URL: proxy.Through(t, c.AMQPURL), ChannelTimeout: 300 * time.Millisecond,
		Topology: broker.Topology{RelayExchange: c.RelayExchange, RelayQueue: c.RelayQueue, DeadExchange: c.DeadExchange, DeadQueue: c.DeadQueue}})
	if err := owner.Start(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the consumer's
		if err := owner.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err := owner.WaitConnected(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	proxy.HoldReplies()
	ls := &scripted{attempts: map[string]int{}, answer: func(lanes.Resume, int) lanes.Result {
		return lanes.Result{Kind: lanes.Applied}
	}}
	cons := consumer.New(consumer.Deps{Broker: owner, Lanes: ls, Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t)},
		consumer.Config{Queue: c.RelayQueue, DeadExchange: c.DeadExchange, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	cons.TestSignals.Init()
	if err := cons.Start(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cons.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	err, ok := cons.TestSignals.Disconnected.Wait(10 * time.Second)
	if !ok {
		t.Fatal("the consumer still waits for the broker's answer to its channel 10 s later")
	}
	if fault.Code(err) != fault.Unavailable || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the consumer's channel the broker does not answer: %v, want %s at the deadline", err, fault.Unavailable)
	}
	proxy.ReleaseReplies()
	pub.Publish(relay("r-1"))
	if id := cons.TestSignals.Acked.WaitOrTimeout(t); id != "r-1" {
		t.Fatalf("acked %s, want r-1", id)
	}
}
