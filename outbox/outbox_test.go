package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/outbox"
	"github.com/sutra-run/worker/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bench is one test's database, outbox exchange and downstream consumer.
type bench struct {
	env  *testkit.Env
	st   *store.Store
	down *downstream
}

func newBench(t *testing.T, bindingKeys ...string) *bench {
	t.Helper()
	env := testkit.New(t)
	st, err := store.Open(testkit.Ctx(t), env.Config.DatabaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if len(bindingKeys) == 0 {
		bindingKeys = []string{"#"}
	}
	return &bench{env: env, st: st, down: newDownstream(t, env.Config.OutboxExchange, bindingKeys...)}
}

// replica is one replica's publisher and its broker connection.
type replica struct {
	name  string
	owner *broker.Owner
	pub   *outbox.Publisher
	m     *metrics.Metrics
	// stopped: the test stopped the publisher itself.
	stopped bool
}

// stop stops the publisher within ctx's deadline.
func (r *replica) stop(ctx context.Context) error {
	r.stopped = true
	return r.pub.Stop(ctx)
}

// publisher starts a publisher named name on its own broker connection;
// wrap, when set, puts a fault injector between the two.
func (b *bench) publisher(t *testing.T, name, amqpURL string, cfg outbox.Config, wrap func(*broker.Owner) outbox.Broker) *replica {
	t.Helper()
	return b.publisherOn(t, name, broker.Config{URL: amqpURL}, cfg, wrap, nil)
}

// publisherOn is publisher on a broker connection of bcfg (its URL and
// channels; the test sets the rest), on clk (nil: the system's).
func (b *bench) publisherOn(t *testing.T, name string, bcfg broker.Config, cfg outbox.Config, wrap func(*broker.Owner) outbox.Broker,
	clk clock.Clock) *replica {
	t.Helper()
	bcfg.ConnectionName, bcfg.ReconnectMin, bcfg.ReconnectMax = "sutra-test-outbox/"+name, 10*time.Millisecond, 100*time.Millisecond
	bcfg.Topology = broker.Topology{OutboxExchange: b.env.Config.OutboxExchange}
	owner := broker.New(testkit.Logger(t), bcfg)
	owner.TestSignals.Init()
	if err := owner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var brk outbox.Broker = owner
	if wrap != nil {
		brk = wrap(owner)
	}
	cfg.Replica, cfg.Exchange = name, b.env.Config.OutboxExchange
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	m := metrics.New(prometheus.NewRegistry())
	pub := outbox.New(outbox.Deps{Store: b.st, Broker: brk, Metrics: m, Logger: testkit.Logger(t), Clock: clk}, cfg)
	pub.TestSignals.Init()
	if err := pub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, owner: owner, pub: pub, m: m}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := pub.Stop(ctx); err != nil && !r.stopped {
			t.Errorf("stopping publisher %s: %v", name, err)
		}
		if err := owner.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return r
}

