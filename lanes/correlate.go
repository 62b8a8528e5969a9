package lanes

import (
	"context"
	"errors"
	"time"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Correlate is a relay of a message by name (and correlation key): its
// lookup, before any claim, finds what it goes to, the message start events
// of the latest version of each definition and the oldest waiting
// subscription. With one subscription the step goes on as a message to that
// instance; with one start event it goes on as a messageStart; with several
// targets the relay is fanned out, one relay per target through the outbox.
type Correlate struct {
	MessageID      string
	Message        string
	CorrelationKey string
	Variables      map[string]any
	// TTL, when positive, buffers the relay for that long if no subscription
	// matches yet, instead of rejecting it as uncorrelated.
	TTL time.Duration
	// Body and RoutingKey are kept with a buffered relay, to dead-letter it
	// unchanged when its TTL passes.
	Body       []byte
	RoutingKey string
	// StartOnly and CorrelateOnly are set on the relays of a message fanned
	// out to several targets: start an instance of that definition only, or
	// correlate to a waiting subscription only.
	StartOnly     string
	CorrelateOnly bool
}

// maxResolves bounds how often one correlate-by-key relay is resolved again
// after the instance it resolved to stopped waiting before its claim.
const maxResolves = 3

func (c Correlate) path() string       { return metrics.PathRelay }
func (c Correlate) instanceID() string { return "" }
func (c Correlate) inboxID() string    { return c.MessageID }

// routeKey is the key of the lane a Correlate is looked up on.
func (c Correlate) routeKey() string { return c.Message + "\x00" + c.CorrelationKey }

// prepare looks the relay up (unless it was, and then handed to its
// instance's lane) and hands it to its instance's lane: routing is affinity.
func (c Correlate) prepare(ctx context.Context, l *lane, r *Resume) (claims.Request, Result, next) {
	if r.id == "" {
		if out, done := c.lookup(ctx, l, r); done {
			return claims.Request{}, out, answered
		}
		if h := l.pool.deps.Hooks.AfterResolve; h != nil {
			h(ctx, l.n, r)
		}
		if n := l.pool.Lane(r.id); n != l.n && l.pool.deps.Hooks.Route == nil {
			l.pool.enqueue(n, r)
			return claims.Request{}, Result{}, handedOn
		}
	}
	if ms, ok := r.Cause.(messageStart); ok {
		return ms.prepare(ctx, l, r)
	}
	return claims.Request{InstanceID: r.id, InboxID: c.MessageID}, Result{}, claimIt
}

func (c Correlate) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.stepOn(ctx, cl, engine.Trigger{Kind: engine.TriggerMessage, Message: c.Message, CorrelationKey: c.CorrelationKey, Variables: c.Variables})
}
func (c Correlate) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	return stepWrites(c.MessageID, cl, res)
}

// stepFailed: the instance stopped waiting between the lookup and the claim
// (another step consumed the subscription). The relay is looked up afresh,
// since another instance may wait for it, and with a TTL it is buffered if
// none does. It is never dead-lettered for a race it lost.
func (c Correlate) stepFailed(ctx context.Context, l *lane, r *Resume, held *claims.Held, err error) (Result, bool, bool) {
	if fault.Code(err) != fault.NotWaiting {
		return Result{}, false, false
	}
	if rerr := held.Release(ctx); rerr != nil {
		l.pool.deps.Logger.Error("releasing claim; the sweep will clear it", "instance_id", r.id, "owner", held.Owner(), "code", fault.Code(rerr), "err", rerr)
	}
	if r.resolves++; r.resolves > maxResolves {
		return Result{Kind: Retry, Code: fault.Transient, Reason: ReasonTransient,
			Err: fault.Wrap(fault.Transient, err, "message %q resolved %d times to instances that stopped waiting", c.Message, r.resolves)}, true, true
	}
	r.id = ""
	l.pool.enqueue(l.pool.route(r), r)
	return Result{}, false, true
}

