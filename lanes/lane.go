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
	// owed: the writer answered this lane's batch and the claimer's
	// groups wait for its next one (Pool.writtenUnclaimed) until it hands
	// one in or settles.
	owed bool
}

// settle takes the lane out of the claimer's cohort: it hands in no batch
// now (its inbox is empty, or what it runs next runs on its own).
func (l *lane) settle() {
	if l.owed {
		l.owed = false
		l.pool.writtenUnclaimed.Add(-1)
	}
}

// run is the lane's supervisor: it survives panics in steps. Steps run under
// ctx, which the pool cancels at its stop deadline; quit closes once every
// accepted resume has been answered.
func (l *lane) run(ctx context.Context, quit <-chan struct{}) {
	for {
		if len(l.inbox) == 0 {
			l.settle()
		}
		select {
		case r := <-l.inbox:
			// A batchable relay goes to a batch; any chainable resume
			// does when others wait behind it, to chain with its
			// instance's.
			if l.batches && chainable(r) {
				wait := batchable(r) && l.pool.arrivals.add(time.Now())
				if wait || len(l.inbox) > 0 || batchable(r) && (l.pool.claimer.busy() || l.pool.writer.busy()) {
					l.handleBatch(ctx, r, wait)
					continue
				}
			}
			l.settle()
			l.handle(ctx, r)
		case <-quit:
			l.settle()
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
		l.pool.answer(r, Result{Kind: Retry, Code: fault.Unavailable, Reason: ReasonShutdown, Err: context.Cause(ctx)})
		return false
	}
	l.pool.deps.Metrics.LaneWait.Observe(time.Since(r.enqueued).Seconds())
	return true
}

// runOne runs one admitted resume on its own and answers it.
func (l *lane) runOne(ctx context.Context, r *Resume) {
	if out, answered := l.supervise(ctx, r); answered {
		out.InstanceID = r.id
		l.pool.answer(r, out)
	}
}

// supervise runs one step and turns a panic into a Rejected outcome. The step
// has already released its claim by the time the panic reaches here.
func (l *lane) supervise(ctx context.Context, r *Resume) (out Result, answered bool) {
	defer func() {
		if v := recover(); v != nil {
			out, answered = l.panicked(r, v, debug.Stack()), true
		}
	}()
	return l.step(ctx, r)
}

// panicked is the outcome of a step that panicked with v (stack: where).
func (l *lane) panicked(r *Resume, v any, stack []byte) Result {
	l.pool.deps.Metrics.LanePanics.Inc()
	err := fault.New(fault.StepPanic, "panic in step: %v", v)
	l.pool.deps.Logger.Error("step panicked", "instance_id", r.id, "owner", l.claimer.Owner(),
		"code", fault.StepPanic, "panic", fmt.Sprint(v), "stack", string(stack))
	return Result{Kind: Rejected, Code: fault.StepPanic, Err: err}
}

// step is the one way a step runs: the cause's work before the claim →
// claim → load the definition → compute → commit. Every exit is listed here;
// each one that holds the claim releases it (the deferred Release, which also
// runs while a panic unwinds). Errors are classified by failure: claim held →
// Refused; outage (the database cannot serve) → Retry, never capped;
// transient (serialization, deadlock, lock or statement timeout) → Retry,
// capped per relay by the consumer; anything else is permanent → Rejected
// with fault.StepFailed. Rows that name a kind are that kind's own exits
// (kinds.go, correlate.go); the others are every kind's.
//
//	exit                               outcome    claim
//	Correlate: no subscription         Rejected   never taken
//	Correlate: buffered (ttl)          Buffered   never taken
//	Correlate: several targets         Applied    never taken (fanned out
//	                                              through the outbox)
//	Correlate: found, other lane       (other lane answers)
//	Start (child): parent cancelled it Stale      never taken
//	ScheduledStart: not a schedule row Rejected   never taken
//	SignalBroadcast: broadcast         Applied    never taken (one Signal relay
//	                                              per target through the outbox)
//	SignalBroadcast: already applied   Duplicate  never taken
//	claim: duplicate relay             Duplicate  never taken
//	claim: held by another             Refused    never taken
//	claim: not found/definition        Rejected   never taken
//	Start (child): definition unknown  Applied    never taken (the parent's
//	                                              incident is relayed)
//	CancelChild: child not found       Stale      never taken (the cancellation
//	                                              is recorded)
//	messageStart: key held by an       Retry      never taken (buffered first)
//	active instance, ttl
//	messageStart: same, no ttl         Rejected   never taken
//	claim: replica registration lapsed Retry      never taken
//	claim: error, outcome unknown      by class   released by the claim helper
//	definition or decisions load fails by class   released
//	start on an existing id            Rejected   released
//	Correlate: instance not waiting    (looked up again, handed on; after
//	                                   maxResolves: Retry)  released
//	Start (child): no start event      Applied    released (the parent's
//	                                              incident is relayed)
//	internal relay: not waiting        Stale      released (the task was cancelled)
//	ChildEnded: before an escalation   Retry      released (capped like a
//	the child relayed earlier                     transient failure)
//	compute: not waiting / error       Rejected   released
//	compute: past the step deadline    Applied    released by the commit (the tokens
//	                                              left stop in incidents)
//	compute: abandoned at the stop     Retry      released
//	deadline
//	AdminOp: refused, unreachable      Rejected   released (nothing written)
//	panic (engine, hook)               Rejected   released, re-raised to supervise
//	commit: timer row gone             Rejected   released (a stale fire)
//	commit: too large (StepTooLarge)   Rejected   released (nothing written)
//	TaskOutcome: too large             Applied    released by the commit (the task
//	                                              fails into an incident instead)
//	commit fenced                      Retry      not ours any more
//	commit fails                       by class   released
//	commit succeeds                    Applied    released by the commit
func (l *lane) step(ctx context.Context, r *Resume) (Result, bool) {
	req, out, nx := r.Cause.prepare(ctx, l, r)
	switch nx {
	case answered:
		return out, true
	case handedOn:
		return Result{}, false
	}

	start := time.Now()
	cctx, cancel := l.call(ctx)
	held, err := l.claimer.Claim(cctx, req)
	cancel()
	if err != nil {
		return l.claimFailure(ctx, r, err), true
	}
	defer func() {
		if err := held.Release(ctx); err != nil {
			l.pool.deps.Logger.Error("releasing claim; the sweep will clear it", "instance_id", r.id, "owner", held.Owner(), "code", fault.Code(err), "err", err)
		}
	}()

	inst := held.Instance
	c, err := l.load(ctx, held)
	if err != nil {
		return l.failure(ctx, r, err), true
	}
	res, err := r.Cause.compute(ctx, l, r, c)
	if err != nil && ctx.Err() != nil {
		return Result{Kind: Retry, Code: fault.Unavailable, Reason: ReasonShutdown, Err: err}, true
	}
	if err != nil {
		if f, ok := r.Cause.(stepFailer); ok {
			if out, answered, handled := f.stepFailed(ctx, l, r, held, err); handled {
				return out, answered
			}
		}
		if fault.Code(err) == "" {
			err = fault.Wrap(fault.StepFailed, err, "step of %s", inst.ID)
		}
		return l.reject(ctx, r, err), true
	}
	if h := l.pool.deps.Hooks.BeforeCommit; h != nil {
		h(ctx, l.n, r)
	}
	err = l.writeStep(ctx, c, r, res, nil)
	if t, ok := r.Cause.(tooLarger); ok && fault.Code(err) == fault.StepTooLarge {
		err = t.tooLarge(ctx, l, r, c, err)
	}
	return l.finish(ctx, r, held, start, err), true
}

// load reads the definition the claimed instance runs on and, when its
// business rule tasks call decisions, finds those deployed now by their
// bindings: the engine reads no database, so a step is handed what it may
// evaluate. Both are cached parses; the decisions cost one statement.
func (l *lane) load(ctx context.Context, held *claims.Held) (loaded, error) {
	inst := held.Instance
	cctx, cancel := l.call(ctx)
	defer cancel()
	proc, err := l.pool.deps.Store.Process(cctx, inst.DefinitionKey, inst.DefinitionVersion)
	if err != nil {
		return loaded{}, err
	}
	c := loaded{held: held, inst: inst, proc: proc}
	if len(proc.CalledDecisions()) > 0 {
		c.decisions, err = l.pool.deps.Store.CalledDecisions(cctx, proc, inst.DefinitionVersion)
	}
	return c, err
}

// stepOn computes an engine step from the state the claim loaded.
func (l *lane) stepOn(ctx context.Context, c loaded, tr engine.Trigger) (OpResult, error) {
	inst := c.inst
	st, eff, err := l.engine(ctx, c.proc, c.decisions, engine.Instance{ID: inst.ID, Version: inst.Version, State: inst.State}, tr)
	return OpResult{State: st, Effects: eff}, err
}

// startOn computes the step that starts the instance the claim created: its
// row holds no state yet, so the engine starts from the zero State. A row
// that existed already (Version > 0) is another instance's.
func (l *lane) startOn(ctx context.Context, c loaded, tr engine.Trigger) (OpResult, error) {
	inst := c.inst
	if inst.Version > 0 {
		return OpResult{}, fault.New(fault.InstanceExists, "instance %s already exists", inst.ID)
	}
	tr.Kind = engine.TriggerStart
	st, eff, err := l.engine(ctx, c.proc, c.decisions, engine.Instance{ID: inst.ID, Version: inst.Version}, tr)
	return OpResult{State: st, Effects: eff}, err
}

// finish answers a step by its commit's error: the last rows of the exit
// table, shared by the single and the batch path.
func (l *lane) finish(ctx context.Context, r *Resume, held *claims.Held, start time.Time, err error) Result {
	if err != nil {
		if fault.Code(err) == fault.StepFenced {
			l.pool.deps.Metrics.StepsFenced.Inc()
			l.pool.deps.Logger.Warn("step fenced: claim swept or stolen, step rolled back", "instance_id", held.Instance.ID,
				"owner", held.Owner(), "code", fault.StepFenced, "version", held.Instance.Version)
			return Result{Kind: Retry, Code: fault.StepFenced, Reason: ReasonFenced, Err: err}
		}
		return l.failure(ctx, r, err)
	}
	l.pool.deps.Metrics.StepDuration.Observe(time.Since(start).Seconds())
	l.pool.TestSignals.Committed.Signal(held.Instance.ID)
	if h := l.pool.deps.Hooks.AfterCommit; h != nil {
		h(ctx, l.n, r)
	}
	return Result{Kind: Applied}
}

// engine computes a step under the step's deadline and the expression
// limits (engine.StepContext), with the decisions load found.
func (l *lane) engine(ctx context.Context, proc *bpmn.Process, decisions engine.Decisions, in engine.Instance, tr engine.Trigger) (engine.State, engine.Effects, error) {
	ctx, cancel := context.WithTimeout(ctx, l.pool.cfg.StepTimeout)
	defer cancel()
	return engine.StepContext(ctx, proc, in, tr, engine.Options{Now: l.pool.deps.Now(), Limits: l.pool.cfg.FeelLimits, Decisions: decisions})
}

// call bounds one database call of a step. Canceling ctx (the stop's
// deadline) cancels it too.
func (l *lane) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.pool.cfg.ClaimTimeout)
}

