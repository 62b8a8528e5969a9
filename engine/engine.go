// Package engine holds the pure step semantics: Step(definition, state,
// trigger, now) → (state', effects). It does no I/O; the store writes the
// effects in the step's commit transaction.
package engine

import (
	"time"
)

// Status is the lifecycle status of an instance.
type Status string

const (
	StatusActive     Status = "active"
	StatusCompleted  Status = "completed"
	StatusTerminated Status = "terminated"
)

// State is the durable state of one instance. Variables and Status live in
// their own columns; the rest is stored as one JSON document (the tokens column).
type State struct {
	Status    Status         `json:"-"`
	Variables map[string]any `json:"-"`
	Tokens    []Token        `json:"tokens"`
	// Seq is the last token sequence number handed out; token ids derive from it
	// so a re-run of the same step yields the same ids.
	Seq int64 `json:"seq"`
}

// Token is one active position inside an instance.
type Token struct {
	ID      string `json:"id"`
	Element string `json:"el"`
	// Scope is the id of the token of the enclosing subprocess ("" = process).
	Scope string `json:"scope,omitempty"`
	// Flow is the sequence flow the token arrived by (parallel joins count these).
	Flow string `json:"flow,omitempty"`
	// Wait tells what the token is parked on; "" never survives a step.
	Wait WaitKind `json:"wait"`
	// Incident is set when Wait == WaitIncident.
	Incident *Incident `json:"incident,omitempty"`
	// Armed lists the token's open waits, one per store row (subscription,
	// timer or task) keyed by (token id, element). A trigger matches only a
	// wait listed here, which is what turns a stale timer fire or a late task
	// completion into fault.NotWaiting.
	Armed []Armed `json:"armed,omitempty"`
}

// Armed is one open wait of a token.
type Armed struct {
	// Element is the element whose row this is: the token's own element (catch
	// event, receive or service task), a boundary event, or an event after an
	// event-based gateway.
	Element string `json:"el"`
	// Key is the correlation key the subscription was opened with: a later
	// change of variables must not move an open subscription.
	Key string `json:"key,omitempty"`
	// Left counts how many more times a cycle timer fires after its armed
	// firing (-1 = unbounded).
	Left int `json:"left,omitempty"`
}

// WaitKind names what a parked token waits for.
type WaitKind string

const (
	WaitMessage  WaitKind = "message"  // message catch event or receive task
	WaitTimer    WaitKind = "timer"    // timer catch event
	WaitEvent    WaitKind = "event"    // event-based gateway: first of several waits wins
	WaitTask     WaitKind = "task"     // pull (service) task
	WaitJoin     WaitKind = "join"     // parallel join, waiting for sibling flows
	WaitScope    WaitKind = "scope"    // embedded subprocess containing child tokens
	WaitIncident WaitKind = "incident" // stopped by an incident until an operator retries
)

// TriggerKind names what resumed the instance.
type TriggerKind string

const (
	TriggerStart         TriggerKind = "start"
	TriggerMessage       TriggerKind = "message"
	TriggerTimer         TriggerKind = "timer"
	TriggerTaskCompleted TriggerKind = "task_completed"
	TriggerTaskFailed    TriggerKind = "task_failed"
	TriggerTaskError     TriggerKind = "task_error"
)

// Trigger is the one resume that a step applies.
type Trigger struct {
	Kind TriggerKind
	// Message is the BPMN message name (TriggerMessage).
	Message string
	// CorrelationKey, when set, must equal the waiting subscription's key.
	CorrelationKey string
	// TokenID and Element identify the wait a timer or task trigger resumes.
	TokenID string
	Element string
	// ErrorCode is the BPMN error thrown by a task worker (TriggerTaskError).
	ErrorCode string
	// ErrorMessage describes a task failure (TriggerTaskFailed).
	ErrorMessage string
	// Retries is the task's remaining retries reported with TriggerTaskFailed.
	Retries int
	// RetryTimeout keeps a failed task with retries left from its workers
	// for that long (TriggerTaskFailed).
	RetryTimeout time.Duration
	// Variables are merged into the instance (start variables, message payload,
	// task results).
	Variables map[string]any
}

// WaitRef names one wait of one token. An empty Element means every wait of
// the token.
type WaitRef struct {
	TokenID string
	Element string
}

// Subscription is an open message subscription.
type Subscription struct {
	TokenID        string
	Element        string
	Message        string
	CorrelationKey string
}

// Timer is an armed timer.
type Timer struct {
	TokenID string
	Element string
	DueAt   time.Time
	// Repeat is how many more times a cycle timer fires after this one (0 = once).
	Repeat int
	// Interval is the cycle period in ISO-8601 form ("" when not a cycle).
	Interval string
}

// Task is a pull task for external workers.
type Task struct {
	TokenID   string
	Element   string
	Type      string
	Retries   int
	Variables map[string]any
	// Headers are the task's zeebe:taskHeaders (static configuration for the
	// worker), nil when it has none.
	Headers map[string]string
	// NotBefore keeps the task from its workers until then (a retry after a
	// failure's timeout); zero means at once.
	NotBefore time.Time
}

// OutboxMessage is a message to publish after the step commits.
type OutboxMessage struct {
	// ID is derived from instance id + step + element so that a re-run of the
	// same step cannot publish twice with different ids.
	ID string
	// Element is the element that sends the message.
	Element        string
	Message        string
	CorrelationKey string
	Variables      map[string]any
}

// Incident stops one token until an operator retries it.
type Incident struct {
	TokenID string `json:"token"`
	Element string `json:"el"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Effects are the side effects of one step, written by the store in the
// step's commit transaction.
type Effects struct {
	// CloseWaits are written first: subscriptions, timers and tasks of these
	// waits are deleted.
	CloseWaits    []WaitRef
	Subscriptions []Subscription
	Timers        []Timer
	Tasks         []Task
	Publish       []OutboxMessage
	Incidents     []Incident
	// Completed is set when the instance reached its end.
	Completed bool
}

// Instance is what a step starts from: the row read at claim time.
type Instance struct {
	ID string
	// Version is the step counter read at claim time; the step being computed
	// will commit Version+1.
	Version int64
	State   State
}
