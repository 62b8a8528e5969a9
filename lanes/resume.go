package lanes

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/sutra-run/worker/bpmn"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
)

// Resume is one resume of one instance handed to a lane: a relay, a timer
// fire or a task completion.
type Resume struct {
	// Path names the resume path for metrics and logs (metrics.PathRelay, …).
	Path string
	// InstanceID routes the resume. Empty when Lookup resolves it.
	InstanceID string
	// Lookup resolves the instance from its open subscription (correlate by key).
	Lookup *Lookup
	// StartKey starts a new instance of that definition, at StartVersion (0:
	// the latest).
	StartKey     string
	StartVersion int
	// InboxID is the relay message id recorded in the step's commit.
	InboxID string
	// TimerID is the timer row the step consumes.
	TimerID int64
	// Schedule, on a timer start event's fire, is the schedule row TimerID
	// names: the commit moves it to its next fire instead of consuming it.
	Schedule *store.DueTimer
	// StartCorrelationKey is held by an instance a message starts while it
	// is active (one active instance of a definition per key).
	StartCorrelationKey string
	// Internal marks a relay the worker sent itself (a task outcome, a
	// child's start, end or cancellation): when what it resumes is gone, it
	// is stale, not a dead letter.
	Internal bool
	Trigger  engine.Trigger
	// Admin runs the resume on an admin lane, which claims as the replica's
	// admin owner (claims.AdminOwner), which no lane produces: an
	// administrative call never re-enters a lane's claim, nor a lane an
	// admin call's.
	Admin bool
	// Op, when set, computes the step in place of engine.Step(Trigger): an
	// administrative change (variables, migration).
	Op Op
	// Done receives the outcome exactly once. It must not block.
	Done func(Outcome)

	enqueued time.Time
	// resolves counts how often a correlate-by-key relay was resolved again.
	resolves int
}

// Lookup is a correlate-by-key resolution.
type Lookup struct {
	Message        string
	CorrelationKey string
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

// Op computes an administrative step from the instance its claim loaded.
type Op func(ctx context.Context, defs Definitions, proc *bpmn.Process, in engine.Instance, now time.Time) (OpResult, error)

// OpResult is what an Op computed.
type OpResult struct {
	State   engine.State
	Effects engine.Effects
	// Process is the definition the instance runs on after the step (a
	// migration's target); nil keeps the one it had.
	Process *bpmn.Process
	// DefinitionVersion is the version of Process when it changes (0: none).
	DefinitionVersion int
}

// Definitions loads deployed definitions.
type Definitions interface {
	Process(ctx context.Context, key string, version int) (*bpmn.Process, error)
}

// MaxIDBytes caps an instance or message id that a relay or an API call
// names: longer ones are refused, never stored or logged whole. 255 is the
// most an AMQP message_id (a short string) can carry.
const MaxIDBytes = 255

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
	// Committed: the step committed; acknowledge.
	Committed Kind = iota
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
	case Committed:
		return "committed"
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

// Outcome is what became of a Resume.
type Outcome struct {
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
func (o Outcome) CountsAsFailure() bool { return o.Kind == Retry && o.Reason == ReasonTransient }
