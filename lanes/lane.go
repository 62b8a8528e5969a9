package lanes

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// lane runs the steps routed to it one at a time.
type lane struct {
	n       int
	pool    *Pool
	inbox   chan *Resume
	claimer *claims.Claimer
	// batches: this lane takes several queued relays at once (BatchMax > 1
	// and a store that batches).
	batches bool
	depth   prometheus.Gauge
	bounces map[string]prometheus.Counter
}

// run is the lane's supervisor: it survives panics in steps. Steps run under
// ctx, which the pool cancels at its stop deadline; quit closes once every
// accepted resume has been answered.
func (l *lane) run(ctx context.Context, quit <-chan struct{}) {
	for {
		select {
		case r := <-l.inbox:
			if l.batches && batchable(r) && (len(l.inbox) > 0 || l.pool.claimer.busy() || l.pool.committer.busy()) {
				l.handleBatch(ctx, r)
			} else {
				l.handle(ctx, r)
			}
		case <-quit:
			return
		}
	}
}

func (l *lane) handle(ctx context.Context, r *Resume) {
	if l.admit(ctx, r) {
		l.runOne(ctx, r)
	}
}

// admit takes r out of the lane's queue: false when it was answered at once
// (the pool is past its stop deadline).
func (l *lane) admit(ctx context.Context, r *Resume) bool {
	l.depth.Dec()
	if ctx.Err() != nil {
		l.pool.answer(r, Outcome{Kind: Retry, Code: fault.Unavailable, Reason: ReasonShutdown, Err: context.Cause(ctx)})
		return false
	}
	l.pool.deps.Metrics.LaneWait.Observe(time.Since(r.enqueued).Seconds())
	return true
}

// runOne runs one admitted resume on its own and answers it.
func (l *lane) runOne(ctx context.Context, r *Resume) {
	if out, answered := l.supervise(ctx, r); answered {
		out.InstanceID = r.InstanceID
		l.pool.answer(r, out)
	}
}

// supervise runs one step and turns a panic into a Rejected outcome. The step
// has already released its claim by the time the panic reaches here.
func (l *lane) supervise(ctx context.Context, r *Resume) (out Outcome, answered bool) {
	defer func() {
		if v := recover(); v != nil {
			out, answered = l.panicked(r, v, debug.Stack()), true
		}
	}()
	return l.step(ctx, r)
}

// panicked is the outcome of a step that panicked with v (stack: where).
func (l *lane) panicked(r *Resume, v any, stack []byte) Outcome {
	l.pool.deps.Metrics.LanePanics.Inc()
	err := fault.New(fault.StepPanic, "panic in step: %v", v)
	l.pool.deps.Logger.Error("step panicked", "instance_id", r.InstanceID, "owner", l.claimer.Owner(),
		"code", fault.StepPanic, "panic", fmt.Sprint(v), "stack", string(stack))
	return Outcome{Kind: Rejected, Code: fault.StepPanic, Err: err}
}

// maxResolves bounds how often one correlate-by-key relay is resolved again
// after the instance it resolved to stopped waiting before its claim.
const maxResolves = 3

