package lanes

import (
	"context"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// The kinds of Cause. Each does its own work before the claim (prepare),
// says how its step is computed from the claimed instance (compute) and what
// the step's transaction writes beside it (writes); its own exits are the
// optional methods claimFailed, stepFailed, tooLarge and internal. The exit
// table above lane.step has a row for each. A correlate-by-key relay has
// its own file (correlate.go), and so have the signal kinds (signals.go).

// Message is a relay of a message to a known instance: the common kind a
// lane runs in batches (batch.go).
type Message struct {
	InstanceID string
	// MessageID is the relay's message id, recorded in the step's inbox row.
	MessageID string
	Name      string
	Variables map[string]any
}

func (c Message) path() string       { return metrics.PathRelay }
func (c Message) instanceID() string { return c.InstanceID }
func (c Message) inboxID() string    { return c.MessageID }
func (c Message) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID, InboxID: c.MessageID}, Result{}, claimIt
}
func (c Message) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.stepOn(ctx, cl, c.trigger())
}
func (c Message) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	return stepWrites(c.MessageID, cl, res)
}
func (c Message) trigger() engine.Trigger {
	return engine.Trigger{Kind: engine.TriggerMessage, Message: c.Name, Variables: c.Variables}
}

// Start is a relay that starts an instance of a definition's latest version:
// a start relay, or a call activity's child (Parent set), which is an
// internal relay.
type Start struct {
	InstanceID string
	MessageID  string
	Definition string
	Variables  map[string]any
	Parent     *engine.ParentRef
	// Binding and VersionTag are the calling activity's (with Parent):
	// which version of Definition starts ("": the latest).
	Binding, VersionTag string
}

func (c Start) path() string       { return metrics.PathRelay }
func (c Start) instanceID() string { return c.InstanceID }
func (c Start) inboxID() string    { return c.MessageID }
func (c Start) internal() bool     { return c.Parent != nil }

// prepare: a child whose parent cancelled it before it started never starts.
func (c Start) prepare(ctx context.Context, l *lane, r *Resume) (claims.Request, Result, next) {
	req := claims.Request{InstanceID: c.InstanceID, InboxID: c.MessageID, StartKey: c.Definition}
	if c.Parent == nil {
		return req, Result{}, claimIt
	}
	req.ParentID = c.Parent.InstanceID
	applied, err := l.applied(ctx, store.CancelMessageID(c.InstanceID))
	switch {
	case err != nil:
		return req, l.failure(ctx, r, err), answered
	case applied:
		return req, Result{Kind: Stale, Code: fault.NotWaiting}, answered
	}
	if c.Binding != "" {
		v, err := l.calledVersion(ctx, c)
		switch {
		case fault.Code(err) == fault.UnknownDefinition:
			return req, l.childFailed(ctx, r, *c.Parent, err), answered
		case err != nil:
			return req, l.failure(ctx, r, err), answered
		}
		req.StartVersion = v
	}
	return req, Result{}, claimIt
}

// calledVersion is the version child start c starts (bounded call).
func (l *lane) calledVersion(ctx context.Context, c Start) (int, error) {
	cctx, cancel := l.call(ctx)
	defer cancel()
	return l.pool.deps.Store.CalledVersion(cctx, c.Definition, c.Binding, c.VersionTag, c.Parent.InstanceID)
}
func (c Start) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.startOn(ctx, cl, engine.Trigger{Variables: c.Variables, Parent: c.Parent})
}
func (c Start) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	return stepWrites(c.MessageID, cl, res)
}

// claimFailed: a child whose definition is not deployed fails into its
// parent's incident.
func (c Start) claimFailed(ctx context.Context, l *lane, r *Resume, err error) (Result, bool) {
	if c.Parent == nil || fault.Code(err) != fault.UnknownDefinition {
		return Result{}, false
	}
	return l.childFailed(ctx, r, *c.Parent, err), true
}