// claimFailure classifies an error of the claim, with the exits of the
// cause's kind first.
func (l *lane) claimFailure(ctx context.Context, r *Resume, err error) Result {
	if f, ok := r.Cause.(claimFailer); ok {
		if out, handled := f.claimFailed(ctx, l, r, err); handled {
			return out
		}
	}
	return l.failure(ctx, r, err)
}

// childFailed answers a call activity's child that cannot start (its
// definition is not deployed, or has no start event to begin at): its parent
// hears of it instead, as an incident on the call activity.
func (l *lane) childFailed(ctx context.Context, r *Resume, parent engine.ParentRef, cause error) Result {
	relay, err := store.ChildFailedRelay(r.id, parent, fault.Reason(cause))
	if err == nil {
		err = l.forward(ctx, r.InboxID(), r.id, []store.RelayOut{relay})
	}
	if err != nil {
		return l.failure(ctx, r, err)
	}
	return Result{Kind: Applied}
}

// forward records relay inboxID as applied without a step and writes relays
// to the outbox (store.Forward, which wakes the outbox publisher).
func (l *lane) forward(ctx context.Context, inboxID, instanceID string, relays []store.RelayOut) error {
	cctx, cancel := l.call(ctx)
	defer cancel()
	return l.pool.deps.Store.Forward(cctx, inboxID, instanceID, relays)
}