// step is the one way a step runs: resolve → claim → load → engine → commit.
// Every exit is listed here; each one that holds the claim releases it (the
// deferred Release, which also runs while a panic unwinds). Errors are
// classified by failure: claim held → Refused; outage (the database cannot
// serve) → Retry, never capped; transient (serialization, deadlock, lock or
// statement timeout) → Retry, capped per relay by the consumer; anything
// else is permanent → Rejected with fault.StepFailed.
//
//	exit                               outcome    claim
//	resolve: no subscription           Rejected   never taken
//	resolve: buffered (ttl)            Buffered   never taken
//	resolve: forwarded                 (other lane answers)
//	claim: duplicate relay             Duplicate  never taken
//	claim: held by another             Refused    never taken
//	claim: not found/definition        Rejected   never taken
//	claim: replica registration lapsed Retry      never taken
//	claim: error, outcome unknown      by class   released by the claim helper
//	start on an existing id            Rejected   released
//	definition load fails              by class   released
//	engine: by-key relay not waiting   (resolved again, forwarded; after
//	                                   maxResolves: Retry)  released
//	engine: task outcome not waiting   Stale      released (the task was cancelled)
//	engine: not waiting / error        Rejected   released
//	engine: past the step deadline     Committed  released by the commit (the tokens
//	                                              left stop in incidents)
//	engine: abandoned at the stop      Retry      released
//	deadline
//	commit: timer row gone             Rejected   released (a stale fire)
//	commit: too large (StepTooLarge)   Rejected   released (nothing written)
//	commit: too large, a task outcome  Committed  released by the commit (the task
//	                                              fails into an incident instead)
//	panic (engine, hook)               Rejected   released, re-raised to supervise
//	admin op: refused, unreachable     Rejected   released (nothing written)
//	commit fenced                      Retry      not ours any more
//	commit fails                       by class   released
//	commit succeeds                    Committed  released by the commit
func (l *lane) step(ctx context.Context, r *Resume) (Outcome, bool) {
	log := l.pool.deps.Logger
	hooks := l.pool.deps.Hooks
	if r.InstanceID == "" && r.Lookup != nil {
		if out, done := l.lookup(ctx, r); done {
			return out, true
		}
		if hooks.AfterResolve != nil {
			hooks.AfterResolve(ctx, l.n, r)
		}
		if n := l.pool.Lane(r.InstanceID); n != l.n && hooks.Route == nil {
			l.pool.enqueue(n, r) // routing is affinity: the instance's own lane runs it
			return Outcome{}, false
		}
	}
	parent := r.Trigger.Parent
	if r.StartKey != "" && parent != nil {
		// A child whose parent cancelled it before it started never starts.
		if applied, err := l.applied(ctx, store.CancelMessageID(r.InstanceID)); err != nil || applied {
			if err != nil {
				return l.failure(ctx, r, err), true
			}
			return Outcome{Kind: Stale, Code: fault.NotWaiting}, true
		}
	}

	start := time.Now()
	req := claims.Request{InstanceID: r.InstanceID, InboxID: r.InboxID, StartKey: r.StartKey, StartVersion: r.StartVersion,
		StartCorrelationKey: r.StartCorrelationKey}
	if parent != nil {
		req.ParentID = parent.InstanceID
	}
	cctx, cancel := l.call(ctx)
	held, err := l.claimer.Claim(cctx, req)
	cancel()
	if err != nil {
		return l.claimFailure(ctx, r, err), true
	}
	defer func() {
		if err := held.Release(ctx); err != nil {
			log.Error("releasing claim; the sweep will clear it", "instance_id", r.InstanceID, "owner", held.Owner(), "code", fault.Code(err), "err", err)
		}
	}()

	inst := held.Instance
	if r.StartKey != "" && inst.Version > 0 {
		return l.reject(ctx, r, fault.New(fault.InstanceExists, "instance %s already exists", r.InstanceID)), true
	}
	cctx, cancel = l.call(ctx)
	proc, err := l.pool.deps.Store.Process(cctx, inst.DefinitionKey, inst.DefinitionVersion)
	cancel()
	if err != nil {
		return l.failure(ctx, r, err), true
	}
	trigger, state := r.Trigger, inst.State
	if r.StartKey != "" {
		// A start's row holds no state yet: the engine starts from the zero State.
		trigger.Kind, state = engine.TriggerStart, engine.State{}
	}
	in := engine.Instance{ID: inst.ID, Version: inst.Version, State: state}
	var res OpResult
	if r.Op != nil {
		cctx, cancel = context.WithTimeout(ctx, l.pool.cfg.StepTimeout)
		res, err = r.Op(cctx, l.pool.deps.Store, proc, in, l.pool.deps.Now())
		cancel()
	} else {
		res.State, res.Effects, err = l.engine(ctx, proc, in, trigger)
	}
	next, effects := res.State, res.Effects
	if res.Process != nil {
		proc = res.Process
	}
	if err != nil && ctx.Err() != nil {
		return Outcome{Kind: Retry, Code: fault.Unavailable, Reason: ReasonShutdown, Err: err}, true
	}
	if err != nil {
		if fault.Code(err) == fault.NotWaiting && r.Lookup != nil && r.StartKey == "" {
			return l.resolveAgain(ctx, r, held, err)
		}
		if fault.Code(err) == fault.NoStartEvent && parent != nil {
			return l.childFailed(ctx, r, err), true
		}
		if fault.Code(err) == "" {
			err = fault.Wrap(fault.StepFailed, err, "step of %s", inst.ID)
		}
		return l.reject(ctx, r, err), true
	}
	if h := hooks.BeforeCommit; h != nil {
		h(ctx, l.n, r)
	}
	err = l.commit(ctx, held, proc, res.DefinitionVersion, r, next, effects)
	if fault.Code(err) == fault.StepTooLarge && r.Op == nil && isTaskOutcome(trigger.Kind) {
		err = l.taskTooLarge(ctx, held, proc, r, state, err)
	}
	return l.finish(ctx, r, held, start, err), true
}