// stepFailed: a child whose definition has no start event to begin at fails
// into its parent's incident.
func (c Start) stepFailed(ctx context.Context, l *lane, r *Resume, _ *claims.Held, err error) (Result, bool, bool) {
	if c.Parent == nil || fault.Code(err) != fault.NoStartEvent {
		return Result{}, false, false
	}
	return l.childFailed(ctx, r, *c.Parent, err), true, true
}

// TaskOutcome is a task's outcome (completed, failed, BPMN error) that the
// task API relayed to the instance: an internal relay.
type TaskOutcome struct {
	InstanceID string
	MessageID  string
	// Trigger is the outcome: engine.TriggerTaskCompleted, TriggerTaskFailed
	// or TriggerTaskError, naming the task's token and element.
	Trigger engine.Trigger
}

func (c TaskOutcome) path() string       { return metrics.PathTask }
func (c TaskOutcome) instanceID() string { return c.InstanceID }
func (c TaskOutcome) inboxID() string    { return c.MessageID }
func (c TaskOutcome) internal() bool     { return true }
func (c TaskOutcome) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID, InboxID: c.MessageID}, Result{}, claimIt
}
func (c TaskOutcome) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.stepOn(ctx, cl, c.Trigger)
}

// writes: the outcome's relay is an outbox row (store.RecordOutcome), which
// the fast path may apply before it is published: the commit then marks it
// published, so that it is not sent for nothing.
func (c TaskOutcome) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	x := stepWrites(c.MessageID, cl, res)
	x.FromOutbox = true
	return x
}

// tooLarge commits, in place of a completion or BPMN error refused as too
// large, the task's failure into an incident on its element (the outcome's
// variables dropped): the worker was answered 204 long ago, and a dead letter
// would leave the task completing and its instance waiting for good. Retrying
// the incident creates the task again. Should that step be refused too, the
// outcome is dead-lettered with cause.
func (c TaskOutcome) tooLarge(ctx context.Context, l *lane, r *Resume, cl loaded, cause error) error {
	if k := c.Trigger.Kind; k != engine.TriggerTaskCompleted && k != engine.TriggerTaskError {
		return cause
	}
	tr := engine.Trigger{Kind: engine.TriggerTaskFailed, TokenID: c.Trigger.TokenID, Element: c.Trigger.Element, ErrorMessage: cause.Error()}
	res, err := l.stepOn(ctx, cl, tr)
	if err != nil {
		return cause
	}
	if err := l.writeStep(ctx, cl, r, res, nil); err != nil {
		if fault.Code(err) == fault.StepTooLarge {
			return cause
		}
		return err
	}
	l.pool.deps.Logger.Warn("task outcome too large: the task failed into an incident", "instance_id", cl.held.Instance.ID,
		"owner", cl.held.Owner(), "element", c.Trigger.Element, "code", fault.StepTooLarge, "err", cause)
	return nil
}

// ChildEnded is a child instance's end (completed, or failed to start), or
// the escalations a running child threw that none of its scopes caught,
// relayed to its parent: an internal relay.
type ChildEnded struct {
	InstanceID string
	MessageID  string
	// Trigger is engine.TriggerChildCompleted, TriggerChildFailed or
	// TriggerChildEscalated.
	Trigger engine.Trigger
}

func (c ChildEnded) path() string       { return metrics.PathRelay }
func (c ChildEnded) instanceID() string { return c.InstanceID }
func (c ChildEnded) inboxID() string    { return c.MessageID }
func (c ChildEnded) internal() bool     { return true }
func (c ChildEnded) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID, InboxID: c.MessageID}, Result{}, claimIt
}
func (c ChildEnded) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.stepOn(ctx, cl, c.Trigger)
}
func (c ChildEnded) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	return stepWrites(c.MessageID, cl, res)
}

// stepFailed: a child's end that overtook an escalation relay of the child
// (the escalation was refused and requeued meanwhile) is retried like a
// transient failure, so that the parent catches the escalation first.
func (c ChildEnded) stepFailed(_ context.Context, l *lane, r *Resume, held *claims.Held, err error) (Result, bool, bool) {
	if fault.Code(err) != fault.ChildEndEarly {
		return Result{}, false, false
	}
	l.pool.deps.Logger.Info("a child's end came before its escalation; retried", "instance_id", r.id, "owner", held.Owner(),
		"code", fault.ChildEndEarly, "err", err)
	return Result{Kind: Retry, Code: fault.ChildEndEarly, Reason: ReasonTransient, Err: err}, true, true
}

