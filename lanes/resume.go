package lanes

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Resume is one resume of one instance handed to a lane: what causes it,
// one of a closed set of kinds, and who hears its outcome.
type Resume struct {
	// Cause is one of Message, Correlate, Start, TaskOutcome, ChildEnded,
	// CancelChild, TimerFire, ScheduledStart, AdminStep, AdminOp, AdminStart.
	Cause Cause
	// Done receives the outcome exactly once. It must not block.
	Done func(Result)

	// id is the instance the resume steps: the one its cause names, or the
	// one a Correlate's lookup found ("" before it).
	id       string
	enqueued time.Time
	// resolves counts how often a Correlate was looked up again.
	resolves int
}

// InstanceID is the instance r steps ("" for a Correlate not looked up yet).
func (r *Resume) InstanceID() string {
	if r.id == "" {
		return r.Cause.instanceID()
	}
	return r.id
}

// InboxID is the message id of the relay r applies ("" for a timer fire or
// an administrative step).
func (r *Resume) InboxID() string { return r.Cause.inboxID() }

// Path names r's resume path for metrics and logs (metrics.PathRelay, …).
func (r *Resume) Path() string { return r.Cause.path() }

// Admin reports whether r runs on the admin lane.
func (r *Resume) Admin() bool { return r.Cause.path() == metrics.PathAdmin }

// Cause is what resumes an instance. The set of kinds is closed (the
// interface's methods are unexported): a new resume path is a new kind in
// this package, with its rows in the exit tables (lane.go, batch.go).
//
// Each kind does its own work before the claim, then every kind goes through
// one core (lane.step): claim → load the definition → compute → write.
type Cause interface {
	path() string
	// instanceID is the instance the cause names ("" when a lookup finds it).
	instanceID() string
	// inboxID is the relay message id the step's transaction records as
	// applied ("" for no relay).
	inboxID() string
	// prepare is the work before the claim: it returns what to claim, or
	// answers r (answered), or hands it to another lane (handedOn).
	prepare(ctx context.Context, l *lane, r *Resume) (claims.Request, Result, next)
	// compute computes the step from the instance its claim loaded.
	compute(ctx context.Context, l *lane, r *Resume, c loaded) (OpResult, error)
	// writes are what the step's transaction writes beside the step.
	writes(l *lane, r *Resume, c loaded, res OpResult) claims.Extras
	// history names the cause in its step's history row (history.go).
	history() store.StepCause
}

// The exits a kind may add to the core's, each an optional method.
type (
	// claimFailer answers some claim errors its own way (handled).
	claimFailer interface {
		claimFailed(ctx context.Context, l *lane, r *Resume, err error) (out Result, handled bool)
	}
	// stepFailer answers some compute errors its own way (handled); answered
	// false hands r on to another lane.
	stepFailer interface {
		stepFailed(ctx context.Context, l *lane, r *Resume, held *claims.Held, err error) (out Result, answered, handled bool)
	}
	// tooLarger writes something else in place of a step refused as too
	// large, or returns cause.
	tooLarger interface {
		tooLarge(ctx context.Context, l *lane, r *Resume, c loaded, cause error) error
	}
	// internalRelay is a relay the worker sent itself (a task outcome, a
	// child's start, end or cancellation): when what it resumes is gone, it
	// is stale, not a dead letter.
	internalRelay interface{ internal() bool }
)

func isInternal(c Cause) bool {
	i, ok := c.(internalRelay)
	return ok && i.internal()
}

// next is what follows a cause's prepare.
type next int

const (
	claimIt  next = iota // claim the request
	answered             // the outcome answers the resume
	handedOn             // another lane runs the resume and answers it
)

// loaded is a step's claim, the instance as the step computes from it, the
// definition it runs on and the decisions the definition's business rule
// tasks call (nil when none).
type loaded struct {
	held *claims.Held
	// inst is the row the claim loaded or, for a later resume of a chain
	// (batch.go), the state and counter the one before it left.
	inst      store.Instance
	proc      *bpmn.Process
	decisions engine.Decisions
}

// stepWrites are the writes of an engine step: the relay it applies, and
// the tables its closed waits have rows in (the engine ran on proc from the
// state its claim loaded).
func stepWrites(inboxID string, c loaded, res OpResult) claims.Extras {
	return claims.Extras{InboxID: inboxID, CloseTables: engine.CloseTables(c.proc, c.inst.State, res.Effects.CloseWaits)}
}