func isTaskOutcome(k engine.TriggerKind) bool {
	return k == engine.TriggerTaskCompleted || k == engine.TriggerTaskError
}

// taskTooLarge commits, in place of a task outcome's step refused as too
// large, the task's failure into an incident on its element (the outcome's
// variables dropped): the worker was answered 204 long ago, and a dead letter
// would leave the task completing and its instance waiting for good. Retrying
// the incident creates the task again. Should that step be refused too, the
// outcome is dead-lettered with cause.
func (l *lane) taskTooLarge(ctx context.Context, held *claims.Held, proc *bpmn.Process, r *Resume, state engine.State, cause error) error {
	tr := engine.Trigger{Kind: engine.TriggerTaskFailed, TokenID: r.Trigger.TokenID, Element: r.Trigger.Element, ErrorMessage: cause.Error()}
	next, eff, err := l.engine(ctx, proc, engine.Instance{ID: held.Instance.ID, Version: held.Instance.Version, State: state}, tr)
	if err != nil {
		return cause
	}
	if err := l.commit(ctx, held, proc, 0, r, next, eff); err != nil {
		if fault.Code(err) == fault.StepTooLarge {
			return cause
		}
		return err
	}
	l.pool.deps.Logger.Warn("task outcome too large: the task failed into an incident", "instance_id", held.Instance.ID,
		"owner", held.Owner(), "element", r.Trigger.Element, "code", fault.StepTooLarge, "err", cause)
	return nil
}

// finish answers a step by its commit's error: the last rows of the exit
// table, shared by the single and the batch path.
func (l *lane) finish(ctx context.Context, r *Resume, held *claims.Held, start time.Time, err error) Outcome {
	if err != nil {
		if fault.Code(err) == fault.StepFenced {
			l.pool.deps.Metrics.StepsFenced.Inc()
			l.pool.deps.Logger.Warn("step fenced: claim swept or stolen, step rolled back", "instance_id", held.Instance.ID,
				"owner", held.Owner(), "code", fault.StepFenced, "version", held.Instance.Version)
			return Outcome{Kind: Retry, Code: fault.StepFenced, Reason: ReasonFenced, Err: err}
		}
		return l.failure(ctx, r, err)
	}
	l.pool.deps.Metrics.StepDuration.Observe(time.Since(start).Seconds())
	l.pool.TestSignals.Committed.Signal(held.Instance.ID)
	if h := l.pool.deps.Hooks.AfterCommit; h != nil {
		h(ctx, l.n, r)
	}
	return Outcome{Kind: Committed}
}

// engine computes a step under the step's deadline and the expression
// limits (engine.StepContext).
func (l *lane) engine(ctx context.Context, proc *bpmn.Process, in engine.Instance, tr engine.Trigger) (engine.State, engine.Effects, error) {
	ctx, cancel := context.WithTimeout(ctx, l.pool.cfg.StepTimeout)
	defer cancel()
	return engine.StepContext(ctx, proc, in, tr, engine.Options{Now: l.pool.deps.Now(), Limits: l.pool.cfg.FeelLimits})
}

// call bounds one database call of a step. Canceling ctx (the stop's
// deadline) cancels it too.
func (l *lane) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.pool.cfg.ClaimTimeout)
}