// commit writes one step's outbox rows for instance inst in one transaction,
// as the step commit does, and returns their ids in commit order.
func (b *bench) commit(t *testing.T, inst string, step, rows int, name func(row int) string) []string {
	t.Helper()
	ctx := testkit.Ctx(t)
	tx, err := b.env.DB.Begin(ctx)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer tx.Rollback(ctx)
	var ids []string
	for r := range rows {
		id := fmt.Sprintf("%s/%d/el%d/t1", inst, step, r)
		vars, _ := json.Marshal(map[string]any{"step": step, "row": r})
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, instance_id, element_id, message_name, correlation_key, variables)
			VALUES ($1, $2, $3, $4, $5, $6)`, id, inst, fmt.Sprintf("el%d", r), name(r), inst, vars); err != nil {
			t.Error(err)
			return nil
		}
		ids = append(ids, id)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Error(err)
		return nil
	}
	return ids
}

// workload commits steps×rows rows for each of n instances, the instances
// concurrently and each one's steps in order from step first, waking wake(i)
// after each commit of instance i. It returns every id written.
func (b *bench) workload(t *testing.T, n, first, steps, rows int, wake func(i int)) []string {
	t.Helper()
	var mu sync.Mutex
	var all []string
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			inst := fmt.Sprintf("i-%d", i)
			for s := first; s < first+steps; s++ {
				ids := b.commit(t, inst, s, rows, func(int) string { return "m." + inst })
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
				wake(i)
			}
		})
	}
	wg.Wait()
	return all
}

// commitOrder is every class's row ids in seq order, by instance and
// target ("x/outbox", "x/relay").
func (b *bench) commitOrder(t *testing.T) map[string][]string {
	t.Helper()
	rows, err := b.env.DB.Query(testkit.Ctx(t), "SELECT instance_id || '/' || target, id FROM outbox ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var class, id string
		if err := rows.Scan(&class, &id); err != nil {
			t.Fatal(err)
		}
		out[class] = append(out[class], id)
	}
	return out
}

// relay commits one relay row (target relay) of instance inst, routed with
// key, as a task outcome's transaction does, and returns its id.
func (b *bench) relay(t *testing.T, inst, id, key string) string {
	t.Helper()
	if _, err := b.env.DB.Exec(testkit.Ctx(t), `INSERT INTO outbox (id, instance_id, message_name, target, routing_key, body)
		VALUES ($1, $2, 'relay', 'relay', $3, '{}')`, id, inst, key); err != nil {
		t.Fatal(err)
	}
	return id
}

// downstream is a consumer bound to the outbox exchange that keeps every
// delivery.
type downstream struct {
	t          *testing.T
	ch         *amqp.Channel
	queue      string
	deliveries <-chan amqp.Delivery
	got        []amqp.Delivery
}

func newDownstream(t *testing.T, exchange string, keys ...string) *downstream {
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
	if err := ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &downstream{t: t, ch: ch, queue: q.Name}
	for _, k := range keys {
		d.bind(exchange, k)
	}
	if d.deliveries, err = ch.Consume(q.Name, "", true, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *downstream) bind(exchange, key string) {
	d.t.Helper()
	if err := d.ch.QueueBind(d.queue, key, exchange, false, nil); err != nil {
		d.t.Fatal(err)
	}
}

// barrier returns every delivery so far: it sends a marker through the
// queue and reads up to it, so everything the broker confirmed before is in.
func (d *downstream) barrier() []amqp.Delivery {
	d.t.Helper()
	marker := fmt.Sprintf("barrier-%d", time.Now().UnixNano())
	if err := d.ch.Publish("", d.queue, false, false, amqp.Publishing{MessageId: marker}); err != nil {
		d.t.Fatal(err)
	}
	d.read(func(m amqp.Delivery) bool { return m.MessageId == marker })
	return d.got
}

// waitFor reads deliveries until every id in ids has come at least once.
func (d *downstream) waitFor(ids []string) {
	d.t.Helper()
	missing := map[string]bool{}
	for _, id := range ids {
		missing[id] = true
	}
	for _, m := range d.got {
		delete(missing, m.MessageId)
	}
	if len(missing) == 0 {
		return
	}
	d.read(func(m amqp.Delivery) bool {
		delete(missing, m.MessageId)
		return len(missing) == 0
	})
}

// read keeps deliveries (but not barrier markers) until stop says so; the
// test fails after 30s.
func (d *downstream) read(stop func(amqp.Delivery) bool) {
	d.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case m, ok := <-d.deliveries:
			if !ok {
				d.t.Fatal("downstream consumer closed")
			}
			if !isBarrier(m) {
				d.got = append(d.got, m)
			}
			if stop(m) {
				return
			}
		case <-deadline.C:
			d.t.Fatalf("downstream: waited 30s; %d deliveries so far", len(d.got))
		}
	}
}

func isBarrier(m amqp.Delivery) bool { return len(m.MessageId) > 8 && m.MessageId[:8] == "barrier-" }

// firsts is the first delivery of every message id, in delivery order, and
// how many times each id was delivered.
func firsts(got []amqp.Delivery) (order []amqp.Delivery, count map[string]int) {
	count = map[string]int{}
	for _, m := range got {
		if count[m.MessageId]++; count[m.MessageId] == 1 {
			order = append(order, m)
		}
	}
	return order, count
}

// assertCommitOrder checks that every class's messages (commitOrder) were
// first delivered in commit order, and every row was delivered.
func assertCommitOrder(t *testing.T, got []amqp.Delivery, want map[string][]string) {
	t.Helper()
	classOf := map[string]string{}
	for class, ids := range want {
		for _, id := range ids {
			classOf[id] = class
		}
	}
	order, _ := firsts(got)
	per := map[string][]string{}
	for _, m := range order {
		per[classOf[m.MessageId]] = append(per[classOf[m.MessageId]], m.MessageId)
	}
	for class, ids := range want {
		if !slices.Equal(per[class], ids) {
			t.Errorf("%s: first deliveries %v, want commit order %v", class, per[class], ids)
		}
	}
}

// assertAllPublished checks that no row is left unpublished.
func (b *bench) assertAllPublished(t *testing.T) {
	t.Helper()
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE published_at IS NULL"); n != 0 {
		t.Errorf("%d rows not marked published", n)
	}
}

// allPublishedInCommitOrder waits until every id was delivered, stops the
// publishers reps, checks that every row was marked published, and that
// each instance's rows came in commit order.
func (b *bench) allPublishedInCommitOrder(t *testing.T, ids []string, reps ...*replica) {
	t.Helper()
	b.down.waitFor(ids)
	b.settled(t, reps...)
	assertCommitOrder(t, b.down.barrier(), b.commitOrder(t))
}

// settled stops the publishers reps, whose batches in flight settle as they
// stop, and checks that every row is marked published: once delivered, a
// row is marked by the batch that sent it.
func (b *bench) settled(t *testing.T, reps ...*replica) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), 10*time.Second)
	defer cancel()
	for _, r := range reps {
		if err := r.stop(ctx); err != nil {
			t.Fatalf("stopping publisher %s: %v", r.name, err)
		}
	}
	b.assertAllPublished(t)
}

// lapse ends owner's leases now: the database's clock, which leases are on,
// passes them.
func (b *bench) lapse(t *testing.T, owner string) {
	t.Helper()
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "UPDATE outbox SET locked_until = now() - interval '1 millisecond' WHERE locked_by = $1",
		owner); err != nil {
		t.Fatal(err)
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestEveryRowIsPublishedOncePerConfirmInCommitOrderPerInstance(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	// Small batches: instances span batches, and a batch holds several
	// rows of one instance (waves).
	r := b.publisher(t, "r1", testkit.AMQPURL(), outbox.Config{BatchSize: 16}, nil)
	ids := b.workload(t, 12, 1, 5, 3, func(int) { r.pub.Wake() })
	b.down.waitFor(ids)
	b.settled(t, r)
	got := b.down.barrier()
	_, count := firsts(got)
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, count[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("%d deliveries, want %d", len(got), len(ids))
	}
	assertCommitOrder(t, got, b.commitOrder(t))
	m := got[0]
	var body map[string]any
	if err := json.Unmarshal(m.Body, &body); err != nil {
		t.Fatal(err)
	}
	inst := m.Headers[outbox.HeaderInstanceID]
	if m.ContentType != "application/json" || m.DeliveryMode != amqp.Persistent || m.RoutingKey != "m."+inst.(string) ||
		m.Headers[outbox.HeaderElementID] != "el0" || body["message"] != m.RoutingKey || body["correlation_key"] != inst ||
		body["variables"].(map[string]any)["row"] != 0.0 {
		t.Errorf("message %+v, body %v", m, body)
	}
	if n := counter(t, r.m.OutboxPublished); n != float64(len(ids)) {
		t.Errorf("sutra_outbox_published_total = %v, want %d", n, len(ids))
	}
	var lag dto.Metric
	if err := r.m.OutboxLag.Write(&lag); err != nil || lag.GetHistogram().GetSampleCount() != uint64(len(ids)) {
		t.Errorf("lag samples = %d, %v", lag.GetHistogram().GetSampleCount(), err)
	}
}

// auditLeasesSQL records every lease taken from a live holder (a row
// leased by one publisher while another's lease on it had not lapsed), and
// every lease of a row while another row of its class was in a live batch
// (another lease statement: each gives its rows one locked_until).
const auditLeasesSQL = `
CREATE TABLE lease_audit (id text, old_holder text, new_holder text);
CREATE TABLE batch_audit (id text, other text);
CREATE FUNCTION lease_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.locked_by IS NOT NULL AND OLD.locked_by IS NOT NULL AND NEW.locked_by <> OLD.locked_by
       AND OLD.locked_until >= now() THEN
        INSERT INTO lease_audit VALUES (NEW.id, OLD.locked_by, NEW.locked_by);
    END IF;
    IF NEW.locked_by IS NOT NULL AND NEW.locked_until IS DISTINCT FROM OLD.locked_until THEN
        INSERT INTO batch_audit SELECT NEW.id, e.id FROM outbox e
         WHERE e.instance_id = NEW.instance_id AND e.target = NEW.target AND e.id <> NEW.id AND e.published_at IS NULL
           AND e.locked_by IS NOT NULL AND e.locked_until >= now() AND e.locked_until <> NEW.locked_until;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER lease_audit BEFORE UPDATE ON outbox FOR EACH ROW EXECUTE FUNCTION lease_audit();`

func TestTwoReplicasNeverPublishOneRowAtOnceAndKeepCommitOrder(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	if _, err := b.env.DB.Exec(testkit.Ctx(t), auditLeasesSQL); err != nil {
		t.Fatal(err)
	}
	cfg := outbox.Config{BatchSize: 8}
	reps := []*replica{
		b.publisher(t, "a", testkit.AMQPURL(), cfg, nil),
		b.publisher(t, "b", testkit.AMQPURL(), cfg, nil),
	}
	// Each instance lives on one replica, whose commits wake its publisher;
	// the other finds the rows by polling.
	ids := b.workload(t, 16, 1, 6, 2, func(i int) { reps[i%2].pub.Wake() })
	b.down.waitFor(ids)
	b.settled(t, reps...)
	got := b.down.barrier()
	_, count := firsts(got)
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("%s delivered %d times, want once: two publishers sent it", id, count[id])
		}
	}
	assertCommitOrder(t, got, b.commitOrder(t))
	if n := b.env.Int(t, "SELECT count(*) FROM lease_audit"); n != 0 {
		t.Errorf("%d leases taken from a live holder", n)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM batch_audit"); n != 0 {
		t.Errorf("%d rows leased while another row of their class was in a live batch", n)
	}
	for _, r := range reps {
		if counter(t, r.m.OutboxPublished) == 0 {
			t.Errorf("replica %s published nothing: the test did not race two publishers", r.name)
		}
	}
}

// injector sits between a publisher and its broker owner and runs before
// before every Publish (the n-th call is n), to time a fault.
type injector struct {
	*broker.Owner
	calls  atomic.Int32
	before func(ctx context.Context, n int)
}

func (i *injector) Publish(ctx context.Context, msgs []broker.Message) []error {
	i.before(ctx, int(i.calls.Add(1)))
	return i.Owner.Publish(ctx, msgs)
}

func noWake(int) {}

func TestABrokerOutageMidBatchLosesNothingAndRowsWaitMeanwhile(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	u, _ := url.Parse(testkit.AMQPURL())
	proxy := testkit.NewProxy(t, u.Host)
	// Written first, so that the first batch holds every row: eight
	// instances of eight rows, eight waves.
	ids := b.workload(t, 8, 1, 4, 2, noWake)
	r := b.publisher(t, "r1", proxy.Through(t, testkit.AMQPURL()), outbox.Config{BatchSize: 64, Batches: 1},
		func(o *broker.Owner) outbox.Broker {
			return &injector{Owner: o, before: func(_ context.Context, n int) {
				if n == 3 {
					proxy.Cut() // the third wave meets the outage
				}
			}}
		})
	s := r.pub.TestSignals.Settled.WaitOrTimeout(t)
	if len(s.Published) != 16 || len(s.Released) != 48 || len(s.Deferred) != 0 {
		t.Fatalf("first batch: %d published, %d handed back, %d deferred; want 16, 48, 0",
			len(s.Published), len(s.Released), len(s.Deferred))
	}
	r.owner.TestSignals.Disconnected.WaitOrTimeout(t)
	// Steps commit on during the outage: their rows wait.
	ids = append(ids, b.workload(t, 8, 5, 1, 1, func(int) { r.pub.Wake() })...)
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE published_at IS NULL"); n != 48+8 {
		t.Fatalf("backlog during the outage = %d, want %d", n, 48+8)
	}
	if n := counter(t, r.m.OutboxPublishErrors.WithLabelValues(metrics.PublishUnavailable)); n == 0 {
		t.Error("no publish error counted as unavailable")
	}
	proxy.Restore()
	b.allPublishedInCommitOrder(t, ids, r)
}

func TestARowSentButNotConfirmedByTheBatchDeadlineStaysLeasedSoNoOtherPublisherSendsItMeanwhile(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	u, _ := url.Parse(testkit.AMQPURL())
	proxy := testkit.NewProxy(t, u.Host)
	warm := b.commit(t, "w", 1, 1, func(int) string { return "m.w" })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// One confirming channel, opened by the first publish: the second
	// reaches the broker, and its confirm does not come back.
	r := b.publisherOn(t, "r1", broker.Config{URL: proxy.Through(t, testkit.AMQPURL()), PublishChannels: 1},
		outbox.Config{Lease: time.Minute, Batches: 1, PollInterval: time.Hour},
		func(o *broker.Owner) outbox.Broker {
			return &injector{Owner: o, before: func(_ context.Context, n int) {
				if n == 2 {
					proxy.HoldReplies()
				}
			}}
		}, clk)
	if s := r.pub.TestSignals.Settled.WaitOrTimeout(t); !slices.Equal(s.Published, warm) {
		t.Fatalf("first batch settled %+v, want %v published", s, warm)
	}
	ids := b.commit(t, "x", 1, 2, func(int) string { return "m.x" })
	r.pub.Wake()
	// The broker routed x's first row: it was sent. Its batch's deadline
	// (two thirds of the lease) passes before the confirm comes.
	b.down.waitFor(ids[:1])
	clk.Advance(time.Minute)
	s := r.pub.TestSignals.Settled.WaitOrTimeout(t)
	if len(s.Published) != 0 || !slices.Equal(s.Released, ids[1:]) {
		t.Fatalf("settlement at the deadline: %+v; want only %s, never sent, handed back", s, ids[1])
	}
	var holder *string
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT locked_by FROM outbox WHERE id = $1", ids[0]).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if holder == nil || *holder != "r1" {
		t.Fatalf("row %s, sent and unconfirmed, is held by %v after the deadline, want still by r1 (handed back, another publisher sends a second copy beside the first)", ids[0], holder)
	}
	proxy.ReleaseReplies()
	// Another replica leases nothing of x while r1's lease lives, and both
	// rows once it lapsed.
	r2 := b.publisher(t, "r2", testkit.AMQPURL(), outbox.Config{PollInterval: time.Hour}, nil)
	if n := r2.pub.TestSignals.Leased.WaitOrTimeout(t); n != 0 {
		t.Fatalf("r2 leased %d rows while r1's lease of the unconfirmed %s lives", n, ids[0])
	}
	b.lapse(t, "r1")
	r2.pub.Wake()
	b.allPublishedInCommitOrder(t, append(warm, ids...), r, r2)
	if _, count := firsts(b.down.barrier()); count[ids[0]] != 2 {
		t.Errorf("%s delivered %d times, want twice (r1's unconfirmed copy, then r2's)", ids[0], count[ids[0]])
	}
}

func TestAPublisherThatDiesMidBatchLeavesItsRowsToAnotherOnlyOnceItsLeaseLapses(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	ids := b.workload(t, 4, 1, 3, 1, noWake)
	frozen, thaw := make(chan struct{}), make(chan struct{})
	// The dead replica's clock never moves: its batch never reaches its
	// deadline, and it holds its lease until the database's clock passes it.
	b.publisherOn(t, "dead", broker.Config{URL: testkit.AMQPURL()}, outbox.Config{Lease: time.Minute, PollInterval: time.Hour, Batches: 1},
		func(o *broker.Owner) outbox.Broker {
			return &injector{Owner: o, before: func(_ context.Context, n int) {
				if n == 2 { // after its first wave was confirmed, it never answers again
					close(frozen)
					<-thaw
				}
			}}
		}, clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	t.Cleanup(func() { close(thaw) }) // runs before the dead publisher's stop
	<-frozen
	live := b.publisher(t, "live", testkit.AMQPURL(), outbox.Config{PollInterval: time.Hour}, nil)
	if n := live.pub.TestSignals.Leased.WaitOrTimeout(t); n != 0 {
		t.Fatalf("live leased %d rows while the dead replica's lease lives", n)
	}
	b.lapse(t, "dead")
	live.pub.Wake()
	b.allPublishedInCommitOrder(t, ids, live)
	// The dead replica's first wave was confirmed but never marked: it is
	// published again (at least once; consumers dedupe by message id).
	_, count := firsts(b.down.barrier())
	for i := range 4 {
		if id := fmt.Sprintf("i-%d/1/el0/t1", i); count[id] != 2 {
			t.Errorf("%s delivered %d times, want twice (once per replica)", id, count[id])
		}
	}
}

func TestAStoppedPublisherHandsItsBatchBackAtItsDeadline(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	ids := b.workload(t, 4, 1, 2, 1, noWake)
	blocked := make(chan struct{})
	// A broker that never confirms the first batch: the publisher holds it
	// until its stop's deadline.
	a := b.publisher(t, "a", testkit.AMQPURL(), outbox.Config{Lease: time.Minute, Batches: 1}, func(o *broker.Owner) outbox.Broker {
		return &injector{Owner: o, before: func(ctx context.Context, n int) {
			if n == 1 {
				close(blocked)
				<-ctx.Done()
			}
		}}
	})
	<-blocked
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v, want a hard stop at the deadline", err)
	}
	s := a.pub.TestSignals.Settled.WaitOrTimeout(t)
	if len(s.Released) != len(ids) || len(s.Published) != 0 {
		t.Fatalf("settlement at the stop: %+v, want all %d rows handed back", s, len(ids))
	}
	// Another replica publishes them now, not a lease (a minute) later.
	r := b.publisher(t, "b", testkit.AMQPURL(), outbox.Config{Lease: time.Minute, PollInterval: time.Hour}, nil)
	b.down.waitFor(ids)
	b.settled(t, r)
}

func TestReturnedRowsAreRetriedWithBackoffAndOnlyTheLaterRowsOfTheirClassWaitBehind(t *testing.T) {
	t.Parallel()
	b := newBench(t, "ok.#") // nothing is bound for "held.#" yet
	x := b.commit(t, "x", 1, 1, func(int) string { return "held.x" })
	x = append(x, b.commit(t, "x", 2, 2, func(int) string { return "ok.x" })...)
	var relays []string
	y := b.commit(t, "y", 1, 2, func(int) string { return "ok.y" })
	const base, limit = 50 * time.Millisecond, 400 * time.Millisecond
	r := b.publisher(t, "r1", testkit.AMQPURL(), outbox.Config{Backoff: base, BackoffMax: limit, PollInterval: 10 * time.Millisecond,
		MaxAttempts: 1000, RelayExchange: b.env.Config.OutboxExchange}, nil)
	for n := 1; n <= 4; {
		s := r.pub.TestSignals.Settled.WaitOrTimeout(t)
		for _, id := range s.Published {
			if slices.Contains(x, id) {
				t.Fatalf("%s published while %s was returned", id, x[0])
			}
		}
		for _, d := range s.Deferred {
			if d.ID != x[0] {
				t.Fatalf("deferred %s", d.ID)
			}
			// Doubled per attempt up to the limit, ±20% jitter.
			want := min(base<<(n-1), limit)
			if d.Delay < want*8/10 || d.Delay > want*12/10 {
				t.Errorf("attempt %d deferred by %s, want about %s", n, d.Delay, want)
			}
			n++
		}
		if n == 2 && relays == nil {
			// Relays of x the worker sends itself (task outcomes), written
			// while x's message backs off: another class, they go.
			relays = []string{b.relay(t, "x", "x/outcome/1", "ok.x"), b.relay(t, "x", "x/outcome/2", "ok.x")}
			r.pub.Wake()
		}
	}
	b.down.waitFor(append(y, relays...))
	if n := counter(t, r.m.OutboxPublishErrors.WithLabelValues(metrics.PublishReturned)); n < 4 {
		t.Errorf("%v returned publishes counted, want at least 4", n)
	}
	if n := b.env.Int(t, "SELECT attempts FROM outbox WHERE id = $1 AND published_at IS NULL", x[0]); n < 4 {
		t.Errorf("attempts = %d, want at least 4, and the row unpublished", n)
	}
	// An operator binds a queue for the message: it goes, then the rows behind it.
	b.down.bind(b.env.Config.OutboxExchange, "held.#")
	b.allPublishedInCommitOrder(t, x, r)
}

// parkedRow is a row of outbox_parked.
type parkedRow struct {
	code, reason string
	attempts     int
}

func (b *bench) parked(t *testing.T, id string) (parkedRow, bool) {
	t.Helper()
	var p parkedRow
	err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT code, reason, attempts FROM outbox_parked WHERE id = $1", id).Scan(&p.code, &p.reason, &p.attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return p, true
}

func TestAMessageReturnedOnEveryAttemptIsParkedWithItsCodeAndNoLongerHoldsTheRowsBehindIt(t *testing.T) {
	t.Parallel()
	b := newBench(t, "ok.#") // nothing is bound for "held.#" yet
	x := b.commit(t, "x", 1, 1, func(int) string { return "held.x" })
	x = append(x, b.commit(t, "x", 2, 1, func(int) string { return "ok.x" })...)
	z := b.commit(t, "z", 1, 1, func(int) string { return "held.z" })
	// The worker's own relay, unroutable too: retried, never parked.
	rel := b.relay(t, "y", "y/outcome/1", "held.y")
	const attempts = 3
	r := b.publisher(t, "r1", testkit.AMQPURL(), outbox.Config{Backoff: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		PollInterval: 10 * time.Millisecond, MaxAttempts: attempts, RelayExchange: b.env.Config.OutboxExchange}, nil)
	var parked []string
	for n := 0; len(parked) < 2; n++ {
		if n == 200 {
			t.Fatalf("parked %v in %d settlements; want %s and %s after %d attempts each", parked, n, x[0], z[0], attempts)
		}
		s := r.pub.TestSignals.Settled.WaitOrTimeout(t)
		for _, p := range s.Parked {
			if p.Code != fault.OutboxUnroutable {
				t.Errorf("%s parked with %q", p.ID, p.Code)
			}
			parked = append(parked, p.ID)
		}
	}
	slices.Sort(parked)
	if want := []string{x[0], z[0]}; !slices.Equal(parked, want) {
		t.Fatalf("parked %v, want %v", parked, want)
	}
	// x's next message is no longer held.
	b.down.waitFor(x[1:])
	for _, id := range parked {
		p, ok := b.parked(t, id)
		if !ok || p.code != fault.OutboxUnroutable || p.attempts != attempts || !strings.Contains(p.reason, "NO_ROUTE") {
			t.Errorf("%s parked %v as %+v, want %s after %d attempts, the broker's NO_ROUTE", id, ok, p, fault.OutboxUnroutable, attempts)
		}
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE id = ANY($1)", parked); n != 0 {
		t.Errorf("%d parked rows left in the outbox", n)
	}
	if n := counter(t, r.m.OutboxParked); n != 2 {
		t.Errorf("sutra_outbox_parked_total = %v, want 2", n)
	}
	if c, err := b.st.Census(testkit.Ctx(t)); err != nil || c.OutboxParked != 2 {
		t.Errorf("census counts %d parked rows, %v; want 2", c.OutboxParked, err)
	}
	for b.env.Int(t, "SELECT attempts FROM outbox WHERE id = $1", rel) <= attempts {
		r.pub.TestSignals.Settled.WaitOrTimeout(t) // the relay returned more often than a message is
	}
	if _, ok := b.parked(t, rel); ok {
		t.Fatalf("relay %s parked", rel)
	}

	// The operator lists them, binds a queue, retries x's and discards z's.
	ctx := testkit.Ctx(t)
	list, err := b.st.ListParkedOutbox(ctx, store.ParkedFilter{Limit: 10})
	if err != nil || len(list) != 2 || list[0].ID != x[0] || list[0].Message != "held.x" || list[0].InstanceID != "x" || list[0].Code != fault.OutboxUnroutable {
		t.Fatalf("listed %+v, %v", list, err)
	}
	if list, err := b.st.ListParkedOutbox(ctx, store.ParkedFilter{InstanceID: "z", Limit: 10}); err != nil || len(list) != 1 || list[0].ID != z[0] {
		t.Fatalf("listed %+v, %v for instance z", list, err)
	}
	b.down.bind(b.env.Config.OutboxExchange, "held.#")
	if err := b.st.RetryParkedOutbox(ctx, x[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.st.DiscardParkedOutbox(ctx, z[0]); err != nil {
		t.Fatal(err)
	}
	for _, id := range parked {
		if err := b.st.RetryParkedOutbox(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("retrying %s again: %v, want not found", id, err)
		}
		if err := b.st.DiscardParkedOutbox(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("discarding %s again: %v, want not found", id, err)
		}
	}
	b.down.waitFor(x[:1])
	for marked := false; !marked; {
		marked = slices.Contains(r.pub.TestSignals.Settled.WaitOrTimeout(t).Published, x[0])
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE id = $1 AND published_at IS NOT NULL AND attempts = 0", x[0]); n != 1 {
		t.Errorf("the retried row %s is not marked published with no attempts", x[0])
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox_parked"); n != 0 {
		t.Errorf("%d rows still parked", n)
	}
	for _, m := range b.down.barrier() {
		if m.MessageId == z[0] {
			t.Errorf("discarded %s published", z[0])
		}
	}
}

func TestAPublisherWaitsForTheBrokerAndPublishesOnceConnected(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	u, _ := url.Parse(testkit.AMQPURL())
	proxy := testkit.NewProxy(t, u.Host)
	proxy.Cut() // the broker is unreachable from the start
	r := b.publisher(t, "r1", proxy.Through(t, testkit.AMQPURL()), outbox.Config{}, nil)
	ids := b.workload(t, 2, 1, 2, 1, func(int) { r.pub.Wake() })
	r.owner.TestSignals.Disconnected.WaitOrTimeout(t)
	if r.owner.Connected() {
		t.Fatal("connected through a cut proxy")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE published_at IS NULL OR locked_by IS NOT NULL"); n != int64(len(ids)) {
		t.Fatalf("%d rows waiting, want %d untouched", n, len(ids))
	}
	proxy.Restore()
	b.down.waitFor(ids)
	b.settled(t, r)
	if n := counter(t, r.m.OutboxPublishErrors.WithLabelValues(metrics.PublishUnavailable)); n != 0 {
		t.Errorf("%v publishes tried while disconnected", n)
	}
}

func TestABacklogIsPublishedByBatchesInFlightAtOnce(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	ids := b.workload(t, 40, 1, 1, 1, noWake) // five batches of eight
	third := make(chan struct{})
	r := b.publisher(t, "r1", testkit.AMQPURL(), outbox.Config{BatchSize: 8}, func(o *broker.Owner) outbox.Broker {
		return &injector{Owner: o, before: func(_ context.Context, n int) {
			switch n {
			case 2: // the second batch waits until a third is in flight beside it
				select {
				case <-third:
				case <-time.After(10 * time.Second):
					t.Error("no other batch in flight while the second waited for the broker")
				}
			case 3:
				close(third)
			}
		}}
	})
	b.down.waitFor(ids)
	b.settled(t, r)
}

func TestAnInstancesRowsAreInOneBatchAtATimeEvenOfOnePublisher(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	ids := b.commit(t, "x", 1, 1, func(int) string { return "m.x" })
	ids = append(ids, b.commit(t, "x", 2, 1, func(int) string { return "m.x" })...)
	var r *replica
	ready := make(chan struct{})
	// The first batch comes back full: a second loop leases beside it while
	// it publishes x's first row, and must not take x's second.
	r = b.publisher(t, "r1", testkit.AMQPURL(), outbox.Config{BatchSize: 1, Batches: 2}, func(o *broker.Owner) outbox.Broker {
		return &injector{Owner: o, before: func(_ context.Context, n int) {
			if n != 1 {
				return
			}
			<-ready
			if first, beside := r.pub.TestSignals.Leased.WaitOrTimeout(t), r.pub.TestSignals.Leased.WaitOrTimeout(t); first != 1 || beside != 0 {
				t.Errorf("leased %d, then %d beside it; want %s, then nothing: %s waits until %s is settled", first, beside, ids[0], ids[1], ids[0])
			}
		}}
	})
	close(ready)
	b.allPublishedInCommitOrder(t, ids, r)
}

func TestARestartedReplicaLeasesNothingBehindRowsItsPreviousProcessStillHolds(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	ids := b.commit(t, "x", 1, 1, func(int) string { return "m.x" })
	// The previous process of replica r1, which died, holds x's first row.
	if rows, err := b.st.LeaseOutbox(testkit.Ctx(t), "r1", 1, time.Minute); err != nil || len(rows) != 1 {
		t.Fatalf("leased %v, %v", rows, err)
	}
	ids = append(ids, b.commit(t, "x", 2, 1, func(int) string { return "m.x" })...)
	r := b.publisher(t, "r1", testkit.AMQPURL(), outbox.Config{PollInterval: time.Hour}, nil)
	if n := r.pub.TestSignals.Leased.WaitOrTimeout(t); n != 0 {
		t.Fatalf("leased %d rows behind the row its previous process holds", n)
	}
	b.lapse(t, "r1")
	r.pub.Wake()
	b.allPublishedInCommitOrder(t, ids, r)
}

func TestACommitThroughTheStoreWakesAnIdlePublisher(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	// It polls only in an hour: only the commits' wakes make it lease.
	r := b.publisher(t, "r1", testkit.AMQPURL(), outbox.Config{PollInterval: time.Hour, RelayExchange: b.env.Config.OutboxExchange}, nil)
	if n := r.pub.TestSignals.Leased.WaitOrTimeout(t); n != 0 {
		t.Fatalf("first lease took %d rows of an empty outbox", n)
	}
	b.st.NotifyOutbox(r.pub.Wake)
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			for step := range 5 {
				inst := fmt.Sprintf("i-%d", i)
				id := fmt.Sprintf("%s/%d", inst, step)
				if err := b.st.Forward(testkit.Ctx(t), "in/"+id, inst,
					[]store.RelayOut{{ID: id, InstanceID: inst, RoutingKey: "m." + inst, Body: []byte("{}")}}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.allPublishedInCommitOrder(t, ids, r)
}