// Op computes an administrative step (AdminOp) from the instance its claim
// loaded.
type Op func(ctx context.Context, defs Definitions, proc *bpmn.Process, in engine.Instance, now time.Time) (OpResult, error)

// OpResult is what a step computed.
type OpResult struct {
	State   engine.State
	Effects engine.Effects
	// Process, set by an Op only, is the definition the instance runs on
	// after the step (a migration's target); nil keeps the one it had.
	Process *bpmn.Process
	// DefinitionVersion is the version of Process when it changes (0: none).
	DefinitionVersion int
}

// Definitions loads deployed definitions.
type Definitions interface {
	Process(ctx context.Context, key string, version int) (*bpmn.Process, error)
}

// MaxIDBytes caps an instance or message id, a message name or a
// correlation key that a relay or an API call names: longer ones are
// refused, never stored or logged whole. 255 is the most an AMQP short
// string (a message_id, a routing key) can carry: a longer one makes the
// broker close the publishing connection.
const MaxIDBytes = 255

// MaxMessageTTL is the longest a message published through an API may stay
// buffered for a subscription to open (its ttl, Zeebe's timeToLive): one
// year. Longer is refused at the call, never accepted and dropped later.
const MaxMessageTTL = 365 * 24 * time.Hour

// InstanceIDFor derives a UUID-shaped instance id from a relay message id,
// so that a redelivered start finds the instance it started.
func InstanceIDFor(messageID string) string {
	h := sha256.Sum256([]byte("sutra.instance\x00" + messageID))
	h[6] = h[6]&0x0f | 0x80 // version 8: custom, name-based
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Kind classifies an outcome for the resume path to act on.
type Kind int

const (
	// Applied: the resume took effect durably (its step's transaction
	// committed, or a relay was forwarded in its place: fanned out, or a
	// child's failure relayed to its parent); acknowledge.
	Applied Kind = iota
	// Duplicate: the relay was already applied; acknowledge without a step.
	Duplicate
	// Refused: another owner holds the claim (fault.ClaimHeld); retry later.
	Refused
	// Retry: nothing was written; retry later. Reason says why; only
	// ReasonTransient is a failure of this resume (CountsAsFailure).
	Retry
	// Rejected: the resume can never apply (Code says why); never retry.
	Rejected
	// Buffered: no subscription matched the relay yet; it is stored until one
	// opens or its TTL passes; acknowledge.
	Buffered
	// Stale: an internal relay whose wait is gone (a task outcome whose task
	// a boundary event interrupted, a child's end after its parent was
	// cancelled): nothing to apply; acknowledge.
	Stale
)

func (k Kind) String() string {
	switch k {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Refused:
		return "refused"
	case Retry:
		return "retry"
	case Rejected:
		return "rejected"
	case Buffered:
		return "buffered"
	case Stale:
		return "stale"
	}
	return "unknown"
}

// Reasons of Refused and Retry outcomes (metrics labels).
const (
	ReasonClaimHeld = "claim_held" // another owner holds the claim
	ReasonFenced    = "fenced"     // the claim was swept or stolen before the commit
	// ReasonUnavailable: the database cannot serve anyone (an outage).
	ReasonUnavailable = "unavailable"
	// ReasonTransient: this step failed in a way another try may cure.
	ReasonTransient = "transient"
	ReasonShutdown  = "shutdown"  // the worker is stopping
	ReasonLaneFull  = "lane_full" // the lane's inbox had no room
)

// Result is what became of a Resume.
type Result struct {
	Kind Kind
	// Code is the fault code of a Refused, Retry or Rejected outcome.
	Code string
	// Reason is a short metrics label for Retry/Refused (Reason… constants).
	Reason string
	Err    error
	// InstanceID is the instance the resume resolved to (for logs).
	InstanceID string
}

// CountsAsFailure reports whether a retried resume failed through its own
// fault (a transient error), as opposed to waiting its turn (a held claim, a
// fenced commit) or an outage or stop that is nobody's fault: only failures
// count towards a relay's retry cap.
func (o Result) CountsAsFailure() bool { return o.Kind == Retry && o.Reason == ReasonTransient }