func isDuplicate(err error) bool { return errors.Is(err, store.ErrDuplicate) }

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

// writeStep writes the step in its transaction. When a subscription the
// step opened matches a buffered message, the transaction rolls back with the
// claim still held: the message is applied to the step's state as one more
// trigger and everything is written in one transaction, so a buffered
// message is consumed exactly when its step is written. found is a match a
// group's transaction already raised for this step (nil: none). Then the
// timer poller hears of timers armed, the task API of tasks created and the
// outbox publisher of rows written.
func (l *lane) writeStep(ctx context.Context, c loaded, r *Resume, res OpResult, found *store.BufferedMatch) error {
	x := extras(l, r, c, res)
	held, proc, state, eff := c.held, c.proc, res.State, res.Effects
	if res.Process != nil {
		proc = res.Process // the buffered messages apply on the definition the step moved to
	}
	st := state
	var err error = found
	if found == nil {
		err = l.write(ctx, held, st, eff, x)
	}
	for {
		var m *store.BufferedMatch
		switch {
		case errors.As(err, &m):
			in := engine.Instance{ID: c.inst.ID, Version: c.inst.Version, State: st}
			tr := engine.Trigger{Kind: engine.TriggerMessage, Message: m.Message, CorrelationKey: m.CorrelationKey, Variables: m.Variables}
			withMessage, more, serr := l.engine(ctx, proc, c.decisions, in, tr)
			if serr != nil {
				// The subscription is open in st, so the engine should accept the
				// message. If it does not (a bug), the step is written without it
				// rather than never: the message stays buffered until its TTL
				// dead-letters it.
				l.pool.deps.Logger.Error("buffered message not applicable; left buffered", "instance_id", in.ID,
					"owner", held.Owner(), "message_id", m.MessageID, "code", fault.Code(serr), "err", serr)
				x.SkipBufferCheck = true
				break
			}
			st = withMessage
			x.Consumed = append(x.Consumed, store.Consumed{BufferedID: m.ID, Effects: more})
			x.SkipBufferCheck = len(x.Consumed) >= maxConsumed
		case errors.Is(err, store.ErrBufferedGone):
			// Another step consumed it first: write the step without it.
			st, x.Consumed, x.SkipBufferCheck = state, nil, false
		case err != nil:
			return err
		default:
			l.notify(held.Instance.ID, eff, x.Consumed)
			l.ended(held.Instance.ID, st.Status)
			return nil
		}
		err = l.write(ctx, held, st, eff, x)
	}
}

