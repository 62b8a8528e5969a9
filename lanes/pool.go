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

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
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
	// ClaimTimeout is the age after which a claim is stale (default 30s). It
	// also bounds each database call of a step: a step that takes longer
	// would be swept and fenced anyway.
	ClaimTimeout time.Duration
	// BatchMax bounds the steps a lane claims in one statement and commits
	// in one transaction, taken from what is already queued in its inbox
	// (default 64; 1 turns batching off).
	BatchMax int
	// BatchWait is the longest a batch waits for other lanes' batches to
	// share its claim and its commit, and it waits only while relays reach
	// the lanes at two or more per wait on average (arrivals; 0, the
	// default here: never; the worker's default is 2ms, SUTRA_BATCH_WAIT).
	BatchWait time.Duration
	// StepTimeout bounds the engine's computation of one step, or an admin
	// operation's (default 5s). Past it the expression being evaluated and
	// every token left stop in incidents (SUTRA.INCIDENT.EXPRESSION_LIMIT),
	// which the step commits like any other outcome.
	StepTimeout time.Duration
	// FeelLimits bound each evaluation of an expression (zero fields:
	// feel's defaults).
	FeelLimits feel.Limits
	// NoStepHistory leaves out each step's row in the step history
	// (SUTRA_STEP_HISTORY=false): a cheap step's row writes nearly double
	// with it.
	NoStepHistory bool
}

