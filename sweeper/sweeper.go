// Package sweeper runs the work that needs exactly one actor at a time,
// gated by a lease: the sweep of stale claims (the backstop that keeps an
// instance from being held forever by a replica that died mid-step), the
// partitions of the relay inbox and of the step history (created ahead,
// dropped past their retention: store/partitions.go), the trim of relay
// failure counts and of published outbox rows, the expiry of buffered
// messages, and the count of the outbox backlog.
//
// The sweep is owner-blind: it clears every claim older than the claim
// timeout by age and never parses owner ids. It is safe even if two replicas
// swept at once (a lease can lapse under a stalled holder): clearing a stale
// claim only lets another step take it, and the commit fence rolls back the
// slow step that held it.
package sweeper

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// LeaseName is the lease that gates the sweeper.
const LeaseName = "sweeper"

// Broker publishes with confirms and counts a queue (*broker.Owner).
type Broker interface {
	// Publish reports nil per message the broker confirmed.
	Publish(ctx context.Context, msgs []broker.Message) []error
	// QueueDepth counts the messages ready in a queue.
	QueueDepth(name string) (int, error)
}

// Config configures the sweeper.
type Config struct {
	// Replica is the lease holder's name.
	Replica string
	// Interval between sweeps on the lease holder (default 5s).
	Interval time.Duration
	// LeaseTTL is how long a lease lasts unrenewed (default 15s); the holder
	// renews it every third of that, and another replica takes it over
	// within about one TTL of the holder's death.
	LeaseTTL time.Duration
	// ClaimTimeout is the age after which a claim is swept (default 30s).
	ClaimTimeout time.Duration
	// InboxRetention is how long relay message ids are kept for dedupe
	// (default 7 days): the inbox's partition of a day is dropped once the
	// day ended that long ago, so an id is kept for the retention and at
	// most a day more.
	InboxRetention time.Duration
	// OutboxRetention is how long published outbox rows are kept (default 24h).
	OutboxRetention time.Duration
	// StepHistoryRetention is how long the step history keeps a step's row
	// (default 72h; like the inbox's, at most a day more).
	StepHistoryRetention time.Duration
	// BatchSize bounds the rows one statement sweeps, trims or expires
	// (default 1000); a sweep repeats until a batch comes back short, a
	// trim pausing between batches (trimPause).
	BatchSize int
	// DeadExchange receives expired buffered messages (default
	// sutra.relays.dead); RelayExchange is named in their x-sutra-exchange
	// header (default sutra.relays).
	DeadExchange  string
	RelayExchange string
	// DeadQueue is counted for sutra_dead_letter_messages (default
	// sutra.relays.dead).
	DeadQueue string
	// CallTimeout bounds each database statement of a sweep and of the
	// census (default 5s, a third of the default LeaseTTL): a chore stuck on
	// a lock or a dead connection gives up until the next sweep instead of
	// holding the lease it can no longer renew meanwhile. Taking or renewing
	// the lease is bounded by a third of LeaseTTL.
	CallTimeout time.Duration
	// Clock schedules the attempts, renewals and sweeps and measures the
	// lease locally (default the real clock); claim ages are judged by the
	// database's clock.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	defaults.Set(&c.Interval, 5*time.Second)
	defaults.Set(&c.LeaseTTL, 15*time.Second)
	defaults.Set(&c.ClaimTimeout, 30*time.Second)
	defaults.Set(&c.InboxRetention, 7*24*time.Hour)
	defaults.Set(&c.OutboxRetention, 24*time.Hour)
	defaults.Set(&c.StepHistoryRetention, 72*time.Hour)
	defaults.Set(&c.BatchSize, 1000)
	defaults.Set(&c.CallTimeout, 5*time.Second)
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.DeadExchange == "" {
		c.DeadExchange = "sutra.relays.dead"
	}
	if c.RelayExchange == "" {
		c.RelayExchange = "sutra.relays"
	}
	if c.DeadQueue == "" {
		c.DeadQueue = "sutra.relays.dead"
	}
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Store is what the sweeper needs from the database (*store.Store).
type Store interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
	SweepClaims(ctx context.Context, timeout time.Duration, limit int) ([]store.SweptClaim, error)
	EnsurePartitions(ctx context.Context, t store.DayTable, now time.Time, retention time.Duration, ahead int) (int, error)
	MoveBeforeDays(ctx context.Context, t store.DayTable, now time.Time, retention time.Duration, limit int) (taken, discarded int64, err error)
	DropPartitions(ctx context.Context, t store.DayTable, now time.Time, retention time.Duration) ([]string, error)
	TrimRelayAttempts(ctx context.Context, retention time.Duration, limit int) (int64, error)
	ExpiredBuffered(ctx context.Context, limit int) ([]store.BufferedMessage, error)
	DeleteBuffered(ctx context.Context, ids []int64) error
	TrimOutbox(ctx context.Context, retention time.Duration, limit int) (int64, error)
	Census(ctx context.Context) (store.Census, error)
}