// lookup finds what a relay by message name goes to: the message start
// events of the latest version of each definition, and the oldest waiting
// subscription. With one target the step goes on (r.InstanceID is set); with
// several the relay is fanned out, one relay per target through the outbox,
// and answered (done).
func (l *lane) lookup(ctx context.Context, r *Resume) (out Outcome, done bool) {
	lk := r.Lookup
	var starts []store.StartTarget
	if !lk.CorrelateOnly {
		cctx, cancel := l.call(ctx)
		all, err := l.pool.deps.Store.MessageStarts(cctx, lk.Message)
		cancel()
		if err != nil {
			return l.failure(ctx, r, err), true
		}
		for _, t := range all {
			if lk.StartOnly == "" || t.Key == lk.StartOnly {
				starts = append(starts, t)
			}
		}
		if lk.StartOnly != "" && len(starts) == 0 {
			return l.reject(ctx, r, fault.New(fault.RelayUncorrelated,
				"the latest version of %q no longer starts with message %q", lk.StartOnly, lk.Message)), true
		}
	}
	if len(starts) == 0 {
		id, err := l.resolve(ctx, r)
		if err != nil {
			return l.failure(ctx, r, err), true
		}
		r.InstanceID = id
		return Outcome{}, false
	}
	correlate := false
	if lk.StartOnly == "" && lk.CorrelationKey != "" {
		cctx, cancel := l.call(ctx)
		_, err := l.pool.deps.Store.ResolveSubscription(cctx, lk.Message, lk.CorrelationKey, r.InboxID)
		cancel()
		switch {
		case err == nil:
			correlate = true
		case fault.Code(err) != fault.RelayUncorrelated:
			return l.failure(ctx, r, err), true
		}
	}
	if len(starts) > 1 || correlate {
		keys := make([]string, len(starts))
		for i, t := range starts {
			keys[i] = t.Key
		}
		relays, err := store.FanOut(r.InboxID, lk.Message, lk.CorrelationKey, r.Trigger.Variables, lk.TTL, keys, correlate)
		if err == nil {
			err = l.forward(ctx, r.InboxID, "", relays)
		}
		if err != nil {
			return l.failure(ctx, r, err), true
		}
		return Outcome{Kind: Committed}, true
	}
	t := starts[0]
	r.StartKey, r.StartCorrelationKey = t.Key, lk.CorrelationKey
	r.InstanceID = InstanceIDFor(store.StartMessageID(t.Key, r.InboxID))
	r.Trigger = engine.Trigger{Kind: engine.TriggerStart, Element: t.Element, Message: lk.Message, Variables: r.Trigger.Variables}
	return Outcome{}, false
}

// resolve finds the instance a correlate-by-key relay goes to; a relay with a
// TTL that no subscription matches yet is buffered (store.ErrBuffered).
func (l *lane) resolve(ctx context.Context, r *Resume) (string, error) {
	ctx, cancel := l.call(ctx)
	defer cancel()
	lk := r.Lookup
	if lk.TTL <= 0 {
		return l.pool.deps.Store.ResolveSubscription(ctx, lk.Message, lk.CorrelationKey, r.InboxID)
	}
	return l.pool.deps.Store.ResolveOrBuffer(ctx, store.Buffer{
		Message: lk.Message, CorrelationKey: lk.CorrelationKey, MessageID: r.InboxID, TTL: lk.TTL,
		Variables: r.Trigger.Variables, Body: lk.Body, RoutingKey: lk.RoutingKey,
	})
}

// resolveAgain handles a correlate-by-key relay whose instance stopped
// waiting between its resolve and its claim (another step consumed the
// subscription): the relay is resolved afresh, since another instance may
// wait for it, and with a TTL it is buffered if none does. It is never
// dead-lettered for a race it lost.
func (l *lane) resolveAgain(ctx context.Context, r *Resume, held *claims.Held, cause error) (Outcome, bool) {
	if err := held.Release(ctx); err != nil {
		l.pool.deps.Logger.Error("releasing claim; the sweep will clear it", "instance_id", r.InstanceID, "owner", held.Owner(), "code", fault.Code(err), "err", err)
	}
	if r.resolves++; r.resolves > maxResolves {
		return Outcome{Kind: Retry, Code: fault.Transient, Reason: ReasonTransient,
			Err: fault.Wrap(fault.Transient, cause, "message %q resolved %d times to instances that stopped waiting", r.Lookup.Message, r.resolves)}, true
	}
	r.InstanceID = ""
	l.pool.enqueue(l.pool.route(r), r)
	return Outcome{}, false
}

