// Package outbox publishes the messages steps write to the outbox table: after
// the commit that wrote them, with publisher confirms, at least once, in
// commit order per instance within a class (the worker's own relays among
// relays, BPMN messages among BPMN messages: store.OutboxRow.Class), and
// marks a row published only once the broker confirmed it.
//
// Every replica runs a publisher. Rows are leased (store.LeaseOutbox: SKIP
// LOCKED plus a lease), so two publishers never publish one row at once, and
// a publisher that dies leaves its rows to the others when the lease lapses.
// Within a batch a class's rows go in waves: the first row of every class,
// wait for the confirms, then the second, … so a row is never sent before
// the one of its class committed before it was confirmed. A returned or
// nacked row backs off, and the later rows of its class wait behind it; a
// BPMN message returned on its MaxAttempts-th publish is parked instead
// (fault.OutboxUnroutable): out of the order, until an operator retries or
// discards it.
//
// A commit of this replica leases the rows it writes to the publisher as it
// writes them, unless a row of another publisher is before them, and hands
// them over (Written, through store.OutboxHandoff): any idle loop publishes
// them without a lease statement. Rows it could not lease wake the lease
// (Wake); rows of other replicas, of dead ones, and rows whose backoff ended
// are found by polling every PollInterval. Under a backlog a publisher runs
// a few batches at once, each leased by its own statement, so that the
// broker's confirm latency does not bound its rate; the lease keeps them
// apart as it keeps replicas apart. A batch may hold a class's rows
// behind rows an earlier batch of the same publisher holds
// (store.OutboxRow.After): it publishes them only once that batch's rows of
// the class were confirmed, and hands them back if they were not (a gate
// per class and batch, chained in the order the rows were leased).
// Without that, a backlog of few instances with many rows each would let
// one batch at a time take them.
package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/backoff"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Headers of every published row.
const (
	HeaderInstanceID = "x-sutra-instance-id"
	HeaderElementID  = "x-sutra-element-id"
)

// Config configures the publisher.
type Config struct {
	// Replica leases rows (locked_by).
	Replica string
	// Exchange receives BPMN messages (default sutra.outbox).
	Exchange string
	// RelayExchange receives the worker's own relays (default sutra.relays).
	RelayExchange string
	// PollInterval bounds how long the publisher goes without looking for
	// rows it was not woken for (default 1s).
	PollInterval time.Duration
	// Lease is how long leased rows are kept from other publishers (default
	// 30s). A batch publishes for at most two thirds of it, so that a row is
	// not published by two replicas at once.
	Lease time.Duration
	// BatchSize is how many rows one statement leases (default 256).
	BatchSize int
	// Batches is how many batches may be in flight at once under a backlog
	// (default 8: with 4 the publisher fell behind steps that each write a
	// message at full load once steps got cheaper, BENCHMARKS.md); without
	// one, one at a time.
	Batches int
	// Backoff is the first delay before a returned or nacked row is tried
	// again; it doubles per attempt up to BackoffMax (defaults 1s, 1m).
	Backoff    time.Duration
	BackoffMax time.Duration
	// MaxAttempts is how many publishes of a BPMN message the broker may
	// return (no queue bound for its name) before it is parked (default 10:
	// about four minutes at the default backoff). The worker's own relays
	// are never parked.
	MaxAttempts int
}

func (c *Config) setDefaults() {
	if c.Exchange == "" {
		c.Exchange = "sutra.outbox"
	}
	if c.RelayExchange == "" {
		c.RelayExchange = "sutra.relays"
	}
	defaults.Set(&c.PollInterval, time.Second)
	defaults.Set(&c.Lease, 30*time.Second)
	defaults.Set(&c.BatchSize, 256)
	defaults.Set(&c.Batches, 8)
	defaults.Set(&c.Backoff, time.Second)
	defaults.Set(&c.BackoffMax, time.Minute)
	defaults.Set(&c.MaxAttempts, 10)
}

// Store is what the publisher needs from the database (*store.Store).
type Store interface {
	LeaseOutbox(ctx context.Context, owner string, limit int, lease time.Duration) ([]store.OutboxRow, error)
	SettleOutbox(ctx context.Context, owner string, s store.OutboxSettlement) error
}