// Deps are the sweeper's collaborators.
type Deps struct {
	Store   Store
	Broker  Broker
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// TestSignals tell tests what the sweeper did; inert unless Init'ed.
type TestSignals struct {
	// Lease carries the outcome of every attempt to take or renew the lease:
	// true when this replica holds it afterwards.
	Lease testsignal.Signal[bool]
	// Swept carries the number of claims each sweep cleared.
	Swept testsignal.Signal[int]
	// State carries every state the lease holder enters (leader, follower, stopped).
	State testsignal.Signal[string]
}

// Init switches every signal on.
func (s *TestSignals) Init() {
	s.Lease.Init()
	s.Swept.Init()
	s.State.Init()
}

// state is the lease holder's state.
type state int

const (
	// follower does not hold the lease; it tries to take it every attempt period.
	follower state = iota
	// leader holds the lease until leaseUntil (local clock, measured from
	// before the statement that took it) and sweeps every Interval.
	leader
	// stopped is final; a leader releases the lease on its way here.
	stopped
)

func (s state) String() string {
	return [...]string{"follower", "leader", "stopped"}[s]
}

// transition documents what may follow what:
//
//	follower → leader    the lease was taken
//	leader   → leader    the lease was renewed
//	leader   → follower  a renewal found another holder, or could not reach
//	                     the database before the lease ran out locally
//	any      → stopped   Stop (a leader releases the lease first)
func (s *Sweeper) transition(to state) {
	from := s.state
	switch {
	case from == stopped,
		from == follower && to != leader && to != stopped:
		panic("sweeper: transition " + from.String() + " → " + to.String())
	}
	s.state = to
	s.TestSignals.State.Signal(to.String())
	switch {
	case from != leader && to == leader:
		s.held.Set(1)
		s.deps.Logger.Info("lease acquired", "lease", LeaseName, "holder", s.cfg.Replica)
	case from == leader && to != leader:
		s.held.Set(0)
		s.clearCensus()
		s.deps.Logger.Info("lease given up", "lease", LeaseName, "holder", s.cfg.Replica, "state", to.String())
	}
}

// Sweeper is the lease-gated sweeper. Start it once; Stop it once or more.
type Sweeper struct {
	startstop.Base
	TestSignals TestSignals

	cfg  Config
	deps Deps
	held prometheus.Gauge
	// state and leaseUntil belong to the run goroutine.
	state      state
	leaseUntil time.Time
	lastSweep  time.Time
	// topics are those the census reports in sutra_tasks_open (run goroutine).
	topics map[string]bool
}

// New builds a sweeper.
func New(deps Deps, cfg Config) *Sweeper {
	cfg.setDefaults()
	held := deps.Metrics.LeaseHeld.WithLabelValues(LeaseName)
	held.Set(0)
	return &Sweeper{cfg: cfg, deps: deps, held: held}
}

// Start runs the sweeper until Stop; on its way out a holder releases the
// lease so that another replica takes it at once.
func (s *Sweeper) Start(ctx context.Context) error {
	return s.Run(ctx, "sweeper", s.run)
}

func (s *Sweeper) run(ctx, _ context.Context) {
	// A follower asks often, so that a dead holder's lease is taken soon
	// after it lapses; a leader renews at a third of the TTL.
	attempt, renew := max(s.cfg.LeaseTTL/10, 10*time.Millisecond), s.cfg.LeaseTTL/3
	timer := s.cfg.Clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.stop()
			return
		case <-timer.C():
		}
		s.tick(ctx)
		next := attempt
		if s.state == leader {
			next = min(renew, max(s.lastSweep.Add(s.cfg.Interval).Sub(s.cfg.Clock.Now()), 0))
		}
		timer.Reset(next)
	}
}