func (c *Config) setDefaults() {
	defaults.Set(&c.Lanes, 16)
	defaults.Set(&c.BatchMax, 64)
	defaults.Set(&c.InboxSize, 1024)
	defaults.Set(&c.ClaimTimeout, 30*time.Second)
	defaults.Set(&c.StepTimeout, 5*time.Second)
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Hooks let tests inject faults into the pipeline. Nil fields do nothing.
type Hooks struct {
	// Route overrides the lane of a resume (inject mis-routing); return -1 to
	// keep the hash route.
	Route func(r *Resume) int
	// AfterResolve runs after a correlate-by-key relay was resolved to an
	// instance and before its claim (make the instance stop waiting).
	AfterResolve func(ctx context.Context, lane int, r *Resume)
	// BeforeCommit runs after the engine and before the commit, holding the
	// claim (hold a step open, panic, or clear the claim under it).
	BeforeCommit func(ctx context.Context, lane int, r *Resume)
	// AfterCommit runs after a successful commit, before the outcome is
	// answered (block here to simulate a crash before the ack).
	AfterCommit func(ctx context.Context, lane int, r *Resume)
}

// Store is what the lanes need from the database (*store.Store).
type Store interface {
	claims.Store
	Process(ctx context.Context, key string, version int) (*bpmn.Process, error)
	CalledDecisions(ctx context.Context, proc *bpmn.Process, version int) (engine.Decisions, error)
	CalledVersion(ctx context.Context, key, binding, tag, parent string) (int, error)
	ResolveSubscription(ctx context.Context, name, key, inboxID string) (string, error)
	ResolveOrBuffer(ctx context.Context, b store.Buffer) (string, error)
	Applied(ctx context.Context, inboxID string) (bool, error)
	MessageStarts(ctx context.Context, message string) ([]store.StartTarget, error)
	BroadcastSignal(ctx context.Context, id, name string, vars map[string]any) (store.SignalReach, error)
	BufferStart(ctx context.Context, definition string, b store.Buffer) error
	Forward(ctx context.Context, inboxID, instanceID string, rs []store.RelayOut) error
}

// Deps are the pool's collaborators.
type Deps struct {
	Store   Store
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	Hooks   *Hooks
	// Now is the clock handed to the engine (default time.Now).
	Now func() time.Time
	// TimerArmed, when set, hears the earliest due time of the timers each
	// committed step armed, so the timer poller wakes for it. It must not block.
	TimerArmed func(due time.Time)
	// TasksCreated, when set, hears each pull task a committed step
	// created, by its key, so that a waiting fetch locks it at once without
	// looking for it. It must not block.
	TasksCreated func(tasks []store.CreatedTask)
	// Ended, when set, hears the id of each instance a committed step of
	// this replica ended (completed, terminated or cancelled), so that a
	// call waiting for its end answers at once. It must not block.
	Ended func(instanceID string)
	// ClaimGuard, when set, runs before every claim and refuses it with its
	// error (the replica's registration lapsed).
	ClaimGuard func() error
}

// Pool is the set of lanes of one replica.
//
// Every resume the pool accepts is answered exactly once, and the lanes keep
// running until every accepted resume has been: a resume forwarded from one
// lane to another (a correlate-by-key relay resolved to an instance of the
// other lane) always finds its lane alive.
type Pool struct {
	startstop.Base
	cfg   Config
	deps  Deps
	lanes []*lane
	// claimer and writer claim and commit the lanes' batches, several
	// lanes' in one statement or transaction when they are ready together.
	claimer *claimGatherer
	writer  *writeGatherer
	// arrivals times the batchable resumes the lanes take;
	// claimedUnwritten counts the batches the claimer has answered whose
	// lanes have not handed them to the writer yet (nor given up): the
	// writer's groups wait for those; writtenUnclaimed counts the lanes the
	// writer has answered that have not handed their next batch to the
	// claimer yet (nor found nothing to batch): the claimer's groups wait
	// for those. So the lanes whose steps were ready together go on
	// together, one cohort, and a cohort costs the statements and the WAL
	// flush of one lane's batch whatever the lane count.
	arrivals         *arrivals
	claimedUnwritten atomic.Int32
	writtenUnclaimed atomic.Int32
	// adminLane runs administrative resumes under the replica's admin owner,
	// beside the lanes (an admin call must meet a lane's claim, not queue
	// behind its step). One lane, because an owner id belongs to one lane:
	// two lanes sharing the admin owner would re-enter each other's claims.
	adminLane *lane

	mu        sync.RWMutex // accepting vs. the stop
	accepting bool
	pending   sync.WaitGroup // accepted resumes not answered yet

	TestSignals TestSignals
}

// TestSignals tell tests what the lanes did; inert unless Init'ed.
type TestSignals struct {
	// Committed carries the instance id of every step committed, just after
	// its commit (before Hooks.AfterCommit and the outcome's answer).
	Committed testsignal.Signal[string]
	// Queued is signalled as each resume enters a lane's inbox.
	Queued testsignal.Signal[struct{}]
	// Stopping is signalled once the stop has begun: the pool accepts no
	// more resumes and finishes those it took.
	Stopping testsignal.Signal[struct{}]
}

// New builds a pool; Start runs it.
func New(deps Deps, cfg Config) *Pool {
	cfg.setDefaults()
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Hooks == nil {
		deps.Hooks = &Hooks{}
	}
	p := &Pool{cfg: cfg, deps: deps, arrivals: newArrivals(cfg.BatchWait)}
	p.claimer = newClaimGatherer(cfg.ClaimTimeout, cfg.BatchWait, cfg.Lanes,
		func() bool { return p.writtenUnclaimed.Load() > 0 }, func(n int) { p.claimedUnwritten.Add(int32(n)) })
	p.writer = newWriteGatherer(cfg.ClaimTimeout, cfg.BatchWait, cfg.Lanes,
		func() bool { return p.claimedUnwritten.Load() > 0 }, func(n int) { p.writtenUnclaimed.Add(int32(n)) })
	p.adminLane = &lane{
		n:       cfg.Lanes,
		pool:    p,
		inbox:   make(chan *Resume, cfg.InboxSize),
		claimer: claims.New(deps.Store, claims.AdminOwner(cfg.Replica), cfg.ClaimTimeout, deps.ClaimGuard),
		depth:   deps.Metrics.LaneDepth.WithLabelValues("admin"),
		bounces: map[string]prometheus.Counter{},
	}
	for n := range cfg.Lanes {
		claimer := claims.New(deps.Store, claims.LaneOwner(cfg.Replica, n), cfg.ClaimTimeout, deps.ClaimGuard)
		p.lanes = append(p.lanes, &lane{
			n:       n,
			pool:    p,
			inbox:   make(chan *Resume, cfg.InboxSize),
			claimer: claimer,
			batches: cfg.BatchMax > 1 && claimer.Batches(),
			depth:   deps.Metrics.LaneDepth.WithLabelValues(strconv.Itoa(n)),
			bounces: map[string]prometheus.Counter{},
		})
	}
	return p
}

// Lanes is the number of lanes.
func (p *Pool) Lanes() int { return len(p.lanes) }

// Running reports whether the lanes accept resumes (for readiness).
func (p *Pool) Running() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.accepting
}

