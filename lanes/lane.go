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
			l.handle(ctx, r)
		case <-quit:
			return
		}
	}
}

func (l *lane) handle(ctx context.Context, r *Resume) {
	l.depth.Dec()
	if ctx.Err() != nil {
		l.pool.answer(r, Outcome{Kind: Retry, Code: fault.Unavailable, Reason: ReasonShutdown, Err: context.Cause(ctx)})
		return
	}
	l.pool.deps.Metrics.LaneWait.Observe(time.Since(r.enqueued).Seconds())
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
			l.pool.deps.Metrics.LanePanics.Inc()
			err := fault.New(fault.StepPanic, "panic in step: %v", v)
			l.pool.deps.Logger.Error("step panicked", "instance_id", r.InstanceID, "owner", l.claimer.Owner(),
				"code", fault.StepPanic, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			out, answered = Outcome{Kind: Rejected, Code: fault.StepPanic, Err: err}, true
		}
	}()
	return l.step(ctx, r)
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
//	engine: not waiting / error        Rejected   released
//	commit: timer row gone             Rejected   released (a stale fire)
//	panic (engine, hook)               Rejected   released, re-raised to supervise
//	commit fenced                      Retry      not ours any more
//	commit fails                       by class   released
//	commit succeeds                    Committed  released by the commit
func (l *lane) step(ctx context.Context, r *Resume) (Outcome, bool) {
	log := l.pool.deps.Logger
	hooks := l.pool.deps.Hooks
	if r.InstanceID == "" && r.Lookup != nil {
		id, err := l.resolve(ctx, r)
		if err != nil {
			return l.failure(ctx, r, err), true
		}
		r.InstanceID = id
		if hooks.AfterResolve != nil {
			hooks.AfterResolve(ctx, l.n, r)
		}
		if n := l.pool.Lane(id); n != l.n && hooks.Route == nil {
			l.pool.enqueue(n, r) // routing is affinity: the instance's own lane runs it
			return Outcome{}, false
		}
	}

	start := time.Now()
	cctx, cancel := l.call(ctx)
	held, err := l.claimer.Claim(cctx, claims.Request{InstanceID: r.InstanceID, InboxID: r.InboxID, StartKey: r.StartKey})
	cancel()
	if err != nil {
		return l.failure(ctx, r, err), true
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
	next, effects, err := engine.Step(proc, engine.Instance{ID: inst.ID, Version: inst.Version, State: state}, trigger, l.pool.deps.Now())
	if err != nil {
		if fault.Code(err) == fault.NotWaiting && r.Lookup != nil {
			return l.resolveAgain(ctx, r, held, err)
		}
		if fault.Code(err) == "" {
			err = fault.Wrap(fault.StepFailed, err, "step of %s", inst.ID)
		}
		return l.reject(ctx, r, err), true
	}
	if h := hooks.BeforeCommit; h != nil {
		h(ctx, l.n, r)
	}
	if err := l.commit(ctx, held, proc, r, next, effects); err != nil {
		if fault.Code(err) == fault.StepFenced {
			l.pool.deps.Metrics.StepsFenced.Inc()
			log.Warn("step fenced: claim swept or stolen, step rolled back", "instance_id", inst.ID,
				"owner", held.Owner(), "code", fault.StepFenced, "version", inst.Version)
			return Outcome{Kind: Retry, Code: fault.StepFenced, Reason: ReasonFenced, Err: err}, true
		}
		return l.failure(ctx, r, err), true
	}
	l.pool.deps.Metrics.StepDuration.Observe(time.Since(start).Seconds())
	if h := hooks.AfterCommit; h != nil {
		h(ctx, l.n, r)
	}
	return Outcome{Kind: Committed}, true
}

// call bounds one database call of a step. Canceling ctx (the stop's
// deadline) cancels it too.
func (l *lane) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.pool.cfg.ClaimTimeout)
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

// maxConsumed bounds the buffered messages one step applies. Past it the
// step commits without looking at the buffer again; what is left waits for
// the next subscription or its TTL.
const maxConsumed = 32

// commit commits the step. When a subscription the step opened matches a
// buffered message, the commit rolls back with the claim still held: the
// message is applied to the step's state as one more trigger and everything
// commits in one transaction, so a buffered message is consumed exactly when
// its step commits. Then the timer poller hears of timers armed and the
// outbox publisher of rows written.
func (l *lane) commit(ctx context.Context, held *claims.Held, proc *bpmn.Process, r *Resume, state engine.State, eff engine.Effects) error {
	x := claims.Extras{InboxID: r.InboxID, TimerID: r.TimerID}
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
			next, more, serr := engine.Step(proc, in, tr, l.pool.deps.Now())
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
			l.pool.deps.Metrics.BufferedConsumed.Add(float64(len(x.Consumed)))
			l.armed(eff, x.Consumed)
			l.published(eff, x.Consumed)
			return nil
		}
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

// published wakes the outbox publisher when the commit wrote outbox rows.
func (l *lane) published(eff engine.Effects, consumed []store.Consumed) {
	notify := l.pool.deps.OutboxWritten
	if notify == nil {
		return
	}
	wrote := len(eff.Publish) > 0
	for _, c := range consumed {
		wrote = wrote || len(c.Effects.Publish) > 0
	}
	if wrote {
		notify()
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
// copy of it already applied: then it is a duplicate, never a dead letter.
func (l *lane) reject(ctx context.Context, r *Resume, err error) Outcome {
	if r.InboxID != "" {
		cctx, cancel := l.call(ctx)
		applied, aerr := l.pool.deps.Store.Applied(cctx, r.InboxID)
		cancel()
		if aerr != nil {
			return l.failure(ctx, r, aerr)
		}
		if applied {
			return Outcome{Kind: Duplicate}
		}
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