// tick takes or renews the lease and, on the holder, sweeps when due.
func (s *Sweeper) tick(ctx context.Context) {
	log := s.deps.Logger
	now := s.cfg.Clock.Now
	if s.state == follower || s.leaseUntil.Sub(now()) < s.cfg.LeaseTTL*2/3 {
		asked := now()
		cctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL/3)
		held, err := s.deps.Store.AcquireLease(cctx, LeaseName, s.cfg.Replica, s.cfg.LeaseTTL)
		cancel()
		if err == nil {
			s.TestSignals.Lease.Signal(held)
		}
		switch {
		case err == nil && held:
			s.leaseUntil = asked.Add(s.cfg.LeaseTTL)
			if s.state != leader {
				s.transition(leader)
			}
		case err == nil && s.state == leader:
			log.Warn("lease taken over by another replica", "lease", LeaseName, "holder", s.cfg.Replica)
			s.transition(follower)
		case err != nil && ctx.Err() == nil:
			log.Warn("acquiring lease", "lease", LeaseName, "code", fault.Code(err), "err", err)
			// The lease is over at leaseUntil: a holder that stayed until then
			// would neither sweep nor give up, and look again at once.
			if s.state == leader && !now().Before(s.leaseUntil) {
				s.transition(follower)
			}
		}
	}
	if s.state == leader && now().Sub(s.lastSweep) >= s.cfg.Interval && now().Before(s.leaseUntil) {
		s.lastSweep = now()
		s.sweep(ctx)
	}
}

// sweep runs the holder's chores. Each stops at an error; the next sweep
// tries again.
func (s *Sweeper) sweep(ctx context.Context) {
	log := s.deps.Logger
	if err := s.sweepClaims(ctx); err != nil && ctx.Err() == nil {
		log.Warn("sweeping claims", "code", fault.Code(err), "err", err)
	}
	st, m := s.deps.Store, s.deps.Metrics
	for _, p := range []struct {
		table     store.DayTable
		retention time.Duration
		discarded prometheus.Counter
	}{
		{store.InboxDays, s.cfg.InboxRetention, m.InboxTrimmed},
		{store.StepHistoryDays, s.cfg.StepHistoryRetention, nil},
	} {
		if err := s.partitions(ctx, p.table, p.retention, p.discarded); err != nil && ctx.Err() == nil {
			log.Warn("keeping the partitions by day", "table", p.table.Name, "code", fault.Code(err), "err", err)
		}
	}
	// Relay failure counts go with the inbox retention: past it a
	// redelivered copy is not recognised either.
	if err := s.trim(ctx, func(ctx context.Context, limit int) (int64, error) {
		return st.TrimRelayAttempts(ctx, s.cfg.InboxRetention, limit)
	}, nil); err != nil && ctx.Err() == nil {
		log.Warn("trimming relay attempts", "code", fault.Code(err), "err", err)
	}
	if err := s.expireBuffered(ctx); err != nil && ctx.Err() == nil {
		log.Warn("expiring buffered messages", "code", fault.Code(err), "err", err)
	}
	if err := s.trim(ctx, func(ctx context.Context, limit int) (int64, error) {
		return st.TrimOutbox(ctx, s.cfg.OutboxRetention, limit)
	}, m.OutboxTrimmed); err != nil && ctx.Err() == nil {
		log.Warn("trimming outbox", "code", fault.Code(err), "err", err)
	}
	s.census(ctx)
}