// claimFailure classifies an error of the claim, with the paths a start or a
// cancellation has that other resumes do not.
func (l *lane) claimFailure(ctx context.Context, r *Resume, err error) Outcome {
	switch {
	case errors.Is(err, store.ErrStartKeyActive):
		return l.startKeyActive(ctx, r, err)
	case fault.Code(err) == fault.UnknownDefinition && r.Trigger.Parent != nil:
		return l.childFailed(ctx, r, err)
	case fault.Code(err) == fault.NotFound && r.Trigger.Kind == engine.TriggerCancel && r.Internal:
		// A child cancelled before it started: record the cancellation, so
		// that its start never runs.
		ferr := l.forward(ctx, r.InboxID, r.InstanceID, nil)
		if ferr != nil && !errors.Is(ferr, store.ErrDuplicate) {
			return l.failure(ctx, r, ferr)
		}
		return Outcome{Kind: Stale, Code: fault.NotFound}
	}
	return l.failure(ctx, r, err)
}

// startKeyActive answers a message start refused because an active instance
// of the definition holds its correlation key: with a ttl it waits in the
// buffer for that instance to end; without one it is dead-lettered.
func (l *lane) startKeyActive(ctx context.Context, r *Resume, err error) Outcome {
	lk := r.Lookup
	if lk == nil || lk.TTL <= 0 {
		return l.reject(ctx, r, fault.Wrap(fault.StartKeyActive, err,
			"an active instance of %q holds correlation key %q", r.StartKey, r.StartCorrelationKey))
	}
	cctx, cancel := l.call(ctx)
	berr := l.pool.deps.Store.BufferStart(cctx, r.StartKey, store.Buffer{Message: lk.Message, CorrelationKey: lk.CorrelationKey,
		MessageID: r.InboxID, TTL: lk.TTL, Variables: r.Trigger.Variables, Body: lk.Body, RoutingKey: lk.RoutingKey})
	cancel()
	if berr == nil {
		// The instance ended meanwhile: start on the next try.
		return Outcome{Kind: Retry, Code: fault.Transient, Reason: ReasonTransient, Err: err}
	}
	return l.failure(ctx, r, berr)
}

// childFailed answers a call activity's child that cannot start (its
// definition is not deployed, or has no start event to begin at): its parent
// hears of it instead, as an incident on the call activity.
func (l *lane) childFailed(ctx context.Context, r *Resume, cause error) Outcome {
	relay, err := store.ChildFailedRelay(r.InstanceID, *r.Trigger.Parent, fault.Reason(cause))
	if err == nil {
		err = l.forward(ctx, r.InboxID, r.InstanceID, []store.RelayOut{relay})
	}
	if err != nil {
		return l.failure(ctx, r, err)
	}
	return Outcome{Kind: Committed}
}

// forward records relay inboxID as applied without a step and writes relays
// to the outbox (store.Forward, which wakes the outbox publisher).
func (l *lane) forward(ctx context.Context, inboxID, instanceID string, relays []store.RelayOut) error {
	cctx, cancel := l.call(ctx)
	defer cancel()
	return l.pool.deps.Store.Forward(cctx, inboxID, instanceID, relays)
}

// applied reports whether a relay message id was applied (bounded call).
func (l *lane) applied(ctx context.Context, id string) (bool, error) {
	cctx, cancel := l.call(ctx)
	defer cancel()
	return l.pool.deps.Store.Applied(cctx, id)
}

// maxConsumed bounds the buffered messages one step applies. Past it the
// step commits without looking at the buffer again; what is left waits for
// the next subscription or its TTL.
const maxConsumed = 32

