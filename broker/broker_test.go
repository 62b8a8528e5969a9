package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs an owner with the test's topology, named connName on the broker.
func start(t *testing.T, env *testkit.Env, amqpURL, connName string) *broker.Owner {
	t.Helper()
	return startWith(t, env, broker.Config{URL: amqpURL, ConnectionName: connName})
}

// startWith is start with cfg's URL, name and channels.
func startWith(t *testing.T, env *testkit.Env, cfg broker.Config) *broker.Owner {
	t.Helper()
	c := env.Config
	cfg.ReconnectMin, cfg.ReconnectMax = 10*time.Millisecond, 200*time.Millisecond
	cfg.Topology = broker.Topology{
		RelayExchange: c.RelayExchange, RelayQueue: c.RelayQueue, DeadExchange: c.DeadExchange, DeadQueue: c.DeadQueue,
		OutboxExchange: c.OutboxExchange,
	}
	o := broker.New(testkit.Logger(t), cfg)
	o.TestSignals.Init()
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return o
}

// connected waits until both of o's connections are open.
func connected(t *testing.T, o *broker.Owner) {
	t.Helper()
	if err := o.WaitConnected(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// withChannel runs f on a channel of a connection of the test's own.
func withChannel(t *testing.T, f func(ch *amqp.Channel) error) {
	t.Helper()
	conn, err := amqp.Dial(testkit.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := f(ch); err != nil {
		t.Fatal(err)
	}
}

// deadLetter is a message the test topology routes (to the dead-letter queue).
func deadLetter(env *testkit.Env, id string) broker.Message {
	return broker.Message{Exchange: env.Config.DeadExchange, RoutingKey: "x",
		Publishing: amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent, Body: []byte("{}")}}
}

func TestReconnectsAfterTheBrokerClosesTheConnectionAndDeclaresTheTopologyAgain(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	name := "sutra-test-broker/" + env.Schema
	o := start(t, env, testkit.AMQPURL(), name)
	if n := o.TestSignals.Connected.WaitOrTimeout(t); n != 1 {
		t.Fatalf("connection %d, want 1", n)
	}
	connected(t, o)
	outbox := env.Config.OutboxExchange
	withChannel(t, func(ch *amqp.Channel) error { return ch.ExchangeDelete(outbox, false, false) })
	testkit.CloseBrokerConnection(t, name)
	if err := o.TestSignals.Disconnected.WaitOrTimeout(t); err == nil {
		t.Fatal("disconnected without a reason")
	}
	if n := o.TestSignals.Connected.WaitOrTimeout(t); n != 2 {
		t.Fatalf("connection %d, want 2", n)
	}
	withChannel(t, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(outbox, "topic", true, false, false, false, nil)
	})
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-1")}); errs[0] != nil {
		t.Fatalf("publishing after the reconnection: %v", errs[0])
	}
}

func TestRidesOutANetworkOutageAndFailsFastMeanwhile(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	u, _ := url.Parse(testkit.AMQPURL())
	proxy := testkit.NewProxy(t, u.Host)
	o := start(t, env, proxy.Through(t, testkit.AMQPURL()), "sutra-test-broker/"+env.Schema)
	o.TestSignals.Connected.WaitOrTimeout(t)
	connected(t, o)
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-1")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	proxy.Cut()
	o.TestSignals.Disconnected.WaitOrTimeout(t)
	o.TestSignals.Disconnected.WaitOrTimeout(t) // a dial failed too
	if o.Connected() {
		t.Fatal("connected during the outage")
	}
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-2")}); fault.Code(errs[0]) != fault.Unavailable {
		t.Fatalf("publish during the outage = %v, want %s", errs[0], fault.Unavailable)
	}
	if _, err := o.Channel(testkit.Ctx(t), nil); fault.Code(err) != fault.Unavailable {
		t.Fatalf("channel during the outage = %v, want %s", err, fault.Unavailable)
	}
	changed := o.Changed()
	proxy.Restore()
	if n := o.TestSignals.Connected.WaitOrTimeout(t); n != 2 {
		t.Fatalf("connection %d, want 2", n)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed by the reconnection")
	}
	if err := o.WaitConnected(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-3")}); errs[0] != nil {
		t.Fatalf("publishing after the outage: %v", errs[0])
	}
}