// census sets the gauges only the holder reports, so that a sum (or max)
// over replicas is right.
func (s *Sweeper) census(ctx context.Context) {
	m, log := s.deps.Metrics, s.deps.Logger
	cctx, cancel := s.call(ctx)
	c, err := s.deps.Store.Census(cctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("counting the census", "code", fault.Code(err), "err", err)
		}
	} else {
		m.OutboxBacklog.Set(float64(c.OutboxBacklog))
		m.OutboxParkedRows.Set(float64(c.OutboxParked))
		m.ClaimOldestAge.Set(c.OldestClaim.Seconds())
		m.IncidentsOpen.Set(float64(c.IncidentsOpen))
		// A topic with no task left disappears. Set first, then delete what is
		// gone: a reset before setting would show a scrape no series at all.
		for topic, n := range c.TasksOpen {
			m.TasksOpen.WithLabelValues(topic).Set(float64(n))
		}
		for topic := range s.topics {
			if _, ok := c.TasksOpen[topic]; !ok {
				m.TasksOpen.DeleteLabelValues(topic)
			}
		}
		s.topics = make(map[string]bool, len(c.TasksOpen))
		for topic := range c.TasksOpen {
			s.topics[topic] = true
		}
	}
	if n, err := s.deps.Broker.QueueDepth(s.cfg.DeadQueue); err == nil {
		m.DeadLetterMessages.Set(float64(n))
	} else if ctx.Err() == nil {
		log.Warn("counting the dead-letter queue", "queue", s.cfg.DeadQueue, "code", fault.Code(err), "err", err)
	}
}

// clearCensus zeroes the holder's gauges when the lease is given up.
func (s *Sweeper) clearCensus() {
	m := s.deps.Metrics
	m.OutboxBacklog.Set(0)
	m.OutboxParkedRows.Set(0)
	m.ClaimOldestAge.Set(0)
	m.IncidentsOpen.Set(0)
	m.DeadLetterMessages.Set(0)
	m.TasksOpen.Reset()
	s.topics = nil
}

// sweepClaims clears every claim older than the claim timeout and logs each,
// so that replicas dying mid-step are visible.
func (s *Sweeper) sweepClaims(ctx context.Context) error {
	for {
		cctx, cancel := s.call(ctx)
		swept, err := s.deps.Store.SweepClaims(cctx, s.cfg.ClaimTimeout, s.cfg.BatchSize)
		cancel()
		if err != nil {
			return err
		}
		for _, c := range swept {
			s.deps.Logger.Warn("stale claim swept", "instance_id", c.InstanceID, "owner", c.Owner,
				"claim_age", c.Age, "code", fault.ClaimSwept)
		}
		s.deps.Metrics.ClaimsSwept.Add(float64(len(swept)))
		s.TestSignals.Swept.Signal(len(swept))
		if len(swept) < s.cfg.BatchSize {
			return nil
		}
	}
}

// partitionsAhead is how many days after today have their partitions: a
// sweeper that cannot run for that long still leaves the steps somewhere
// to write.
const partitionsAhead = 3

// partitions keeps the partitions by day of table t: those of the days
// ahead are created, the rows of the table of before the partitioning
// moved over in paced batches (those past the retention discarded and
// counted in discarded, when set), and the days past the retention
// dropped, each logged. now is the sweeper's clock.
func (s *Sweeper) partitions(ctx context.Context, t store.DayTable, retention time.Duration, discarded prometheus.Counter) error {
	st, now := s.deps.Store, s.cfg.Clock.Now()
	cctx, cancel := s.call(ctx)
	_, err := st.EnsurePartitions(cctx, t, now, retention, partitionsAhead)
	cancel()
	if err != nil {
		return err
	}
	err = s.trim(ctx, func(ctx context.Context, limit int) (int64, error) {
		taken, gone, err := st.MoveBeforeDays(ctx, t, now, retention, limit)
		if discarded != nil {
			discarded.Add(float64(gone))
		}
		return taken, err
	}, nil)
	if err != nil {
		return err
	}
	cctx, cancel = s.call(ctx)
	dropped, err := st.DropPartitions(cctx, t, now, retention)
	cancel()
	for _, p := range dropped {
		s.deps.Logger.Info("partition past its retention dropped", "table", t.Name, "partition", p, "retention", retention)
	}
	return err
}

