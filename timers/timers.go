// Package timers fires due timers: a poller per replica leases due timer rows
// in batches, hands each fire to the lane its instance hashes to (the same
// step pipeline as relays), and answers each outcome. A refused or failed
// fire is deferred with backoff and keeps its row; a stale fire (its wait
// was closed) does nothing; a fire is done only when its step committed,
// and that commit deleted the row. A timer whose fire failed MaxAttempts
// times (refusals, outages and stops are not failures) stops in an incident
// on its element, its row kept but skipped, until an admin retry.
//
// The poller sleeps until the earliest due time it knows of. It learns of
// earlier ones from this replica's commits (Armed) at once and from other
// replicas' by polling every PollInterval; the replica that arms a timer is
// the one that learns of it first, so the poll only matters when that
// replica has died.
package timers

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/backoff"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Dispatcher is what the poller needs from the lanes. Dispatch must not block.
type Dispatcher interface {
	Dispatch(lanes.Resume)
}

// DefaultMaxInFlight is MaxInFlight when not set.
const DefaultMaxInFlight = 256

// Config configures the poller.
type Config struct {
	// Replica leases timer rows (locked_by).
	Replica string
	// PollInterval bounds how long the poller goes without looking for due
	// timers armed by other replicas (default 1s).
	PollInterval time.Duration
	// BatchSize is how many due timers one statement leases (default 128).
	BatchSize int
	// MaxInFlight bounds fires handed to lanes and not yet answered (default
	// 256): memory stays flat however many timers are due. The lanes' inboxes
	// must have room for it.
	MaxInFlight int
	// Lease is how long a leased row is kept from other pollers (default 10s):
	// longer than a fire waits in a lane, short enough that the fires of a
	// replica that died are taken over soon.
	Lease time.Duration
	// Backoff is the first deferral of a refused fire; it doubles per attempt
	// up to BackoffMax, with ±20% jitter (defaults 100ms, 30s).
	Backoff    time.Duration
	BackoffMax time.Duration
	// MaxAttempts is how many failed fires of one timer park it in an
	// incident (default 10).
	MaxAttempts int
	// CallTimeout bounds each database statement of the poller (default
	// 5s): a look stuck on a lock or a dead connection gives up and polls
	// again, rather than stalling every fire of this replica. Half the
	// default lease: the rows a slow take leased are still this replica's
	// when it returns. The answers' writes are bounded by the stop's grace
	// too (startstop.FinalContext).
	CallTimeout time.Duration
	// Clock schedules the looks (default the real clock); due_at is judged
	// by the database's clock.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	defaults.Set(&c.PollInterval, time.Second)
	defaults.Set(&c.Lease, 10*time.Second)
	defaults.Set(&c.Backoff, 100*time.Millisecond)
	defaults.Set(&c.BackoffMax, 30*time.Second)
	defaults.Set(&c.BatchSize, 128)
	defaults.Set(&c.MaxInFlight, DefaultMaxInFlight)
	defaults.Set(&c.MaxAttempts, 10)
	defaults.Set(&c.CallTimeout, 5*time.Second)
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	c.BatchSize = min(c.BatchSize, c.MaxInFlight)
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Store is what the poller needs from the database (*store.Store).
type Store interface {
	TakeDueTimers(ctx context.Context, owner string, limit int, lease time.Duration) (due []store.DueTimer, next time.Duration, ok bool, err error)
	DeferTimers(ctx context.Context, owner string, ds []store.Deferral) error
	ParkTimers(ctx context.Context, owner string, ps []store.Parking) ([]store.ParkedTimer, error)
	DropTimers(ctx context.Context, owner string, ts []store.DueTimer) ([]int64, error)
	ReleaseTimerLeases(ctx context.Context, owner string) error
}

// Deps are the poller's collaborators.
type Deps struct {
	Store   Store
	Lanes   Dispatcher
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// TestSignals tell tests what the poller did; inert unless Init'ed.
type TestSignals struct {
	// Took carries the number of timers each look leased.
	Took testsignal.Signal[int]
	// Deferred carries each deferral written, with its delay.
	Deferred testsignal.Signal[store.Deferral]
	// Parked carries each timer parked in its incident.
	Parked testsignal.Signal[store.ParkedTimer]
	// Answered carries the number of fire outcomes each answer took, once
	// they are counted and their rows written.
	Answered testsignal.Signal[int]
}

// Init switches every signal on.
func (s *TestSignals) Init() {
	s.Took.Init()
	s.Deferred.Init()
	s.Parked.Init()
	s.Answered.Init()
}

// Poller fires due timers. Start it once; Stop it once or more.
type Poller struct {
	startstop.Base
	cfg  Config
	deps Deps
	// wake is signalled by Armed; one pending signal is enough.
	wake chan struct{}
	// sleepUntil is when the loop next looks (unix ns), for Armed to compare;
	// MaxInt64 while it is looking, so that a timer armed meanwhile wakes it.
	sleepUntil atomic.Int64
	results    chan answered

	TestSignals TestSignals
}

// answered is a fire's outcome, sent back by its lane.
type answered struct {
	t   store.DueTimer
	out lanes.Result
	at  time.Time
}

// New builds a poller.
func New(deps Deps, cfg Config) *Poller {
	cfg.setDefaults()
	return &Poller{
		cfg: cfg, deps: deps,
		wake:    make(chan struct{}, 1),
		results: make(chan answered, cfg.MaxInFlight),
	}
}

// Armed tells the poller that a step of this replica armed a timer due at
// due. It never blocks.
func (p *Poller) Armed(due time.Time) { p.wakeBy(due) }

// Start runs the poller until Stop. Stop (startstop.Base) stops taking
// timers at once, answers the fires in flight until its deadline (the lanes
// must still run), then hands back every lease of this replica so that
// another replica fires those timers now.
func (p *Poller) Start(ctx context.Context) error {
	return p.Run(ctx, "timers", p.run)
}

// run is the poller's loop: take what is due, dispatch, answer outcomes,
// sleep until the next due time, a wake-up, or the poll interval.
func (p *Poller) run(ctx, hard context.Context) {
	log := p.deps.Logger
	timer := p.cfg.Clock.NewTimer(0)
	defer timer.Stop()
	inflight := 0
	look := true // look for due timers now
	for {
		// Take only when a whole batch fits: refilling one slot per answered
		// fire would cost a statement per fire under a backlog.
		if look && inflight+p.cfg.BatchSize <= p.cfg.MaxInFlight {
			look = false
			limit := p.cfg.BatchSize
			// A step that arms a timer while this look runs must wake the
			// next one: the look's answer predates that timer.
			p.sleepUntil.Store(math.MaxInt64)
			cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
			due, next, ok, err := p.deps.Store.TakeDueTimers(cctx, p.cfg.Replica, limit, p.cfg.Lease)
			cancel()
			p.TestSignals.Took.Signal(len(due))
			switch {
			case ctx.Err() != nil:
			case err != nil:
				log.Warn("taking due timers", "code", fault.Code(err), "err", err)
				next, ok = p.cfg.PollInterval, true
			case len(due) == limit:
				next, ok = 0, true // more may be due: look again as soon as there is room
			}
			for _, t := range due {
				inflight++
				p.dispatch(t)
			}
			p.sleep(timer, next, ok)
		}
		select {
		case <-timer.C():
			look = true
		case <-p.wake:
			look = true
		case a := <-p.results:
			inflight -= p.answer(ctx, a)
		case <-ctx.Done():
			p.drain(hard, inflight)
			return
		}
	}
}

// sleep sets the timer for the next look: when the next timer is due (ok),
// but no later than the poll interval.
func (p *Poller) sleep(timer clock.Timer, next time.Duration, ok bool) {
	d := p.cfg.PollInterval
	if ok && next < d {
		d = max(next, 0)
	}
	p.sleepUntil.Store(p.cfg.Clock.Now().Add(d).UnixNano())
	timer.Reset(d) // since Go 1.23 a Reset timer never delivers a stale tick
}

// dispatch hands one fire to its instance's lane. Done only sends on a
// buffered channel with room for every fire in flight, so it never blocks.
// A timer start event's fire starts the instance its schedule row names.
func (p *Poller) dispatch(t store.DueTimer) {
	r := lanes.Resume{
		Cause: lanes.Fire(t),
		Done:  func(out lanes.Result) { p.results <- answered{t: t, out: out, at: p.cfg.Clock.Now()} },
	}
	p.deps.Lanes.Dispatch(r)
}

// answer acts on a (first) outcome and on every other one already waiting,
// writing their deferrals and drops in one statement each. It returns how
// many outcomes it took.
func (p *Poller) answer(ctx context.Context, first answered) int {
	var deferrals []store.Deferral
	var parkings []store.Parking
	var stale []store.DueTimer
	n := 0
	for a, more := first, true; more; {
		n++
		delay := backoff.Delay(p.cfg.Backoff, p.cfg.BackoffMax, a.t.Attempts+1)
		switch p.classify(a) {
		case deferIt:
			deferrals = append(deferrals, store.Deferral{Timer: a.t, Delay: delay})
		case failIt:
			if a.t.Failures+1 < p.cfg.MaxAttempts {
				deferrals = append(deferrals, store.Deferral{Timer: a.t, Delay: delay, Failed: true})
				break
			}
			parkings = append(parkings, store.Parking{Timer: a.t, Reason: fmt.Sprintf(
				"the timer's fire failed %d times (SUTRA_TIMER_MAX_ATTEMPTS); the last failure: %s", a.t.Failures+1, a.out.Err)})
		case dropIt:
			stale = append(stale, a.t)
		}
		select {
		case a = <-p.results:
		default:
			more = false
		}
	}
	// Final writes of answered fires: they run even while stopping.
	fctx, cancel := startstop.FinalContext(ctx)
	defer cancel()
	wctx, cancel := context.WithTimeout(fctx, p.cfg.CallTimeout)
	err := p.deps.Store.DeferTimers(wctx, p.cfg.Replica, deferrals)
	cancel()
	if err != nil {
		// The leases lapse and the timers are taken again: deferred all the same.
		p.deps.Logger.Warn("deferring timers", "count", len(deferrals), "code", fault.Code(err), "err", err)
	} else {
		for _, d := range deferrals {
			p.TestSignals.Deferred.Signal(d)
		}
	}
	if len(deferrals) > 0 {
		// Deferred rows are due again soon; the next look must not sleep past them.
		p.wakeBy(p.cfg.Clock.Now().Add(p.cfg.Backoff))
	}
	wctx, cancel = context.WithTimeout(fctx, p.cfg.CallTimeout)
	parked, err := p.deps.Store.ParkTimers(wctx, p.cfg.Replica, parkings)
	cancel()
	if err != nil {
		// The leases lapse and the timers fire again; the next failure parks them.
		p.deps.Logger.Warn("parking failed timers", "count", len(parkings), "code", fault.Code(err), "err", err)
	}
	for _, pt := range parked {
		p.deps.Logger.Error("timer stopped in an incident after failing repeatedly; retry it with POST /v1/incidents/{id}/retry",
			"timer_id", pt.TimerID, "incident_id", pt.IncidentID, "code", fault.IncidentTimerFailed, "max_attempts", p.cfg.MaxAttempts)
		p.TestSignals.Parked.Signal(pt)
	}
	wctx, cancel = context.WithTimeout(fctx, p.cfg.CallTimeout)
	dropped, err := p.deps.Store.DropTimers(wctx, p.cfg.Replica, stale)
	cancel()
	if err != nil {
		p.deps.Logger.Warn("dropping stale timers", "count", len(stale), "code", fault.Code(err), "err", err)
	}
	for _, id := range dropped {
		p.deps.Logger.Warn("deleted a timer row whose wait no longer exists", "timer_id", id, "code", fault.NotWaiting)
	}
	p.TestSignals.Answered.Signal(n)
	return n
}

// wakeBy makes sure the poller looks by t.
func (p *Poller) wakeBy(t time.Time) {
	if t.UnixNano() < p.sleepUntil.Load() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

type action int

const (
	doneIt  action = iota // committed: the commit deleted the row
	deferIt               // try again later; the row stays
	failIt                // failed: try again later, or park it at the cap
	dropIt                // stale: the wait is gone
)

// classify decides what an outcome means for the timer row and counts it.
func (p *Poller) classify(a answered) action {
	m, log := p.deps.Metrics, p.deps.Logger
	switch a.out.Kind {
	case lanes.Applied:
		m.TimersFired.Inc()
		m.TimerFireLag.Observe(a.at.Sub(a.t.DueAt).Seconds())
		return doneIt
	case lanes.Rejected:
		switch a.out.Code {
		case fault.NotWaiting:
			m.TimersStale.Inc()
			return dropIt
		case fault.InstanceExists:
			// A timer start whose lease lapsed while its fire was in flight, fired
			// twice: the other fire started the instance and moved the schedule on.
			m.TimersStale.Inc()
			return dropIt
		case fault.NotFound:
			log.Warn("timer of a missing instance dropped", "instance_id", a.t.InstanceID, "timer_id", a.t.ID, "code", a.out.Code)
			m.TimersStale.Inc()
			return dropIt
		}
		// A step that panics or fails on this fire is a bug: keep the row and
		// retry with backoff rather than lose the fire, up to the cap.
		log.Error("timer fire failed; deferred", "instance_id", a.t.InstanceID, "timer_id", a.t.ID,
			"code", a.out.Code, "failures", a.t.Failures+1, "max_attempts", p.cfg.MaxAttempts, "err", a.out.Err)
		m.TimerDeferrals.WithLabelValues("error").Inc()
		return failIt
	default: // Refused, Retry: the lane already logged and counted the bounce
		reason := a.out.Reason
		if a.out.CountsAsFailure() {
			m.TimerDeferrals.WithLabelValues(reason).Inc()
			return failIt
		}
		if reason == "" {
			reason = "error"
		}
		m.TimerDeferrals.WithLabelValues(reason).Inc()
		return deferIt
	}
}

// drain answers the fires still in flight until hard is cancelled (the stop's
// deadline), then hands back this replica's leases so another replica fires
// them now; an unanswered fire's lease is handed back with the rest.
func (p *Poller) drain(hard context.Context, inflight int) {
	for inflight > 0 {
		select {
		case a := <-p.results:
			inflight -= p.answer(hard, a)
		case <-hard.Done():
			p.deps.Logger.Warn("timer fires still in flight at the stop deadline; their leases are handed back", "count", inflight)
			inflight = 0
		}
	}
	ctx, cancel := startstop.FinalContext(hard)
	defer cancel()
	if err := p.deps.Store.ReleaseTimerLeases(ctx, p.cfg.Replica); err != nil {
		p.deps.Logger.Warn("handing back timer leases", "code", fault.Code(err), "err", err)
	}
}