func TestAPublishGivesUpAtItsDeadlineAndTellsAMessageSentButNotConfirmedFromOneNeverSent(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	u, _ := url.Parse(testkit.AMQPURL())
	proxy := testkit.NewProxy(t, u.Host)
	// One confirming channel, opened by the first publish: the next is
	// sent at once.
	o := startWith(t, env, broker.Config{URL: proxy.Through(t, testkit.AMQPURL()),
		ConnectionName: "sutra-test-broker/" + env.Schema, PublishChannels: 1})
	connected(t, o)
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-1")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	proxy.HoldReplies() // the broker gets the message; its confirm does not come back
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), 300*time.Millisecond)
	defer cancel()
	errs := o.Publish(ctx, []broker.Message{deadLetter(env, "m-2")})
	if !errors.Is(errs[0], broker.ErrUnconfirmed) || fault.Code(errs[0]) != fault.Unavailable {
		t.Fatalf("a publish whose confirm is held past its deadline = %v, want %v with %s", errs[0], broker.ErrUnconfirmed, fault.Unavailable)
	}
	// The unconfirmed channel was given up: the next publish opens one, and
	// the broker's answer to that is held too. It gives up at its deadline,
	// having sent nothing.
	ctx, cancel = context.WithTimeout(testkit.Ctx(t), 300*time.Millisecond)
	defer cancel()
	next := make(chan error, 1)
	go func() { next <- o.Publish(ctx, []broker.Message{deadLetter(env, "m-3")})[0] }()
	select {
	case err := <-next:
		if fault.Code(err) != fault.Unavailable || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, broker.ErrUnconfirmed) {
			t.Fatalf("a publish whose channel's opening is held past its deadline = %v, want %s at the deadline, not %v",
				err, fault.Unavailable, broker.ErrUnconfirmed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a publish whose channel's opening is held still waits 10 s after its deadline")
	}
	proxy.ReleaseReplies()
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-4")}); errs[0] != nil {
		t.Fatalf("publishing once the replies flow again: %v", errs[0])
	}
}

func TestPublishReportsEachMessageOfABatchConfirmedReturnedOrNacked(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	o := start(t, env, testkit.AMQPURL(), "sutra-test-broker/"+env.Schema)
	ex := env.Config.OutboxExchange
	okQueue, fullQueue := ex+".ok", ex+".full"
	connected(t, o)
	withChannel(t, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(okQueue, false, true, false, false, nil); err != nil {
			return err
		}
		// A queue that holds one message and refuses more: the broker nacks.
		if _, err := ch.QueueDeclare(fullQueue, false, true, false, false,
			amqp.Table{"x-max-length": 1, "x-overflow": "reject-publish"}); err != nil {
			return err
		}
		if err := ch.QueueBind(okQueue, "ok.#", ex, false, nil); err != nil {
			return err
		}
		return ch.QueueBind(fullQueue, "full.#", ex, false, nil)
	})
	t.Cleanup(func() {
		withChannel(t, func(ch *amqp.Channel) error {
			_, _ = ch.QueueDelete(okQueue, false, false, false)
			_, err := ch.QueueDelete(fullQueue, false, false, false)
			return err
		})
	})
	msg := func(id, key string) broker.Message {
		return broker.Message{Exchange: ex, RoutingKey: key, Publishing: amqp.Publishing{MessageId: id, Body: []byte(id)}}
	}
	errs := o.Publish(testkit.Ctx(t), []broker.Message{
		msg("a", "ok.1"), msg("b", "nowhere"), msg("c", "ok.2"), msg("d", "full.1"), msg("e", "full.2"),
	})
	want := []error{nil, broker.ErrReturned, nil, nil, broker.ErrNacked}
	for i, err := range errs {
		if (want[i] == nil) != (err == nil) || want[i] != nil && !errors.Is(err, want[i]) {
			t.Errorf("message %d: %v, want %v", i, err, want[i])
		}
	}
	var depth int
	withChannel(t, func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(okQueue, false, true, false, false, nil)
		depth = q.Messages
		return err
	})
	if depth != 2 {
		t.Errorf("%d messages routed, want the 2 confirmed", depth)
	}
	// The next batch on the same channel is not confused by the last one's returns.
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{msg("b", "ok.3")}); errs[0] != nil {
		t.Errorf("the next batch: %v", errs[0])
	}
}

func TestConcurrentPublishesEachGetTheirOwnReturns(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	o := start(t, env, testkit.AMQPURL(), "sutra-test-broker/"+env.Schema)
	connected(t, o)
	ex := env.Config.OutboxExchange
	queue := ex + ".ok"
	withChannel(t, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(queue, false, true, false, false, nil); err != nil {
			return err
		}
		return ch.QueueBind(queue, "ok", ex, false, nil)
	})
	t.Cleanup(func() {
		withChannel(t, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(queue, false, false, false); return err })
	})
	// More callers than channels, each with its own returned messages.
	const callers, each = 12, 50
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			msgs := make([]broker.Message, each)
			for i := range msgs {
				key := "ok"
				if (i+c)%3 == 0 {
					key = "nowhere"
				}
				msgs[i] = broker.Message{Exchange: ex, RoutingKey: key,
					Publishing: amqp.Publishing{MessageId: fmt.Sprintf("%d-%d", c, i), Body: []byte("x")}}
			}
			for i, err := range o.Publish(testkit.Ctx(t), msgs) {
				if returned := msgs[i].RoutingKey == "nowhere"; returned != errors.Is(err, broker.ErrReturned) || !returned && err != nil {
					t.Errorf("caller %d message %d (%s): %v", c, i, msgs[i].RoutingKey, err)
				}
			}
		})
	}
	wg.Wait()
}