// write is one try of a step's transaction, bounded like every call.
func (l *lane) write(ctx context.Context, held *claims.Held, st engine.State, eff engine.Effects, x claims.Extras) error {
	ctx, cancel := l.call(ctx)
	defer cancel()
	return held.WriteStep(ctx, st, eff, x)
}

// notify tells the timer poller and the task API what a written step of
// instance id wrote for them (the store wakes the outbox publisher itself).
func (l *lane) notify(id string, eff engine.Effects, consumed []store.Consumed) {
	l.pool.deps.Metrics.BufferedConsumed.Add(float64(len(consumed)))
	l.armed(eff, consumed)
	l.tasksCreated(id, eff, consumed)
}

// ended tells who waits for instance id's end that a committed step ended
// it.
func (l *lane) ended(id string, status engine.Status) {
	if notify := l.pool.deps.Ended; notify != nil && !status.Live() {
		notify(id)
	}
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

// tasksCreated tells the task API each pull task the commit of instance
// id created, by its key (a waiting fetch locks it by that key).
func (l *lane) tasksCreated(id string, eff engine.Effects, consumed []store.Consumed) {
	notify := l.pool.deps.TasksCreated
	if notify == nil {
		return
	}
	var created []store.CreatedTask
	add := func(ts []engine.Task) {
		for _, t := range ts {
			if t.Type != "" {
				created = append(created, store.CreatedTask{Topic: t.Type, InstanceID: id, TokenID: t.TokenID, Element: t.Element})
			}
		}
	}
	add(eff.Tasks)
	for _, c := range consumed {
		add(c.Effects.Tasks)
	}
	if len(created) > 0 {
		notify(created)
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
func (l *lane) reject(ctx context.Context, r *Resume, err error) Result {
	if id := r.InboxID(); id != "" {
		applied, aerr := l.applied(ctx, id)
		if aerr != nil {
			return l.failure(ctx, r, aerr)
		}
		if applied {
			return Result{Kind: Duplicate}
		}
	}
	if isInternal(r.Cause) && fault.Code(err) == fault.NotWaiting {
		return Result{Kind: Stale, Code: fault.NotWaiting, Err: err}
	}
	return Result{Kind: Rejected, Code: fault.Code(err), Err: err}
}

// failure classifies an error of resolve, claim, load or commit.
func (l *lane) failure(ctx context.Context, r *Resume, err error) Result {
	log := l.pool.deps.Logger
	var held *store.ClaimHeldError
	switch code := fault.Code(err); {
	case errors.Is(err, store.ErrDuplicate):
		return Result{Kind: Duplicate}
	case errors.Is(err, store.ErrBuffered):
		return Result{Kind: Buffered}
	case errors.As(err, &held):
		l.bounce(r.Path()).Inc()
		log.Info("claim refused", "instance_id", r.id, "owner", l.claimer.Owner(), "code", fault.ClaimHeld,
			"path", r.Path(), "holder", held.Holder, "claim_age", held.Age)
		return Result{Kind: Refused, Code: fault.ClaimHeld, Reason: ReasonClaimHeld, Err: err}
	case code == fault.NotFound, code == fault.UnknownDefinition, code == fault.RelayUncorrelated, code == fault.NotWaiting:
		return Result{Kind: Rejected, Code: code, Err: err}
	case code == fault.StepTooLarge:
		log.Warn("step refused: too large", "instance_id", r.id, "owner", l.claimer.Owner(), "code", code, "err", err)
		return Result{Kind: Rejected, Code: code, Err: err}
	case ctx.Err() != nil:
		return Result{Kind: Retry, Code: fault.Unavailable, Reason: ReasonShutdown, Err: err}
	case code == fault.Unavailable:
		log.Warn("database unavailable", "instance_id", r.id, "owner", l.claimer.Owner(), "code", code, "err", err)
		return Result{Kind: Retry, Code: code, Reason: ReasonUnavailable, Err: err}
	case code == fault.Transient:
		log.Warn("step failed transiently; retried", "instance_id", r.id, "owner", l.claimer.Owner(), "code", code, "err", err)
		return Result{Kind: Retry, Code: code, Reason: ReasonTransient, Err: err}
	default:
		err = fault.Wrap(fault.StepFailed, err, "step of %s can never apply", r.id)
		log.Error("step failed permanently", "instance_id", r.id, "owner", l.claimer.Owner(), "code", fault.StepFailed, "err", err)
		return Result{Kind: Rejected, Code: fault.StepFailed, Err: err}
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