// CancelChild is a parent's cancellation of its child: an internal relay.
type CancelChild struct {
	InstanceID string
	MessageID  string
}

func (c CancelChild) path() string       { return metrics.PathRelay }
func (c CancelChild) instanceID() string { return c.InstanceID }
func (c CancelChild) inboxID() string    { return c.MessageID }
func (c CancelChild) internal() bool     { return true }
func (c CancelChild) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID, InboxID: c.MessageID}, Result{}, claimIt
}
func (c CancelChild) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.stepOn(ctx, cl, engine.Trigger{Kind: engine.TriggerCancel})
}
func (c CancelChild) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	return stepWrites(c.MessageID, cl, res)
}

// claimFailed: a child cancelled before it started has its cancellation
// recorded, so that its start never runs.
func (c CancelChild) claimFailed(ctx context.Context, l *lane, r *Resume, err error) (Result, bool) {
	if fault.Code(err) != fault.NotFound {
		return Result{}, false
	}
	if ferr := l.forward(ctx, c.MessageID, c.InstanceID, nil); ferr != nil && !isDuplicate(ferr) {
		return l.failure(ctx, r, ferr), true
	}
	return Result{Kind: Stale, Code: fault.NotFound}, true
}

// TimerFire is the fire of a timer an instance waits on; the step's
// transaction consumes the timer row.
type TimerFire struct {
	InstanceID string
	TimerID    int64
	TokenID    string
	Element    string
	// Deferred counts the fire's earlier tries deferred without failing:
	// its claim refusals, for the step history.
	Deferred int
}

func (c TimerFire) path() string       { return metrics.PathTimer }
func (c TimerFire) instanceID() string { return c.InstanceID }
func (c TimerFire) inboxID() string    { return "" }
func (c TimerFire) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID}, Result{}, claimIt
}
func (c TimerFire) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.stepOn(ctx, cl, engine.Trigger{Kind: engine.TriggerTimer, TokenID: c.TokenID, Element: c.Element})
}
func (c TimerFire) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	x := stepWrites("", cl, res)
	x.TimerID = c.TimerID
	return x
}

// ScheduledStart is the fire of a timer start event's schedule row (Timer.Start
// set): it starts the instance the row names, and the step's transaction moves
// the row to its next fire instead of consuming it.
type ScheduledStart struct {
	Timer store.DueTimer
}

// Fire is the cause of a due timer row's fire: a ScheduledStart for a
// schedule row, a TimerFire for any other.
func Fire(t store.DueTimer) Cause {
	if t.Start != nil {
		return ScheduledStart{Timer: t}
	}
	return TimerFire{InstanceID: t.InstanceID, TimerID: t.ID, TokenID: t.TokenID, Element: t.Element, Deferred: t.Attempts - t.Failures}
}

func (c ScheduledStart) path() string       { return metrics.PathTimer }
func (c ScheduledStart) instanceID() string { return c.Timer.InstanceID }
func (c ScheduledStart) inboxID() string    { return "" }
func (c ScheduledStart) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	t := c.Timer
	if t.Start == nil {
		return claims.Request{}, Result{Kind: Rejected, Code: fault.StepFailed,
			Err: fault.New(fault.StepFailed, "timer %d is no schedule row", t.ID)}, answered
	}
	return claims.Request{InstanceID: t.InstanceID, StartKey: t.Start.DefinitionKey, StartVersion: t.Start.DefinitionVersion}, Result{}, claimIt
}
func (c ScheduledStart) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.startOn(ctx, cl, engine.Trigger{Element: c.Timer.Element})
}
func (c ScheduledStart) writes(l *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	x := stepWrites("", cl, res)
	x.TimerID, x.RearmAt = c.Timer.ID, c.nextFire(l, cl.proc)
	return x
}

