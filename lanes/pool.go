// Package lanes runs steps: M lane goroutines per replica, each running one
// step at a time, with resumes routed to lanes by a hash of the instance id.
// Routing is only affinity; the claim is what keeps steps of one instance
// apart, so a resume on the wrong lane bounces off the claim.
package lanes

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Config configures the lane pool.
type Config struct {
	Replica string
	// Lanes is the number of lane goroutines (default 16).
	Lanes int
	// InboxSize bounds each lane's inbox (default 1024). Size it at least the
	// number of resumes that can be in flight at once (AMQP prefetch plus a
	// timer batch) so that dispatch never finds an inbox full.
	InboxSize int
	// ClaimTimeout is the age after which a claim is stale (default 30s).
	ClaimTimeout time.Duration
	// DrainTimeout bounds how long Stop lets queued steps finish (default 10s).
	DrainTimeout time.Duration
}

func (c *Config) setDefaults() {
	defaults.Set(&c.Lanes, 16)
	defaults.Set(&c.InboxSize, 1024)
	defaults.Set(&c.ClaimTimeout, 30*time.Second)
	defaults.Set(&c.DrainTimeout, 10*time.Second)
}

// Hooks let tests inject faults into the pipeline. Nil fields do nothing.
type Hooks struct {
	// Route overrides the lane of a resume (inject mis-routing); return -1 to
	// keep the hash route.
	Route func(r *Resume) int
	// BeforeCommit runs after the engine and before the commit, holding the
	// claim (hold a step open, panic, or clear the claim under it).
	BeforeCommit func(ctx context.Context, lane int, r *Resume)
	// AfterCommit runs after a successful commit, before the outcome is
	// answered (block here to simulate a crash before the ack).
	AfterCommit func(ctx context.Context, lane int, r *Resume)
}

// Deps are the pool's collaborators.
type Deps struct {
	Store   *store.Store
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	Hooks   *Hooks
	// Now is the clock handed to the engine (default time.Now).
	Now func() time.Time
	// TimerArmed, when set, hears the earliest due time of the timers each
	// committed step armed, so the timer poller wakes for it. It must not block.
	TimerArmed func(due time.Time)
}

// Pool is the set of lanes of one replica.
type Pool struct {
	cfg     Config
	deps    Deps
	lanes   []*lane
	started atomic.Bool
	stopped atomic.Bool
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	stopMu  sync.Mutex
}

// errStopped is the cancel cause of a planned stop.
var errStopped = errors.New("lanes: stopped")

// New builds a pool; Start runs it.
func New(deps Deps, cfg Config) *Pool {
	cfg.setDefaults()
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Hooks == nil {
		deps.Hooks = &Hooks{}
	}
	p := &Pool{cfg: cfg, deps: deps}
	for n := range cfg.Lanes {
		p.lanes = append(p.lanes, &lane{
			n:       n,
			pool:    p,
			inbox:   make(chan *Resume, cfg.InboxSize),
			drain:   make(chan struct{}),
			claimer: claims.New(deps.Store, claims.LaneOwner(cfg.Replica, n), cfg.ClaimTimeout),
			depth:   deps.Metrics.LaneDepth.WithLabelValues(strconv.Itoa(n)),
			bounces: map[string]prometheus.Counter{},
		})
	}
	return p
}

// Lanes is the number of lanes.
func (p *Pool) Lanes() int { return len(p.lanes) }

// Running reports whether the lanes are running (for readiness).
func (p *Pool) Running() bool { return p.started.Load() && !p.stopped.Load() }

// Start starts the lane goroutines. They run until Stop.
func (p *Pool) Start(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("lanes: already started")
	}
	ctx, p.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	for _, l := range p.lanes {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			l.run(ctx)
		}()
	}
	return nil
}

// Stop stops accepting resumes, lets queued ones finish within DrainTimeout,
// then cancels what is left: in-flight steps release their claims and queued
// resumes are answered Retry. Callers stop dispatching before they call Stop.
// Safe before Start and twice.
func (p *Pool) Stop() {
	p.stopMu.Lock()
	defer p.stopMu.Unlock()
	if !p.started.Load() || p.stopped.Swap(true) {
		return
	}
	for _, l := range p.lanes {
		close(l.drain)
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(p.cfg.DrainTimeout):
		p.cancel(errStopped)
		<-done
	}
	p.cancel(errStopped)
}

// Lane is the lane an instance id hashes to (FNV-1a).
func (p *Pool) Lane(instanceID string) int {
	h := fnv.New32a()
	h.Write([]byte(instanceID))
	return int(h.Sum32() % uint32(len(p.lanes)))
}

// Dispatch hands r to its lane. It never blocks: a full inbox or a stopped
// pool answers Retry at once.
func (p *Pool) Dispatch(r Resume) {
	n := -1
	if p.deps.Hooks.Route != nil {
		n = p.deps.Hooks.Route(&r)
	}
	if n < 0 {
		key := r.InstanceID
		if key == "" && r.Lookup != nil {
			key = r.Lookup.Message + "\x00" + r.Lookup.CorrelationKey
		}
		n = p.Lane(key)
	}
	p.enqueue(n, &r)
}

// enqueue puts r in lane n's inbox or answers it at once.
func (p *Pool) enqueue(n int, r *Resume) bool {
	if p.stopped.Load() {
		r.Done(Outcome{Kind: Retry, Code: fault.Unavailable, Reason: "shutdown", Err: errStopped})
		return false
	}
	r.enqueued = time.Now()
	l := p.lanes[n]
	select {
	case l.inbox <- r:
		l.depth.Inc()
		return true
	default:
		r.Done(Outcome{Kind: Retry, Code: fault.Unavailable, Reason: "lane_full", Err: errors.New("lanes: inbox full")})
		return false
	}
}