// trimPause is how many times a trim batch's own duration the sweeper
// waits before the next batch: a backlog of old rows (a sweep's worth at
// a high rate, or days of it after an outage) is deleted at most a quarter
// of the time, spread out rather than in one burst of back-to-back deletes
// that every step's commit would queue behind.
const trimPause = 3

// trim deletes, a batch per statement, what a table's retention lets go,
// until a batch comes back short, and counts the rows (when trimmed is set).
func (s *Sweeper) trim(ctx context.Context, del func(context.Context, int) (int64, error), trimmed prometheus.Counter) error {
	for {
		began := s.cfg.Clock.Now()
		cctx, cancel := s.call(ctx)
		n, err := del(cctx, s.cfg.BatchSize)
		cancel()
		if err != nil {
			return err
		}
		if trimmed != nil {
			trimmed.Add(float64(n))
		}
		if n < int64(s.cfg.BatchSize) {
			return nil
		}
		if err := s.pause(ctx, trimPause*s.cfg.Clock.Now().Sub(began)); err != nil {
			return err
		}
	}
}

// pause waits d on the sweeper's clock, or until ctx ends.
func (s *Sweeper) pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := s.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// expireBuffered dead-letters buffered messages past their TTL, confirmed
// by the broker before their rows go: an expired message is never lost. (A
// crash between the two dead-letters it twice, never zero times.) A message
// the broker did not confirm stays for the next sweep.
func (s *Sweeper) expireBuffered(ctx context.Context) error {
	for {
		cctx, cancel := s.call(ctx)
		msgs, err := s.deps.Store.ExpiredBuffered(cctx, s.cfg.BatchSize)
		cancel()
		if err != nil || len(msgs) == 0 {
			return err
		}
		var dead []store.BufferedMessage
		var ids []int64
		for _, m := range msgs {
			if m.Applied { // a copy applied directly needs no dead letter
				ids = append(ids, m.ID)
			} else {
				dead = append(dead, m)
			}
		}
		var failed []error
		var expired []store.BufferedMessage
		if len(dead) > 0 {
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			errs := s.deps.Broker.Publish(pctx, s.deadLetters(dead))
			cancel()
			for i, err := range errs {
				if err != nil {
					failed = append(failed, err)
					continue
				}
				ids = append(ids, dead[i].ID)
				expired = append(expired, dead[i])
			}
		}
		if len(ids) > 0 {
			cctx, cancel := s.call(ctx)
			err := s.deps.Store.DeleteBuffered(cctx, ids)
			cancel()
			if err != nil {
				return err
			}
		}
		for _, m := range expired {
			s.deps.Logger.Warn("buffered message expired; dead-lettered", "message_id", m.MessageID,
				"code", fault.RelayUncorrelated, "message", m.Message, "correlation_key", m.CorrelationKey)
		}
		s.deps.Metrics.BufferedExpired.Add(float64(len(expired)))
		s.deps.Metrics.DeadLetters.WithLabelValues(fault.RelayUncorrelated).Add(float64(len(expired)))
		if len(failed) > 0 {
			return fmt.Errorf("%d expired buffered messages not dead-lettered (kept for the next sweep): %w", len(failed), failed[0])
		}
		if len(msgs) < s.cfg.BatchSize {
			return nil
		}
	}
}

// call bounds one database statement of a chore.
func (s *Sweeper) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.CallTimeout)
}

// stop releases a held lease on the way out.
func (s *Sweeper) stop() {
	if s.state == leader {
		ctx, cancel := startstop.FinalContext(context.Background())
		defer cancel()
		if err := s.deps.Store.ReleaseLease(ctx, LeaseName, s.cfg.Replica); err != nil {
			s.deps.Logger.Warn("releasing lease", "lease", LeaseName, "code", fault.Code(err), "err", err)
		}
	}
	s.transition(stopped)
}