// nextFire is when the schedule fires next after this fire (zero: never
// again). The schedule follows the due times, not the fire times, so a late
// fire does not shift it.
func (c ScheduledStart) nextFire(l *lane, proc *bpmn.Process) time.Time {
	t := c.Timer
	due, ok, err := engine.NextStart(proc.Element(t.Element), t.DueAt, t.Start.Fired+1)
	if err != nil {
		// Deploy computed the first fire from the same value, so this is a bug:
		// this fire still starts its instance, and the schedule ends.
		l.pool.deps.Logger.Error("timer start schedule ends: its next fire cannot be computed", "instance_id", t.InstanceID,
			"definition", proc.ID, "element", t.Element, "code", fault.Code(err), "err", err)
		return time.Time{}
	}
	if !ok {
		return time.Time{}
	}
	return due
}

// The administrative kinds run on the admin lane, which claims as the
// replica's admin owner (claims.AdminOwner), which no lane produces: an
// administrative call never re-enters a lane's claim, nor a lane an admin
// call's.

// AdminStep is an administrative step the engine computes: cancel
// (engine.TriggerCancel) or retry an incident (engine.TriggerRetry).
type AdminStep struct {
	InstanceID string
	Trigger    engine.Trigger
}

func (c AdminStep) path() string       { return metrics.PathAdmin }
func (c AdminStep) instanceID() string { return c.InstanceID }
func (c AdminStep) inboxID() string    { return "" }
func (c AdminStep) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID}, Result{}, claimIt
}
func (c AdminStep) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.stepOn(ctx, cl, c.Trigger)
}
func (c AdminStep) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	return stepWrites("", cl, res)
}

// AdminOp is an administrative change that Op computes in place of the
// engine (merge variables, migrate).
type AdminOp struct {
	InstanceID string
	Op         Op
	// Name and Detail name the operation in the step history
	// (admin_<Name>); Bounces, when set, counts the claim refusals of the
	// operation's earlier tries (a bulk migration's).
	Name, Detail string
	Bounces      *int
}

func (c AdminOp) path() string       { return metrics.PathAdmin }
func (c AdminOp) instanceID() string { return c.InstanceID }
func (c AdminOp) inboxID() string    { return "" }
func (c AdminOp) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID}, Result{}, claimIt
}
func (c AdminOp) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	ctx, cancel := context.WithTimeout(ctx, l.pool.cfg.StepTimeout)
	defer cancel()
	in := engine.Instance{ID: cl.inst.ID, Version: cl.inst.Version, State: cl.inst.State}
	return c.Op(ctx, l.pool.deps.Store, cl.proc, in, l.pool.deps.Now())
}

// writes: an operation may change the definition, so its closed waits are
// looked for in every table (no CloseTables).
func (c AdminOp) writes(_ *lane, _ *Resume, _ loaded, res OpResult) claims.Extras {
	return claims.Extras{DefinitionVersion: res.DefinitionVersion}
}

// AdminStart starts an instance of a definition at Version (0: the latest).
type AdminStart struct {
	InstanceID string
	Definition string
	Version    int
	Variables  map[string]any
}

func (c AdminStart) path() string       { return metrics.PathAdmin }
func (c AdminStart) instanceID() string { return c.InstanceID }
func (c AdminStart) inboxID() string    { return "" }
func (c AdminStart) prepare(context.Context, *lane, *Resume) (claims.Request, Result, next) {
	return claims.Request{InstanceID: c.InstanceID, StartKey: c.Definition, StartVersion: c.Version}, Result{}, claimIt
}
func (c AdminStart) compute(ctx context.Context, l *lane, _ *Resume, cl loaded) (OpResult, error) {
	return l.startOn(ctx, cl, engine.Trigger{Variables: c.Variables})
}
func (c AdminStart) writes(_ *lane, _ *Resume, cl loaded, res OpResult) claims.Extras {
	return stepWrites("", cl, res)
}