// Broker is what the publisher needs from the connection owner (*broker.Owner).
type Broker interface {
	Connected() bool
	WaitConnected(ctx context.Context) error
	Publish(ctx context.Context, msgs []broker.Message) []error
}

// Deps are the publisher's collaborators.
type Deps struct {
	Store   Store
	Broker  Broker
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// TestSignals tell tests what the publisher did; inert unless Init'ed.
type TestSignals struct {
	// Leased carries the number of rows each lease statement leased.
	Leased testsignal.Signal[int]
	// Settled carries every settlement written (rows published, deferred,
	// handed back, parked).
	Settled testsignal.Signal[store.OutboxSettlement]
	// Waiting carries, each time a batch has nothing to send but rows behind
	// an earlier batch's, how many classes it waits for.
	Waiting testsignal.Signal[int]
}

// Init switches every signal on.
func (s *TestSignals) Init() {
	s.Leased.Init()
	s.Settled.Init()
	s.Waiting.Init()
}

// Publisher publishes outbox rows. Start it once; Stop it once or more.
type Publisher struct {
	startstop.Base
	TestSignals TestSignals

	cfg  Config
	deps Deps
	// wake is signalled by Wake, more by a loop whose lease came back full;
	// one pending signal is enough.
	wake, more chan struct{}

	// leasing serializes the leases and the takes of handed rows, so that
	// gates are chained in the order the rows were leased; gates holds, per
	// class (store.OutboxRow.Class), the gate of the last batch in flight
	// that holds rows of it.
	leasing sync.Mutex
	gates   map[string]*gate
	// confirmed are the gates whose rows were all confirmed that gates
	// still holds, oldest first (unchain).
	confirmed []kept

	// accepting: the loops run, so commits lease their rows to this
	// publisher (Lessee).
	accepting atomic.Bool
	// handMu guards the rows commits leased to this publisher that no loop
	// took yet (handed, signalled on handedCh), the earliest time one of
	// their commits was sent (handedSince), and closed: the loops ended, so
	// rows handed now are handed back at once.
	handMu      sync.Mutex
	handed      []store.OutboxRow
	handedSince time.Time
	handedCh    chan struct{}
	closed      bool
}

// gate says whether one batch's rows of one class were all confirmed (or
// parked): the class's rows leased after them wait for it.
type gate struct {
	done chan struct{}
	ok   bool  // set before done closes
	last int64 // the seq of the batch's last row of the class
}

func newGate() *gate { return &gate{done: make(chan struct{})} }

// resolve records the outcome once; later calls do nothing.
func (g *gate) resolve(ok bool) {
	select {
	case <-g.done:
	default:
		g.ok = ok
		close(g.done)
	}
}

// New builds a publisher.
func New(deps Deps, cfg Config) *Publisher {
	cfg.setDefaults()
	return &Publisher{cfg: cfg, deps: deps, wake: make(chan struct{}, 1), more: make(chan struct{}, 1),
		handedCh: make(chan struct{}, 1), gates: map[string]*gate{}}
}

// Wake tells the publisher that rows were written that it may lease. It
// never blocks.
func (p *Publisher) Wake() { notify(p.wake) }

// Lessee is store.OutboxHandoff's: while the publisher runs and its broker
// is connected, commits lease the rows they write to its replica for its
// lease. Without a connection they write them unleased: they wait in the
// table, where any replica's lease finds them, not in this one's memory
// (an outage of an hour would have kept every row written in it there).
func (p *Publisher) Lessee() (owner string, lease time.Duration) {
	if !p.accepting.Load() || !p.deps.Broker.Connected() {
		return "", 0
	}
	return p.cfg.Replica, p.cfg.Lease
}

// Written is store.OutboxHandoff's: a loop publishes the rows a commit
// leased to this publisher without leasing them, and leases the others.
// It does not block, but once the publisher stopped it hands the rows back
// (a database round trip), so that another replica publishes them now.
func (p *Publisher) Written(w store.OutboxWritten) {
	if w.Unleased > 0 {
		notify(p.wake)
	}
	if len(w.Leased) == 0 {
		return
	}
	p.handMu.Lock()
	if p.closed {
		p.handMu.Unlock()
		ctx, cancel := startstop.FinalContext(context.Background())
		defer cancel()
		p.handBack(ctx, w.Leased)
		return
	}
	if len(p.handed) == 0 || w.At.Before(p.handedSince) {
		p.handedSince = w.At
	}
	p.handed = append(p.handed, w.Leased...)
	p.handMu.Unlock()
	notify(p.handedCh)
}

// handBack releases rows leased to this publisher that it will not publish.
func (p *Publisher) handBack(ctx context.Context, rows []store.OutboxRow) {
	if len(rows) == 0 {
		return
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	if err := p.deps.Store.SettleOutbox(ctx, p.cfg.Replica, store.OutboxSettlement{Released: ids}); err != nil {
		// They are published after their lease.
		p.deps.Logger.Warn("handing back outbox rows", "rows", len(ids), "code", fault.Code(err), "err", err)
	}
}

// Start publishes until Stop. While the broker is unreachable rows wait in
// the table. Stop (startstop.Base) stops leasing at once and lets the batch
// in hand finish until its deadline; then what it did not send is handed
// back so that another replica publishes it now (what it sent and the broker
// did not confirm yet stays leased: the broker may deliver it still).
func (p *Publisher) Start(ctx context.Context) error {
	if err := p.Run(ctx, "outbox", p.run); err != nil {
		return err
	}
	// Commits lease their rows to it from now on (Lessee): run takes them,
	// and hands back what it did not take when it stops.
	p.handMu.Lock()
	defer p.handMu.Unlock()
	if !p.closed {
		p.accepting.Store(true)
	}
	return nil
}

func (p *Publisher) run(soft, hard context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { p.loop(soft, hard, p.wake, true) })
	for range p.cfg.Batches - 1 {
		wg.Go(func() { p.loop(soft, hard, p.more, false) })
	}
	<-soft.Done()
	p.accepting.Store(false)
	wg.Wait()
	p.handMu.Lock()
	p.closed = true
	p.accepting.Store(false)
	rows := p.handed
	p.handed = nil
	p.handMu.Unlock()
	ctx, cancel := startstop.FinalContext(hard)
	defer cancel()
	p.handBack(ctx, rows)
}

// loop publishes and settles one batch at a time: the rows commits handed
// over, or rows it leases. The first loop leases on Wake and polls; the
// others lease only when a lease came back full (a backlog), to lease
// beside it while it publishes. Every loop takes handed rows. So under a
// light load one batch at a time gathers every row committed while the one
// before it was published, and under a backlog several are in flight.
func (p *Publisher) loop(soft, hard context.Context, wake <-chan struct{}, polls bool) {
	timer := time.NewTimer(0) // the first loop leases at once
	if !polls {
		timer.Stop()
	}
	defer timer.Stop()
	outages := 0 // batches in a row cut short by an outage
	for {
		leases := true
		select {
		case <-soft.Done():
			return
		case <-wake:
		case <-timer.C:
		case <-p.handedCh:
			leases = false
		}
		for {
			if p.deps.Broker.WaitConnected(soft) != nil {
				return
			}
			full, outage := p.batch(hard, leases)
			if soft.Err() != nil {
				return
			}
			if !outage {
				outages = 0
				if full {
					continue // a backlog: lease again at once
				}
				break
			}
			// The broker or the database failed: back off, whatever wakes us.
			outages++
			timer.Reset(backoff.Delay(p.cfg.PollInterval/10, p.cfg.PollInterval, outages))
			select {
			case <-soft.Done():
				return
			case <-timer.C:
			}
		}
		if polls {
			timer.Reset(p.cfg.PollInterval)
		}
	}
}

// notify leaves one pending signal on ch. It never blocks.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// batch leases rows (leases) or takes the rows commits handed over,
// publishes them and settles them. full: the lease came back full; outage:
// the database or the broker failed.
func (p *Publisher) batch(hard context.Context, leases bool) (full, outage bool) {
	log := p.deps.Logger
	var queues []*queue
	var rows int
	var leasedAt time.Time // the leases last at least until a Lease after it
	var err error
	if leases {
		leasedAt = time.Now()
		// Not cancelled by the soft stop: a lease cut short might hold rows
		// nobody publishes until it lapses.
		lctx, cancel := context.WithTimeout(hard, p.cfg.Lease/3)
		queues, rows, err = p.lease(lctx)
		cancel()
	} else {
		queues, rows, leasedAt = p.take()
	}
	defer p.unchain(queues)
	if leases {
		p.TestSignals.Leased.Signal(rows)
	}
	if err != nil {
		// Rows the statement may have leased lapse with their lease.
		if hard.Err() == nil {
			log.Warn("leasing outbox rows", "code", fault.Code(err), "err", err)
		}
		return false, true
	}
	if rows == 0 {
		return false, false
	}
	if full = leases && rows == p.cfg.BatchSize; full {
		notify(p.more) // a backlog: another loop leases beside this batch
	}
	// Publish only while the lease surely holds: past it another replica may
	// publish the same rows.
	ctx, cancel := context.WithDeadline(hard, leasedAt.Add(p.cfg.Lease*2/3))
	defer cancel()
	settle, outage := p.publish(ctx, queues)
	// A final write: it runs even at the hard stop, to hand the rest back.
	wctx, wcancel := startstop.FinalContext(hard)
	defer wcancel()
	if err := p.deps.Store.SettleOutbox(wctx, p.cfg.Replica, settle); err != nil {
		// Published rows are published again after the lease: a duplicate
		// that consumers dedupe by message id. Nothing is lost.
		log.Warn("settling outbox rows", "published", len(settle.Published), "code", fault.Code(err), "err", err)
		return false, true
	}
	p.TestSignals.Settled.Signal(settle)
	if !leases && !outage && len(settle.Released) > 0 {
		// Handed rows behind a row no batch in flight holds: the lease
		// takes them once that row is published.
		notify(p.wake)
	}
	return full, outage
}

// queue is one class's rows of a batch, in seq order: they go after after
// (nil: nothing of this publisher before them), and gate tells later
// batches what became of them.
type queue struct {
	class string
	rows  []store.OutboxRow
	after *gate
	gate  *gate
}

// lease leases a batch and chains it behind the batches in flight.
func (p *Publisher) lease(ctx context.Context) (queues []*queue, n int, err error) {
	p.leasing.Lock()
	defer p.leasing.Unlock()
	rows, err := p.deps.Store.LeaseOutbox(ctx, p.cfg.Replica, p.cfg.BatchSize, p.cfg.Lease)
	return p.chain(rows), len(rows), err
}

// take takes every row commits handed over as a batch, chained behind the
// batches in flight; since is the earliest time one of their commits was
// sent.
func (p *Publisher) take() (queues []*queue, n int, since time.Time) {
	p.leasing.Lock()
	defer p.leasing.Unlock()
	p.handMu.Lock()
	rows, since := p.handed, p.handedSince
	p.handed = nil
	p.handMu.Unlock()
	// Commits of one instance may hand their rows over out of order.
	slices.SortFunc(rows, func(a, b store.OutboxRow) int { return cmp.Compare(a.Seq, b.Seq) })
	return p.chain(rows), len(rows), since
}

// chain groups rows (in seq order) by class, each class's behind the
// class's last gate (the batch that took its latest earlier row), and
// makes their gates the last, so that a class's gates form one chain.
// The last gate serves a row whose After (its latest earlier unpublished
// row when it was written) it holds or passed: its rows were sent only
// after After's was confirmed (two batches' marks may commit in either
// order, the later row's first). It also serves a row with no After: that
// row was written by a transaction that could not see the earlier rows
// still in flight (a task outcome, a child's end, a forward, beside a
// step's commit), and waits for them all the same. A queue whose row comes
// after one that no batch holds as its last or behind it, or whose
// class's last gate holds a row after it (a batch whose settlement
// failed, a previous process of this replica, a commit handed over after a
// later one) waits for a gate that failed: it is handed back, and waits in
// the table until that row is published or its lease lapses. p.leasing is
// held.
func (p *Publisher) chain(rows []store.OutboxRow) []*queue {
	var queues []*queue
	index := map[string]*queue{}
	for _, r := range rows {
		// A row that comes after one the class's queue lacks (handed
		// over later, out of order) starts a queue of its own, behind it.
		class := r.Class()
		q := index[class]
		if q == nil || r.After > q.gate.last {
			q = &queue{class: class, gate: newGate()}
			switch last := p.gates[class]; {
			case last == nil && r.After == 0:
			case last == nil, last.last < r.After, last.last >= r.Seq:
				q.after = failed
			default:
				q.after = last
			}
			p.gates[class] = q.gate
			index[class] = q
			queues = append(queues, q)
		}
		q.rows = append(q.rows, r)
		q.gate.last = r.Seq
	}
	return queues
}

// failed is a gate resolved not ok.
var failed = func() *gate { g := newGate(); g.resolve(false); return g }()

// unchain resolves the batch's gates (those not resolved yet did not get all
// their rows confirmed) and forgets the failed ones still last, so that rows
// leased behind them later are handed back. A gate whose rows were all
// confirmed is kept while a batch may publish (two thirds of the lease): a
// commit that wrote a row behind them before they were marked published
// may hand it over after, and it goes at once.
func (p *Publisher) unchain(queues []*queue) {
	p.leasing.Lock()
	defer p.leasing.Unlock()
	now := time.Now()
	for _, q := range queues {
		q.gate.resolve(false)
		switch {
		case p.gates[q.class] != q.gate:
		case q.gate.ok:
			p.confirmed = append(p.confirmed, kept{q.class, q.gate, now})
		default:
			delete(p.gates, q.class)
		}
	}
	old := 0
	for ; old < len(p.confirmed) && now.Sub(p.confirmed[old].at) > p.cfg.Lease*2/3; old++ {
		if k := p.confirmed[old]; p.gates[k.class] == k.gate {
			delete(p.gates, k.class)
		}
	}
	p.confirmed = p.confirmed[old:]
}

// kept is a gate whose rows were all confirmed, kept since at.
type kept struct {
	class string
	gate  *gate
	at    time.Time
}

// publish publishes the queues' rows in waves and says what became of each:
// wave k holds the next row of every class whose earlier rows were all
// confirmed or parked, those of earlier batches included. A queue whose
// earlier batch did not get its rows confirmed is handed back, its rows
// unsent. A row sent and not confirmed by ctx's end stays leased (see
// broker.ErrUnconfirmed).
func (p *Publisher) publish(ctx context.Context, queues []*queue) (settle store.OutboxSettlement, outage bool) {
	m, log := p.deps.Metrics, p.deps.Logger
	held := 0 // rows sent but not confirmed by the deadline
	release := func(q *queue, rows []store.OutboxRow) {
		for _, r := range rows {
			settle.Released = append(settle.Released, r.ID)
		}
		q.gate.resolve(false)
	}
	// done: q's first row is confirmed or parked; the next one may go.
	done := func(q *queue) {
		if q.rows = q.rows[1:]; len(q.rows) > 0 {
			queues = append(queues, q)
		} else {
			q.gate.resolve(true)
		}
	}
	for len(queues) > 0 {
		var wave, waiting []*queue
		for _, q := range queues {
			switch {
			case outage:
				release(q, q.rows)
			case q.after == nil:
				wave = append(wave, q)
			default:
				select {
				case <-q.after.done:
					if !q.after.ok {
						release(q, q.rows)
						continue
					}
					q.after = nil
					wave = append(wave, q)
				default:
					waiting = append(waiting, q)
				}
			}
		}
		if len(wave) == 0 {
			if len(waiting) == 0 {
				break
			}
			// Every queue waits for an earlier batch: wait for one of them.
			p.TestSignals.Waiting.Signal(len(waiting))
			select {
			case <-waiting[0].after.done:
			case <-ctx.Done():
				for _, q := range waiting {
					release(q, q.rows)
				}
				waiting = nil
			}
			queues = waiting
			continue
		}
		msgs := make([]broker.Message, len(wave))
		for i, q := range wave {
			msgs[i] = p.message(q.rows[0])
		}
		errs := p.deps.Broker.Publish(ctx, msgs)
		confirmed := time.Now()
		queues = waiting
		for i, q := range wave {
			r, err := q.rows[0], errs[i]
			switch {
			case err == nil:
				settle.Published = append(settle.Published, r.ID)
				m.OutboxPublished.Inc()
				m.OutboxLag.Observe(confirmed.Sub(r.Written).Seconds())
				done(q)
			case fault.Code(err) == fault.Unavailable:
				m.OutboxPublishErrors.WithLabelValues(metrics.PublishUnavailable).Inc()
				outage = true
				if !errors.Is(err, broker.ErrUnconfirmed) {
					release(q, q.rows)
					break
				}
				// Sent, and the broker may deliver it still: handed back,
				// another publisher would send it beside that copy. It
				// stays leased until its lease lapses; the rows behind it
				// go back (nobody else leases them before it).
				held++
				release(q, q.rows[1:])
			case errors.Is(err, broker.ErrReturned) && r.Target == store.TargetOutbox && r.Attempts+1 >= p.cfg.MaxAttempts:
				// Nobody is bound to this message: parked, it no longer
				// holds the rows of its class behind it.
				m.OutboxPublishErrors.WithLabelValues(metrics.PublishReturned).Inc()
				m.OutboxParked.Inc()
				settle.Parked = append(settle.Parked, store.OutboxParking{ID: r.ID, Code: fault.OutboxUnroutable, Reason: err.Error()})
				done(q)
				log.Error("outbox message parked: the broker returned it on every publish; bind a queue, then retry it (or discard it) through /v1/outbox/parked",
					"code", fault.OutboxUnroutable, "instance_id", r.InstanceID, "message_id", r.ID, "exchange", msgs[i].Exchange,
					"routing_key", msgs[i].RoutingKey, "attempts", r.Attempts+1, "err", err)
			default:
				reason := metrics.PublishNacked
				if errors.Is(err, broker.ErrReturned) {
					reason = metrics.PublishReturned
				}
				m.OutboxPublishErrors.WithLabelValues(reason).Inc()
				delay := backoff.Delay(p.cfg.Backoff, p.cfg.BackoffMax, r.Attempts+1)
				settle.Deferred = append(settle.Deferred, store.OutboxDeferral{ID: r.ID, Delay: delay})
				release(q, q.rows[1:]) // they wait behind r
				log.Warn("outbox message not accepted by the broker; retried later", "instance_id", r.InstanceID,
					"message_id", r.ID, "exchange", msgs[i].Exchange, "routing_key", msgs[i].RoutingKey,
					"reason", reason, "attempts", r.Attempts+1, "backoff", delay, "err", err)
			}
		}
	}
	if outage && ctx.Err() == nil {
		log.Warn("broker unavailable while publishing outbox rows; handed back", "released", len(settle.Released))
	}
	if held > 0 {
		log.Warn("outbox rows sent but not confirmed by the batch's deadline; kept leased, published again once their lease lapses",
			"rows", held, "released", len(settle.Released))
	}
	return settle, outage
}

// body is a TargetOutbox row's message: a valid relay correlating by key.
type body struct {
	Message        string          `json:"message"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
	Variables      json.RawMessage `json:"variables"`
}

// message is the AMQP message of a row.
func (p *Publisher) message(r store.OutboxRow) broker.Message {
	msg := broker.Message{Publishing: amqp.Publishing{
		MessageId: r.ID, ContentType: "application/json", DeliveryMode: amqp.Persistent,
		Headers: amqp.Table{HeaderInstanceID: r.InstanceID, HeaderElementID: r.ElementID},
	}}
	if r.Target == store.TargetRelay {
		msg.Exchange, msg.RoutingKey, msg.Body = p.cfg.RelayExchange, r.RoutingKey, r.Body
		return msg
	}
	msg.Exchange, msg.RoutingKey = p.cfg.Exchange, r.Message
	// Variables come from jsonb: they always encode.
	msg.Body, _ = json.Marshal(body{Message: r.Message, CorrelationKey: r.CorrelationKey, Variables: r.Variables})
	return msg
}
