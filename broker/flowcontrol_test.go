package broker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/metrics"
)

// within fails the test when done does not answer within 10 s (a bound
// far above the deadlines under test, and far below the heartbeat's 30 s
// that would end a wait otherwise).
func within[T any](t *testing.T, what string, done <-chan T) T {
	t.Helper()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still waits 10 s later", what)
		panic("unreachable")
	}
}

// A broker that stops reading (a resource alarm, a stalled peer): writes
// block once the sockets' buffers are full. Each fails at the write
// deadline, on either connection, and its connection is redialled.
func TestAWriteTheBrokerDoesNotReadFailsAtItsDeadlineAndItsConnectionIsRedialled(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	proxy := testkit.NewAMQPProxy(t)
	o := startWith(t, env, broker.Config{URL: proxy.Through(t, testkit.AMQPURL()),
		ConnectionName: "sutra-test-broker/" + env.Schema, WriteTimeout: 500 * time.Millisecond, PublishChannels: 1})
	connected(t, o)
	// The one confirming channel is open (opening one would wait for the
	// broker's answer instead of a write).
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-0")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// A channel of the consuming connection, which carries the acks.
	ch, err := o.Channel(testkit.Ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	ex := env.Config.OutboxExchange
	msgs := make([]broker.Message, 64) // more than the sockets hold
	for i := range msgs {
		msgs[i] = broker.Message{Exchange: ex, RoutingKey: "nowhere", Publishing: amqp.Publishing{MessageId: fmt.Sprint(i), Body: big}}
	}
	proxy.HoldWrites()
	published := make(chan []error, 1)
	go func() { published <- o.Publish(testkit.Ctx(t), msgs) }()
	wrote := make(chan error, 1)
	go func() {
		for {
			if err := ch.PublishWithContext(testkit.Ctx(t), ex, "nowhere", false, false, amqp.Publishing{Body: big}); err != nil {
				wrote <- err
				return
			}
		}
	}()
	for i, err := range within(t, "a publish the broker does not read", published) {
		if fault.Code(err) != fault.Unavailable {
			t.Fatalf("message %d of a publish the broker does not read: %v, want %s", i, err, fault.Unavailable)
		}
	}
	if err := within(t, "a write on the consuming connection the broker does not read", wrote); err == nil {
		t.Fatal("no error")
	}
	for _, s := range []interface{ WaitOrTimeout(testing.TB) error }{&o.TestSignals.PublishDisconnected, &o.TestSignals.Disconnected} {
		if err := s.WaitOrTimeout(t); err == nil || !strings.Contains(err.Error(), "i/o timeout") {
			t.Errorf("a connection closed by %v, want its write's timeout", err)
		}
	}
	proxy.ReleaseWrites()
	// Both are redialled (the first connections' signals come first).
	for o.TestSignals.PublishConnected.WaitOrTimeout(t) != 2 {
	}
	for o.TestSignals.Connected.WaitOrTimeout(t) != 2 {
	}
	connected(t, o)
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-1")}); errs[0] != nil {
		t.Fatalf("publishing once the broker reads again: %v", errs[0])
	}
}

// The broker blocks the connections that publish when it runs short of
// memory or disk (connection.blocked, sent here by the proxy): the owner is
// not ready, says why, shows it in sutra_broker_blocked, and fails publishes
// at once, sending nothing, until connection.unblocked.
func TestABlockedConnectionMakesTheOwnerNotReadyAndPublishesFailAtOnceUntilUnblocked(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	proxy := testkit.NewAMQPProxy(t)
	m := metrics.New(prometheus.NewRegistry())
	o := startWith(t, env, broker.Config{URL: proxy.Through(t, testkit.AMQPURL()),
		ConnectionName: "sutra-test-broker/" + env.Schema, Metrics: m})
	connected(t, o)
	if err := o.Ready(); err != nil {
		t.Fatalf("Ready = %v before any alarm", err)
	}
	gauges := func(want float64) {
		t.Helper()
		for _, c := range []string{broker.Consuming, broker.Publishing} {
			var g dto.Metric
			if err := m.BrokerBlocked.WithLabelValues(c).Write(&g); err != nil {
				t.Fatal(err)
			}
			if v := g.GetGauge().GetValue(); v != want {
				t.Errorf("sutra_broker_blocked{connection=%q} = %v, want %v", c, v, want)
			}
		}
	}
	gauges(0)
	proxy.SendAMQP(t, testkit.AMQPBlocked("low on memory"))
	for range 2 {
		if b := o.TestSignals.Blocked.WaitOrTimeout(t); !b.Active || b.Reason != "low on memory" {
			t.Fatalf("flow control %+v, want blocked for low memory", b)
		}
	}
	if err := o.Ready(); err == nil || !strings.Contains(err.Error(), "blocks") || !strings.Contains(err.Error(), "low on memory") {
		t.Fatalf("Ready = %v while blocked, want why", err)
	}
	gauges(1)
	err := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-1")})[0]
	if fault.Code(err) != fault.Unavailable || errors.Is(err, broker.ErrUnconfirmed) || !strings.Contains(err.Error(), "low on memory") {
		t.Fatalf("a publish while blocked = %v, want %s at once, nothing sent", err, fault.Unavailable)
	}
	if n, err := o.QueueDepth(env.Config.DeadQueue); err != nil || n != 0 {
		t.Fatalf("dead-letter queue holds %d (%v), want nothing sent", n, err)
	}
	proxy.SendAMQP(t, testkit.AMQPUnblocked())
	for range 2 {
		if b := o.TestSignals.Blocked.WaitOrTimeout(t); b.Active {
			t.Fatalf("flow control %+v, want unblocked", b)
		}
	}
	if err := o.Ready(); err != nil {
		t.Fatalf("Ready = %v once unblocked", err)
	}
	gauges(0)
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-2")}); errs[0] != nil {
		t.Fatalf("publishing once unblocked: %v", errs[0])
	}
}

// Opening a channel waits for the broker's answer: a broker that does not
// give it holds the opener until its deadline, not until the heartbeat
// closes the connection. That holds for the consumer's channel (and its
// set-up) and for the dead-letter count's.
func TestOpeningAChannelGivesUpAtItsDeadline(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	proxy := testkit.NewAMQPProxy(t)
	o := startWith(t, env, broker.Config{URL: proxy.Through(t, testkit.AMQPURL()),
		ConnectionName: "sutra-test-broker/" + env.Schema, ChannelTimeout: 300 * time.Millisecond})
	connected(t, o)
	proxy.HoldReplies()
	opened, counted := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := o.Channel(context.Background(), func(ch *amqp.Channel) error { return ch.Qos(1, 0, false) })
		opened <- err
	}()
	go func() {
		_, err := o.QueueDepth(env.Config.DeadQueue)
		counted <- err
	}()
	for what, done := range map[string]chan error{"opening a channel": opened, "counting a queue": counted} {
		if err := within(t, what+" the broker does not answer", done); fault.Code(err) != fault.Unavailable || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s the broker does not answer = %v, want %s at the deadline", what, err, fault.Unavailable)
		}
	}
	proxy.ReleaseReplies()
	ch, err := o.Channel(testkit.Ctx(t), nil)
	if err != nil {
		t.Fatalf("opening a channel once the broker answers: %v", err)
	}
	ch.Close()
	if _, err := o.QueueDepth(env.Config.DeadQueue); err != nil {
		t.Fatalf("counting a queue once the broker answers: %v", err)
	}
}