// lookup finds what the relay goes to. With one target it sets r.id (and
// for a start event makes r a messageStart); with several it fans the relay
// out and answers it (done).
func (c Correlate) lookup(ctx context.Context, l *lane, r *Resume) (out Result, done bool) {
	var starts []store.StartTarget
	if !c.CorrelateOnly {
		cctx, cancel := l.call(ctx)
		all, err := l.pool.deps.Store.MessageStarts(cctx, c.Message)
		cancel()
		if err != nil {
			return l.failure(ctx, r, err), true
		}
		for _, t := range all {
			if c.StartOnly == "" || t.Key == c.StartOnly {
				starts = append(starts, t)
			}
		}
		if c.StartOnly != "" && len(starts) == 0 {
			return l.reject(ctx, r, fault.New(fault.RelayUncorrelated,
				"the latest version of %q no longer starts with message %q", c.StartOnly, c.Message)), true
		}
	}
	if len(starts) == 0 {
		id, err := c.resolve(ctx, l)
		if err != nil {
			return l.failure(ctx, r, err), true
		}
		r.id = id
		return Result{}, false
	}
	correlate := false
	if c.StartOnly == "" && c.CorrelationKey != "" {
		cctx, cancel := l.call(ctx)
		_, err := l.pool.deps.Store.ResolveSubscription(cctx, c.Message, c.CorrelationKey, c.MessageID)
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
		relays, err := store.FanOut(c.MessageID, c.Message, c.CorrelationKey, c.Variables, c.TTL, keys, correlate)
		if err == nil {
			err = l.forward(ctx, c.MessageID, "", relays)
		}
		if err != nil {
			return l.failure(ctx, r, err), true
		}
		return Result{Kind: Applied}, true
	}
	t := starts[0]
	ms := messageStart{Correlate: c, definition: t.Key, element: t.Element}
	r.Cause, r.id = ms, ms.instanceID()
	return Result{}, false
}

// resolve finds the instance the relay goes to; a relay with a TTL that no
// subscription matches yet is buffered (store.ErrBuffered).
func (c Correlate) resolve(ctx context.Context, l *lane) (string, error) {
	ctx, cancel := l.call(ctx)
	defer cancel()
	if c.TTL <= 0 {
		return l.pool.deps.Store.ResolveSubscription(ctx, c.Message, c.CorrelationKey, c.MessageID)
	}
	return l.pool.deps.Store.ResolveOrBuffer(ctx, c.buffer())
}

func (c Correlate) buffer() store.Buffer {
	return store.Buffer{Message: c.Message, CorrelationKey: c.CorrelationKey, MessageID: c.MessageID, TTL: c.TTL,
		Variables: c.Variables, Body: c.Body, RoutingKey: c.RoutingKey}
}

// messageStart is a Correlate whose lookup found one message start event: it
// starts an instance of that definition, holding the correlation key while it
// is active (one active instance of a definition per key). Its instance id
// derives from the relay's message id, so a redelivery finds its instance.
type messageStart struct {
	Correlate
	definition, element string
}

func (c messageStart) instanceID() string {
	return InstanceIDFor(store.StartMessageID(c.definition, c.MessageID))
}

func (c messageStart) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.instanceID(), InboxID: c.MessageID, StartKey: c.definition,
		StartCorrelationKey: c.CorrelationKey}, Result{}, claimIt
}
func (c messageStart) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.startOn(ctx, cl, engine.Trigger{Element: c.element, Message: c.Message, Variables: c.Variables})
}

// stepFailed: a start has no subscription to look up again.
func (c messageStart) stepFailed(context.Context, *lane, *Resume, *claims.Held, error) (Result, bool, bool) {
	return Result{}, false, false
}

// claimFailed answers a start refused because an active instance of the
// definition holds its correlation key: with a TTL it waits in the buffer
// for that instance to end; without one it is dead-lettered.
func (c messageStart) claimFailed(ctx context.Context, l *lane, r *Resume, err error) (Result, bool) {
	if !errors.Is(err, store.ErrStartKeyActive) {
		return Result{}, false
	}
	if c.TTL <= 0 {
		return l.reject(ctx, r, fault.Wrap(fault.StartKeyActive, err,
			"an active instance of %q holds correlation key %q", c.definition, c.CorrelationKey)), true
	}
	cctx, cancel := l.call(ctx)
	berr := l.pool.deps.Store.BufferStart(cctx, c.definition, c.buffer())
	cancel()
	if berr == nil {
		// The instance ended meanwhile: start on the next try.
		return Result{Kind: Retry, Code: fault.Transient, Reason: ReasonTransient, Err: err}, true
	}
	return l.failure(ctx, r, berr), true
}