// nextFire is when a timer start event's schedule fires next after the fire
// r (zero: never again, or r is no such fire). The schedule follows the due
// times, not the fire times, so a late fire does not shift it.
func (l *lane) nextFire(proc *bpmn.Process, r *Resume) time.Time {
	if r.Schedule == nil || r.Schedule.Start == nil {
		return time.Time{}
	}
	due, ok, err := engine.NextStart(proc.Element(r.Trigger.Element), r.Schedule.DueAt, r.Schedule.Start.Fired+1)
	if err != nil {
		// Deploy computed the first fire from the same value, so this is a bug:
		// this fire still starts its instance, and the schedule ends.
		l.pool.deps.Logger.Error("timer start schedule ends: its next fire cannot be computed", "instance_id", r.InstanceID,
			"definition", proc.ID, "element", r.Trigger.Element, "code", fault.Code(err), "err", err)
		return time.Time{}
	}
	if !ok {
		return time.Time{}
	}
	return due
}

// commit commits the step. When a subscription the step opened matches a
// buffered message, the commit rolls back with the claim still held: the
// message is applied to the step's state as one more trigger and everything
// commits in one transaction, so a buffered message is consumed exactly when
// its step commits. Then the timer poller hears of timers armed, the task
// API of tasks created and the outbox publisher of rows written.
func (l *lane) commit(ctx context.Context, held *claims.Held, proc *bpmn.Process, defVersion int, r *Resume, state engine.State, eff engine.Effects) error {
	x := claims.Extras{InboxID: r.InboxID, TimerID: r.TimerID, RearmAt: l.nextFire(proc, r), DefinitionVersion: defVersion}
	if r.Op == nil {
		// The step ran on proc from the state its claim loaded: the engine
		// tells which tables its closed waits have rows in. (An admin
		// operation may change the definition: its closes look everywhere.)
		x.CloseTables = engine.CloseTables(proc, held.Instance.State, eff.CloseWaits)
	}
	st := state
	for {
		cctx, cancel := l.call(ctx)
		err := held.Commit(cctx, st, eff, x)
		cancel()
		var m *store.BufferedMatch
		switch {
		case errors.As(err, &m):
			in := engine.Instance{ID: held.Instance.ID, Version: held.Instance.Version, State: st}
			tr := engine.Trigger{Kind: engine.TriggerMessage, Message: m.Message, CorrelationKey: m.CorrelationKey, Variables: m.Variables}
			next, more, serr := l.engine(ctx, proc, in, tr)
			if serr != nil {
				// The subscription is open in st, so the engine should accept the
				// message. If it does not (a bug), the step commits without it
				// rather than never: the message stays buffered until its TTL
				// dead-letters it.
				l.pool.deps.Logger.Error("buffered message not applicable; left buffered", "instance_id", in.ID,
					"owner", held.Owner(), "message_id", m.MessageID, "code", fault.Code(serr), "err", serr)
				x.SkipBufferCheck = true
				continue
			}
			st = next
			x.Consumed = append(x.Consumed, store.Consumed{BufferedID: m.ID, Effects: more})
			x.SkipBufferCheck = len(x.Consumed) >= maxConsumed
		case errors.Is(err, store.ErrBufferedGone):
			// Another step consumed it first: commit the step without it.
			st, x.Consumed, x.SkipBufferCheck = state, nil, false
		case err != nil:
			return err
		default:
			l.committed(eff, x.Consumed)
			return nil
		}
	}
}

// committed tells the timer poller and the task API what a committed step
// wrote for them (the store wakes the outbox publisher itself).
func (l *lane) committed(eff engine.Effects, consumed []store.Consumed) {
	l.pool.deps.Metrics.BufferedConsumed.Add(float64(len(consumed)))
	l.armed(eff, consumed)
	l.tasksCreated(eff, consumed)
}

// armed tells the timer poller the earliest timer the commit armed.
func (l *lane) armed(eff engine.Effects, consumed []store.Consumed) {
	notify := l.pool.deps.TimerArmed
	if notify == nil {
		return
	}
	first := earliest(time.Time{}, eff.Timers)
	for _, c := range consumed {
		first = earliest(first, c.Effects.Timers)
	}
	if !first.IsZero() {
		notify(first)
	}
}