// Start starts the lane goroutines. Stop (startstop.Base) first stops
// accepting resumes (they are answered Retry at once) and lets the accepted
// ones finish; at its deadline it cancels the steps in flight, which release
// their claims, and answers what is still queued with Retry.
//
// A resume dispatched once Start has returned is taken: the pool accepts
// before Start returns, not when its goroutine gets to run (a relay handed
// in at once was answered Retry as if the pool were stopping).
func (p *Pool) Start(ctx context.Context) error {
	// Held across Run so that the loop's stop, which takes mu to stop
	// accepting, cannot come before this.
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.Run(ctx, "lanes", p.run); err != nil {
		return err
	}
	p.accepting = true
	return nil
}

func (p *Pool) run(soft, hard context.Context) {
	quit, gathered := make(chan struct{}), make(chan struct{})
	var wg, gatherers sync.WaitGroup
	gatherers.Go(func() { p.claimer.loop(hard, gathered) })
	gatherers.Go(func() { p.writer.loop(hard, gathered) })
	for _, l := range append(p.lanes, p.adminLane) {
		wg.Go(func() { l.run(hard, quit) })
	}
	<-soft.Done()
	p.mu.Lock()
	p.accepting = false
	p.mu.Unlock()
	p.TestSignals.Stopping.Signal(struct{}{})
	p.pending.Wait() // after hard, every step answers at once
	close(quit)
	wg.Wait()
	close(gathered) // no lane is left to hand them a batch
	gatherers.Wait()
}

// Lane is the lane an instance id hashes to (FNV-1a).
func (p *Pool) Lane(instanceID string) int {
	h := fnv.New32a()
	h.Write([]byte(instanceID))
	return int(h.Sum32() % uint32(len(p.lanes)))
}

// route is the lane of r: its instance's, or for a correlate-by-key relay
// that is not resolved yet, its message's.
func (p *Pool) route(r *Resume) int {
	if p.deps.Hooks.Route != nil {
		if n := p.deps.Hooks.Route(r); n >= 0 {
			return n
		}
	}
	key := r.id
	if c, ok := r.Cause.(Correlate); ok && key == "" {
		key = c.routeKey()
	}
	return p.Lane(key)
}

// Dispatch hands r to its lane. It never blocks: a full inbox or a stopped
// pool answers Retry at once.
func (p *Pool) Dispatch(r Resume) {
	p.mu.RLock()
	if !p.accepting {
		p.mu.RUnlock()
		r.Done(Result{Kind: Retry, Code: fault.Unavailable, Reason: ReasonShutdown, Err: startstop.ErrStopped})
		return
	}
	p.pending.Add(1)
	p.mu.RUnlock()
	if r.Cause == nil {
		p.answer(&r, Result{Kind: Rejected, Code: fault.StepFailed, Err: fault.New(fault.StepFailed, "lanes: a resume without a cause")})
		return
	}
	r.id = r.Cause.instanceID()
	if r.Admin() {
		p.enqueueTo(p.adminLane, &r)
		return
	}
	p.enqueue(p.route(&r), &r)
}

// enqueue puts an accepted resume in lane n's inbox, or answers it.
func (p *Pool) enqueue(n int, r *Resume) { p.enqueueTo(p.lanes[n], r) }

func (p *Pool) enqueueTo(l *lane, r *Resume) {
	r.enqueued = time.Now()
	select {
	case l.inbox <- r:
		l.depth.Inc()
		p.TestSignals.Queued.Signal(struct{}{})
	default:
		p.answer(r, Result{Kind: Retry, Code: fault.Unavailable, Reason: ReasonLaneFull, Err: errors.New("lanes: inbox full")})
	}
}

// answer gives an accepted resume its outcome: the one place that does.
func (p *Pool) answer(r *Resume, out Result) {
	r.Done(out)
	p.pending.Done()
}
