package lanes

import (
	"context"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/metrics"
)

// SignalBroadcast is the relay of a signal a step threw (a signal throw or
// end event), sent through the outbox once that step committed: it
// broadcasts the signal (store.BroadcastSignal), writing one Signal relay
// per waiting instance and per definition it starts, and claims nothing.
// Its message id is the broadcast's id, so a redelivery writes no relay
// twice and, once recorded in the inbox, nothing at all.
type SignalBroadcast struct {
	MessageID string
	Name      string
	Variables map[string]any
}

func (c SignalBroadcast) path() string       { return metrics.PathRelay }
func (c SignalBroadcast) instanceID() string { return "" }
func (c SignalBroadcast) inboxID() string    { return c.MessageID }
func (c SignalBroadcast) internal() bool     { return true }
func (c SignalBroadcast) prepare(ctx context.Context, l *lane, r *Resume) (claims.Request, Result, next) {
	applied, err := l.applied(ctx, c.MessageID)
	switch {
	case err != nil:
		return claims.Request{}, l.failure(ctx, r, err), answered
	case applied:
		return claims.Request{}, Result{Kind: Duplicate}, answered
	}
	cctx, cancel := l.call(ctx)
	_, err = l.pool.deps.Store.BroadcastSignal(cctx, c.MessageID, c.Name, c.Variables)
	cancel()
	if err == nil {
		err = l.forward(ctx, c.MessageID, "", nil)
	}
	if err != nil && !isDuplicate(err) {
		return claims.Request{}, l.failure(ctx, r, err), answered
	}
	return claims.Request{}, Result{Kind: Applied}, answered
}

// compute and writes never run: prepare answers every broadcast.
func (c SignalBroadcast) compute(context.Context, *lane, *Resume, loaded) (OpResult, error) {
	return OpResult{}, fault.New(fault.StepFailed, "a signal broadcast has no step")
}
func (c SignalBroadcast) writes(*lane, *Resume, loaded, OpResult) claims.Extras {
	return claims.Extras{}
}

// Signal is a broadcast's relay to one target, an internal relay: the
// signal wait (TokenID, Element) of instance InstanceID or, with Definition
// set, the start of an instance of that definition's latest version at its
// signal start event Element. An instance that stopped waiting meanwhile
// makes it stale, never dead.
type Signal struct {
	InstanceID string
	MessageID  string
	Name       string
	TokenID    string
	Element    string
	Definition string
	Variables  map[string]any
}

func (c Signal) path() string       { return metrics.PathRelay }
func (c Signal) instanceID() string { return c.InstanceID }
func (c Signal) inboxID() string    { return c.MessageID }
func (c Signal) internal() bool     { return true }
func (c Signal) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID, InboxID: c.MessageID, StartKey: c.Definition}, Result{}, claimIt
}
func (c Signal) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	if c.Definition != "" {
		return l.startOn(ctx, cl, engine.Trigger{Element: c.Element, Variables: c.Variables})
	}
	return l.stepOn(ctx, cl, engine.Trigger{Kind: engine.TriggerSignal, Signal: c.Name, TokenID: c.TokenID,
		Element: c.Element, Variables: c.Variables})
}
func (c Signal) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	return stepWrites(c.MessageID, cl, res)
}