// Not parallel: it compares the goroutines before and after.
func TestStopClosesEverythingAndLeavesNoGoroutine(t *testing.T) {
	env := testkit.New(t)
	before := goleak.IgnoreCurrent()
	name := "sutra-test-broker/" + env.Schema
	o := broker.New(testkit.Logger(t), broker.Config{URL: testkit.AMQPURL(), ConnectionName: name,
		Topology: broker.Topology{DeadExchange: env.Config.DeadExchange, DeadQueue: env.Config.DeadQueue}})
	o.TestSignals.Init()
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	connected(t, o)
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-0")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// Each connection is closed by the broker once and redialled: what the
	// first ones had leaves nothing behind either.
	testkit.CloseBrokerConnection(t, name)
	testkit.CloseBrokerConnection(t, name+"/publish")
	for o.TestSignals.Connected.WaitOrTimeout(t) != 2 {
	}
	for o.TestSignals.PublishConnected.WaitOrTimeout(t) != 2 {
	}
	connected(t, o)
	ch, err := o.Channel(testkit.Ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-1")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := o.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-closed // the consumer's channel closed with the connection
	if err := o.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-2")}); fault.Code(errs[0]) != fault.Unavailable {
		t.Fatalf("publish after Stop = %v", errs[0])
	}
	if err := o.WaitConnected(testkit.Ctx(t)); fault.Code(err) != fault.Unavailable {
		t.Fatalf("WaitConnected after Stop = %v", err)
	}
	goleak.VerifyNone(t, before)
}

func TestConnectsToTheFirstNodeThatAnswersAndToTheNextOnceItsConnectionIsLost(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	u, _ := url.Parse(testkit.AMQPURL())
	down, a, b := testkit.NewProxy(t, u.Host), testkit.NewProxy(t, u.Host), testkit.NewProxy(t, u.Host)
	down.Cut() // a node that does not answer, listed first
	list := down.Through(t, testkit.AMQPURL()) + "," + a.Through(t, testkit.AMQPURL()) + ", " + b.Through(t, testkit.AMQPURL())
	o := start(t, env, list, "sutra-test-broker/"+env.Schema)
	if n := o.TestSignals.Connected.WaitOrTimeout(t); n != 1 {
		t.Fatalf("connection %d, want 1", n)
	}
	connected(t, o)
	if failed := o.TestSignals.Disconnected.Drain(); len(failed) != 0 {
		t.Fatalf("the first attempt failed (%v) although a listed node answered", failed)
	}
	// a serves; with a gone (and the first node still down) only b is left.
	a.Cut()
	o.TestSignals.Disconnected.WaitOrTimeout(t)
	if n := o.TestSignals.Connected.WaitOrTimeout(t); n != 2 {
		t.Fatalf("connection %d, want 2", n)
	}
	connected(t, o)
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-1")}); errs[0] != nil {
		t.Fatalf("publishing through the next node: %v", errs[0])
	}
	// b goes too: the owner goes round the list, with its backoff, until a
	// node answers again.
	b.Cut()
	o.TestSignals.Disconnected.WaitOrTimeout(t)
	o.TestSignals.Disconnected.WaitOrTimeout(t) // a round of dials failed
	a.Restore()
	if n := o.TestSignals.Connected.WaitOrTimeout(t); n != 3 {
		t.Fatalf("connection %d, want 3", n)
	}
	connected(t, o)
	if errs := o.Publish(testkit.Ctx(t), []broker.Message{deadLetter(env, "m-2")}); errs[0] != nil {
		t.Fatalf("publishing once a node is back: %v", errs[0])
	}
}

func TestNodesRefusesAListThatMixesVirtualHostsOrCredentials(t *testing.T) {
	t.Parallel()
	for list, want := range map[string]string{
		"amqp://u:p@h1:5672/ha,amqp://u:p@h2:5672/other": "virtual host",
		"amqp://u:p@h1:5672/ha,amqp://v:p@h2:5672/ha":    "credentials",
		"amqp://u:p@h1:5672/ha,amqp://u:q@h2:5672/ha":    "credentials",
		"amqp://u:p@h1:5672/ha,,amqp://u:p@h2:5672/ha":   "empty",
		"amqp://u:p@h1:5672/ha,http://h2/":               "URL 2",
	} {
		if _, err := broker.Nodes(list); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Nodes(%q) = %v, want an error saying %q", list, err, want)
		}
	}
	nodes, err := broker.Nodes("amqp://u:p@h1:5681/ha, amqp://u:p@h2:5682/ha,amqp://u:p@h3:5683/ha")
	if err != nil || len(nodes) != 3 || nodes[1] != "amqp://u:p@h2:5682/ha" {
		t.Fatalf("Nodes of a cluster's three URLs = %q, %v", nodes, err)
	}
}
