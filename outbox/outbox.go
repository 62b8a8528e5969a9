// Package outbox publishes the messages steps write to the outbox table: after
// the commit that wrote them, with publisher confirms, at least once, in
// commit order per instance within a class (the worker's own relays among
// relays, BPMN messages among BPMN messages: store.OutboxRow.Class), and
// marks a row published only once the broker confirmed it.
//
// Every replica runs a publisher, which leases rows, publishes them and
// settles them, as River's and watermill's publishers do. A lease
// (store.LeaseOutbox) holds the earliest unpublished rows of each class it
// takes, and a class is in at most one live lease: two publishers never
// publish one row at once, a class's rows are published by one batch at a
// time, and a publisher that dies leaves its rows to the others when the
// lease lapses. Within a batch a class's rows go in waves: the first row of
// every class, wait for the confirms, then the second, … so a row is never
// sent before the one of its class committed before it was confirmed. A
// returned or nacked row backs off, and the later rows of its class wait
// behind it; a BPMN message returned on its MaxAttempts-th publish is parked
// instead (fault.OutboxUnroutable): out of the order, until an operator
// retries or discards it. Settling is fenced on the lease: a row is marked
// published only by its holder, once the broker confirmed it.
//
// A commit of this replica that wrote rows wakes the publisher (Wake,
// through store.NotifyOutbox); rows of other replicas, of dead ones, and
// rows whose backoff ended are found by polling every PollInterval. Under a
// backlog a publisher runs a few batches at once, each leased by its own
// statement, so that the broker's confirm latency does not bound its rate.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/backoff"
	"github.com/sutra-run/worker/internal/clock"
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
	// message at full load, BENCHMARKS.md); without one, one at a time.
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

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
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
	// Clock times the publisher's batch deadlines, polls and backoffs
	// (default clock.Real()). Leases lapse by the database's clock, which
	// every replica shares; a test lapses one by moving its end.
	Clock clock.Clock
}

// TestSignals tell tests what the publisher did; inert unless Init'ed.
type TestSignals struct {
	// Leased carries the number of rows each lease statement leased.
	Leased testsignal.Signal[int]
	// Settled carries every settlement written (rows published, deferred,
	// handed back, parked).
	Settled testsignal.Signal[store.OutboxSettlement]
}

// Init switches every signal on.
func (s *TestSignals) Init() {
	s.Leased.Init()
	s.Settled.Init()
}

// Publisher publishes outbox rows. Start it once; Stop it once or more.
type Publisher struct {
	startstop.Base
	TestSignals TestSignals

	cfg  Config
	deps Deps
	// wake is signalled by Wake, more by a loop whose lease came back full;
	// one pending signal of each is enough.
	wake, more chan struct{}
	// leases counts lease statements: a batch during which another loop
	// leased wakes the lease at its end, since that lease may have passed
	// over rows of its classes.
	leases atomic.Uint64
}

// New builds a publisher.
func New(deps Deps, cfg Config) *Publisher {
	cfg.setDefaults()
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	return &Publisher{cfg: cfg, deps: deps, wake: make(chan struct{}, 1), more: make(chan struct{}, 1)}
}

// Wake tells the publisher that rows were written that it may lease. It
// never blocks.
func (p *Publisher) Wake() { notify(p.wake) }

// Start publishes until Stop. While the broker is unreachable rows wait in
// the table. Stop (startstop.Base) stops leasing at once and lets the batch
// in hand finish until its deadline; then what it did not send is handed
// back so that another replica publishes it now (what it sent and the broker
// did not confirm yet stays leased: the broker may deliver it still).
func (p *Publisher) Start(ctx context.Context) error {
	return p.Run(ctx, "outbox", p.run)
}

func (p *Publisher) run(soft, hard context.Context) {
	var wg sync.WaitGroup
	for i := range p.cfg.Batches {
		wg.Go(func() { p.loop(soft, hard, i == 0) })
	}
	wg.Wait()
}