// tasksCreated tells the task API the topic of each task the commit
// created (a long poll is woken per task).
func (l *lane) tasksCreated(eff engine.Effects, consumed []store.Consumed) {
	notify := l.pool.deps.TasksCreated
	if notify == nil {
		return
	}
	var topics []string
	add := func(ts []engine.Task) {
		for _, t := range ts {
			if t.Type != "" {
				topics = append(topics, t.Type)
			}
		}
	}
	add(eff.Tasks)
	for _, c := range consumed {
		add(c.Effects.Tasks)
	}
	if len(topics) > 0 {
		notify(topics)
	}
}

func earliest(first time.Time, ts []engine.Timer) time.Time {
	for _, t := range ts {
		if first.IsZero() || t.DueAt.Before(first) {
			first = t.DueAt
		}
	}
	return first
}

// reject answers a resume that can never apply, unless it is a relay that a
// copy of it already applied: then it is a duplicate, never a dead letter;
// or a task outcome whose task was cancelled meanwhile: then it is stale.
func (l *lane) reject(ctx context.Context, r *Resume, err error) Outcome {
	if r.InboxID != "" {
		applied, aerr := l.applied(ctx, r.InboxID)
		if aerr != nil {
			return l.failure(ctx, r, aerr)
		}
		if applied {
			return Outcome{Kind: Duplicate}
		}
	}
	if r.Internal && fault.Code(err) == fault.NotWaiting {
		return Outcome{Kind: Stale, Code: fault.NotWaiting, Err: err}
	}
	return Outcome{Kind: Rejected, Code: fault.Code(err), Err: err}
}

// failure classifies an error of resolve, claim, load or commit.
func (l *lane) failure(ctx context.Context, r *Resume, err error) Outcome {
	log := l.pool.deps.Logger
	var held *store.ClaimHeldError
	switch code := fault.Code(err); {
	case errors.Is(err, store.ErrDuplicate):
		return Outcome{Kind: Duplicate}
	case errors.Is(err, store.ErrBuffered):
		return Outcome{Kind: Buffered}
	case errors.As(err, &held):
		l.bounce(r.Path).Inc()
		log.Info("claim refused", "instance_id", r.InstanceID, "owner", l.claimer.Owner(), "code", fault.ClaimHeld,
			"path", r.Path, "holder", held.Holder, "claim_age", held.Age)
		return Outcome{Kind: Refused, Code: fault.ClaimHeld, Reason: ReasonClaimHeld, Err: err}
	case code == fault.NotFound, code == fault.UnknownDefinition, code == fault.RelayUncorrelated, code == fault.NotWaiting:
		return Outcome{Kind: Rejected, Code: code, Err: err}
	case code == fault.StepTooLarge:
		log.Warn("step refused: too large", "instance_id", r.InstanceID, "owner", l.claimer.Owner(), "code", code, "err", err)
		return Outcome{Kind: Rejected, Code: code, Err: err}
	case ctx.Err() != nil:
		return Outcome{Kind: Retry, Code: fault.Unavailable, Reason: ReasonShutdown, Err: err}
	case code == fault.Unavailable:
		log.Warn("database unavailable", "instance_id", r.InstanceID, "owner", l.claimer.Owner(), "code", code, "err", err)
		return Outcome{Kind: Retry, Code: code, Reason: ReasonUnavailable, Err: err}
	case code == fault.Transient:
		log.Warn("step failed transiently; retried", "instance_id", r.InstanceID, "owner", l.claimer.Owner(), "code", code, "err", err)
		return Outcome{Kind: Retry, Code: code, Reason: ReasonTransient, Err: err}
	default:
		err = fault.Wrap(fault.StepFailed, err, "step of %s can never apply", r.InstanceID)
		log.Error("step failed permanently", "instance_id", r.InstanceID, "owner", l.claimer.Owner(), "code", fault.StepFailed, "err", err)
		return Outcome{Kind: Rejected, Code: fault.StepFailed, Err: err}
	}
}

// bounce is the claim-bounce counter of a path, cached per lane.
func (l *lane) bounce(path string) prometheus.Counter {
	c, ok := l.bounces[path]
	if !ok {
		c = l.pool.deps.Metrics.ClaimBounces.WithLabelValues(path)
		l.bounces[path] = c
	}
	return c
}
