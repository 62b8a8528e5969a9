// Package fault is the one error type that carries a stable SUTRA.* code a
// caller can branch on, and the list of every code the worker emits.
package fault

import (
	"errors"
	"fmt"
)

// Codes. They are part of the worker's contract (dead-letter headers, admin
// problem documents, logs): never rename one.
const (
	// Resume paths.
	ClaimHeld      = "SUTRA.RUNTIME.RESUME.CLAIM_HELD"
	NotFound       = "SUTRA.RUNTIME.RESUME.NOT_FOUND"
	NotWaiting     = "SUTRA.RUNTIME.RESUME.NOT_WAITING"
	InstanceExists = "SUTRA.RUNTIME.RESUME.INSTANCE_EXISTS"
	// A start names a start event the definition does not have (no none
	// start event, or not one of its message start events).
	NoStartEvent = "SUTRA.RUNTIME.RESUME.NO_START_EVENT"
	// A child's end reached its parent before an escalation relay the child
	// sent earlier: retried, so that the escalation is caught first.
	ChildEndEarly = "SUTRA.RUNTIME.RESUME.CHILD_END_EARLY"
	// Steps.
	StepFenced = "SUTRA.RUNTIME.STEP.FENCED"
	StepPanic  = "SUTRA.RUNTIME.STEP.PANIC"
	StepFailed = "SUTRA.RUNTIME.STEP.FAILED"
	// A step would write more than its limits allow (SUTRA_MAX_VARIABLES_BYTES,
	// SUTRA_MAX_COMMIT_BYTES): refused, nothing written.
	StepTooLarge = "SUTRA.RUNTIME.STEP.TOO_LARGE"
	// The sweep cleared a claim older than the claim timeout.
	ClaimSwept = "SUTRA.RUNTIME.SWEEP.CLAIM_CLEARED"
	// Relays.
	RelayInvalid      = "SUTRA.RUNTIME.RELAY.INVALID"
	RelayUncorrelated = "SUTRA.RUNTIME.RELAY.UNCORRELATED"
	UnknownDefinition = "SUTRA.RUNTIME.RELAY.UNKNOWN_DEFINITION"
	// A message start refused: an active instance of the definition holds
	// the message's correlation key (and the relay has no ttl to wait with).
	StartKeyActive = "SUTRA.RUNTIME.RELAY.CORRELATION_KEY_ACTIVE"
	// A relay that failed transiently more often than the retry cap allows.
	RetriesExhausted = "SUTRA.RUNTIME.RELAY.RETRIES_EXHAUSTED"
	// The database or broker cannot serve anyone right now (an outage).
	Unavailable = "SUTRA.RUNTIME.UNAVAILABLE"
	// One statement failed in a way one more try may cure (serialization
	// failure, deadlock, lock or statement timeout).
	Transient = "SUTRA.RUNTIME.TRANSIENT"
	// Another live process runs with this replica id.
	ReplicaIDInUse = "SUTRA.RUNTIME.REPLICA_ID_IN_USE"
	// A contract migration is not applied while a live replica runs an
	// older release than it allows (`worker migrate` exits 2; run starts
	// without it and tries again).
	MigrateContractWaiting = "SUTRA.RUNTIME.MIGRATE.CONTRACT_WAITING"
	// A configuration value that cannot work (exit status 2), and a setting
	// of the environment no retry cures (a wrong password, a queue declared
	// with other arguments, a missing vhost).
	ConfigInvalid = "SUTRA.CONFIG.INVALID"
	Misconfigured = "SUTRA.CONFIG.ENVIRONMENT"
	// The HTTP API.
	APIInvalid      = "SUTRA.API.INVALID_REQUEST"
	APIUnauthorized = "SUTRA.API.UNAUTHORIZED"
	APITooLarge     = "SUTRA.API.TOO_LARGE"
	// A valid token of another scope than the route's (403): a task
	// worker's SUTRA_API_TOKEN on the admin API, an operator's
	// SUTRA_ADMIN_TOKEN on the task API.
	APIForbidden = "SUTRA.API.FORBIDDEN"
	// A state-changing call without the media type its route takes (415),
	// or from a page of another origin (403): what a browser holding
	// credentials can be made to send (CSRF) is refused.
	APIMediaType   = "SUTRA.API.UNSUPPORTED_MEDIA_TYPE"
	APICrossOrigin = "SUTRA.API.CROSS_ORIGIN"
	// A call refused because the replica is at a cap of its API (request
	// bytes being read, database connections of API calls): 503, retry.
	APIBusy = "SUTRA.API.BUSY"
	// A call from an address whose credentials failed too often lately
	// (429 Retry-After, gRPC ResourceExhausted), refused before its token
	// is checked.
	APIAuthThrottled = "SUTRA.API.AUTH_THROTTLED"
	// The admin API: off (no token and not explicitly insecure); the thing
	// named does not exist.
	AdminDisabled = "SUTRA.ADMIN.DISABLED"
	AdminNotFound = "SUTRA.ADMIN.NOT_FOUND"
	// Pull tasks: the task does not exist or is finished; the caller does
	// not hold its lock (another worker took it, or the lock expired).
	TaskNotFound = "SUTRA.TASK.NOT_FOUND"
	// A user task assigned to someone else: only its assignee completes it
	// (or an admin call that overrides).
	TaskNotAssignee = "SUTRA.TASK.NOT_ASSIGNEE"
	TaskLockLost    = "SUTRA.TASK.LOCK_LOST"
	// Deploy-time BPMN errors.
	BPMNInvalid     = "SUTRA.BPMN.INVALID"
	BPMNUnsupported = "SUTRA.BPMN.UNSUPPORTED"
	BPMNExpression  = "SUTRA.BPMN.EXPRESSION"
	// Deploy-time DMN errors: a file that is not DMN the worker reads, or
	// over the parser's limits (package dmn).
	DMNInvalid     = "SUTRA.DMN.INVALID"
	DMNUnsupported = "SUTRA.DMN.UNSUPPORTED"
	// Admin operations.
	MigrateUnreachable = "SUTRA.ADMIN.MIGRATE.UNREACHABLE"
	// An instance with a token in or at an ad-hoc subprocess: its
	// activations are not moved between definitions.
	MigrateAdHoc = "SUTRA.ADMIN.MIGRATE.AD_HOC"
	// A modification the instance cannot take: a token it does not have,
	// an element it cannot start at, or no token left.
	ModifyRefused = "SUTRA.ADMIN.MODIFY.REFUSED"
	// Run-time incidents.
	IncidentExpression = "SUTRA.INCIDENT.EXPRESSION"
	// An evaluation cut off by a limit: SUTRA_FEEL_MAX_STEPS,
	// SUTRA_FEEL_MAX_BYTES or the step's deadline, SUTRA_STEP_TIMEOUT. At
	// deploy, a constant expression over a limit refuses the file with it
	// (the message names the limit, the element and the expression).
	IncidentExpressionLimit = "SUTRA.INCIDENT.EXPRESSION_LIMIT"
	IncidentNoFlow          = "SUTRA.INCIDENT.NO_MATCHING_FLOW"
	// A pull task's worker reported a failure with no retries left.
	IncidentTaskFailed = "SUTRA.INCIDENT.TASK_FAILED"
	IncidentError      = "SUTRA.INCIDENT.UNHANDLED_ERROR"
	// A call activity's child instance could not be started.
	IncidentCalledElement = "SUTRA.INCIDENT.CALLED_ELEMENT"
	// A BPMN message the broker returned (no queue bound for its name) on
	// every one of SUTRA_OUTBOX_MAX_ATTEMPTS publishes: parked, listed by
	// GET /v1/outbox/parked until retried or discarded.
	OutboxUnroutable = "SUTRA.OUTBOX.UNROUTABLE"
	// A timer whose fire failed SUTRA_TIMER_MAX_ATTEMPTS times: parked until
	// an admin retry arms it again.
	IncidentTimerFailed = "SUTRA.INCIDENT.TIMER_FAILED"
	// A decision could not be evaluated: no such decision, an expression
	// that failed, no rule of a unique table or several that disagree.
	IncidentDecisionFailed = "SUTRA.INCIDENT.DECISION_FAILED"
	// An ad-hoc subprocess's job worker completed its job with a result
	// (adHocSubProcessResult) that names no activity of it, is not shaped
	// as documented, or both activates elements and fulfils the completion
	// condition.
	IncidentAdHocResult = "SUTRA.INCIDENT.AD_HOC_RESULT"
	// A listener's job ended in a way a listener's may not: a BPMN error,
	// or a task listener's completed with variables.
	IncidentListener = "SUTRA.INCIDENT.LISTENER"
	// An instance with a token in its element's listeners (a listener's
	// job open, or stopped in an incident of one) is not migrated.
	MigrateListener = "SUTRA.ADMIN.MIGRATE.LISTENER"
)

// Error is an error with a stable code.
type Error struct {
	Code string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Msg + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by code, so errors.Is(err, &fault.Error{Code: c}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Msg == "" && t.Err == nil
}

// New returns an error with code and a formatted message.
func New(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with code and message that wraps err.
func Wrap(code string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Code returns the code of the first *Error in err's chain, or "".
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// HasCode reports whether err carries code.
func HasCode(err error, code string) bool { return Code(err) == code }

// Summary is err's own sentence without its code and without its cause:
// what the worker was doing, in its words. An answer quotes it where the
// cause may be a driver's or a server's words (a statement, a value, an
// address); the log keeps the whole error. An error without a code has no
// sentence of its own: "".
func Summary(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return ""
	}
	return e.Msg
}

// Reason is the human sentence of err without its code prefix.
func Reason(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}