// loop leases, publishes and settles one batch at a time. An idle loop
// leases on Wake, and when a lease came back full (a backlog), to lease
// beside it while it publishes; the first one also polls. So rows committed
// while a batch is in flight go in another batch at once, unless a row of
// their class is in it: those go when it is settled.
func (p *Publisher) loop(soft, hard context.Context, polls bool) {
	var timer <-chan struct{}
	stop := func() bool { return false }
	defer func() { stop() }()
	// arm makes timer fire after d on the clock.
	arm := func(d time.Duration) {
		stop()
		ch := make(chan struct{})
		timer, stop = ch, p.deps.Clock.AfterFunc(d, func() { close(ch) })
	}
	if polls {
		arm(0) // the first loop leases at once
	}
	outages := 0 // batches in a row cut short by an outage
	for {
		select {
		case <-soft.Done():
			return
		case <-p.wake:
		case <-p.more:
		case <-timer:
		}
		for {
			if p.deps.Broker.WaitConnected(soft) != nil {
				return
			}
			full, outage := p.batch(hard)
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
			arm(backoff.Delay(p.cfg.PollInterval/10, p.cfg.PollInterval, outages))
			select {
			case <-soft.Done():
				return
			case <-timer:
			}
		}
		if polls {
			arm(p.cfg.PollInterval)
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

// batch leases rows, publishes them and settles them. full: the lease came
// back full; outage: the database or the broker failed.
func (p *Publisher) batch(hard context.Context) (full, outage bool) {
	log := p.deps.Logger
	leasedAt := p.deps.Clock.Now() // the leases last at least until a Lease after it
	// Not cancelled by the soft stop: a lease cut short might hold rows
	// nobody publishes until it lapses.
	lctx, cancel := context.WithTimeout(hard, p.cfg.Lease/3)
	rows, err := p.deps.Store.LeaseOutbox(lctx, p.cfg.Replica, p.cfg.BatchSize, p.cfg.Lease)
	cancel()
	leases := p.leases.Add(1)
	p.TestSignals.Leased.Signal(len(rows))
	if err != nil {
		// Rows the statement may have leased lapse with their lease.
		if hard.Err() == nil {
			log.Warn("leasing outbox rows", "code", fault.Code(err), "err", err)
		}
		return false, true
	}
	if len(rows) == 0 {
		return false, false
	}
	if full = len(rows) == p.cfg.BatchSize; full {
		notify(p.more) // a backlog: another loop leases beside this batch
	}
	// Publish only while the lease surely holds: past it another replica may
	// publish the same rows.
	ctx, cancelCause := context.WithCancelCause(hard)
	stop := p.deps.Clock.AfterFunc(leasedAt.Add(p.cfg.Lease*2/3).Sub(p.deps.Clock.Now()), func() {
		cancelCause(context.DeadlineExceeded)
	})
	settle, outage := p.publish(ctx, classes(rows))
	stop()
	cancelCause(nil)
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
	if p.leases.Load() != leases {
		// Another loop leased while this batch held its classes: rows of
		// them committed meanwhile were passed over, and go now.
		notify(p.wake)
	}
	return full, outage
}

// queue is one class's rows of a batch, in seq order.
type queue struct {
	rows []store.OutboxRow
}

// classes groups rows (in seq order) by class.
func classes(rows []store.OutboxRow) []*queue {
	var queues []*queue
	index := map[string]*queue{}
	for _, r := range rows {
		q := index[r.Class()]
		if q == nil {
			q = &queue{}
			index[r.Class()] = q
			queues = append(queues, q)
		}
		q.rows = append(q.rows, r)
	}
	return queues
}

// publish publishes the queues' rows in waves and says what became of each:
// wave k holds the next row of every class whose earlier rows were all
// confirmed or parked. A row sent and not confirmed by ctx's end stays
// leased (see broker.ErrUnconfirmed); rows not sent are handed back.
func (p *Publisher) publish(ctx context.Context, queues []*queue) (settle store.OutboxSettlement, outage bool) {
	m, log := p.deps.Metrics, p.deps.Logger
	held := 0 // rows sent but not confirmed by the deadline
	release := func(rows []store.OutboxRow) {
		for _, r := range rows {
			settle.Released = append(settle.Released, r.ID)
		}
	}
	for len(queues) > 0 {
		wave := queues
		queues = nil
		if outage {
			for _, q := range wave {
				release(q.rows)
			}
			break
		}
		// next: q's first row is confirmed or parked; the next one may go.
		next := func(q *queue) {
			if q.rows = q.rows[1:]; len(q.rows) > 0 {
				queues = append(queues, q)
			}
		}
		msgs := make([]broker.Message, len(wave))
		for i, q := range wave {
			msgs[i] = p.message(q.rows[0])
		}
		errs := p.deps.Broker.Publish(ctx, msgs)
		// Lag is measured, not scheduled: wall time, as Written is.
		confirmed := time.Now()
		for i, q := range wave {
			r, err := q.rows[0], errs[i]
			switch {
			case err == nil:
				settle.Published = append(settle.Published, r.ID)
				m.OutboxPublished.Inc()
				m.OutboxLag.Observe(confirmed.Sub(r.Written).Seconds())
				next(q)
			case fault.Code(err) == fault.Unavailable:
				m.OutboxPublishErrors.WithLabelValues(metrics.PublishUnavailable).Inc()
				outage = true
				if !errors.Is(err, broker.ErrUnconfirmed) {
					release(q.rows)
					break
				}
				// Sent, and the broker may deliver it still: handed back,
				// another publisher would send it beside that copy. It
				// stays leased until its lease lapses; the rows behind it
				// go back (nobody else leases them before it).
				held++
				release(q.rows[1:])
			case errors.Is(err, broker.ErrReturned) && r.Target == store.TargetOutbox && r.Attempts+1 >= p.cfg.MaxAttempts:
				// Nobody is bound to this message: parked, it no longer
				// holds the rows of its class behind it.
				m.OutboxPublishErrors.WithLabelValues(metrics.PublishReturned).Inc()
				m.OutboxParked.Inc()
				settle.Parked = append(settle.Parked, store.OutboxParking{ID: r.ID, Code: fault.OutboxUnroutable, Reason: err.Error()})
				next(q)
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
				release(q.rows[1:]) // they wait behind r
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
