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
	StatusActive    Status = "active"
	StatusCompleted Status = "completed"
	// StatusTerminated: the instance ended without completing, because a
	// BPMN error nobody in it caught was handed to its parent instance.
	StatusTerminated Status = "terminated"
	// StatusCancelled: an operator cancelled the instance (TriggerCancel).
	StatusCancelled Status = "cancelled"
	// StatusCancelling: an operator cancelled the instance, and user tasks
	// in it run their canceling listeners before it ends cancelled
	// (State.Then). It still takes their jobs' outcomes and incidents'
	// retries; a cancel of it changes nothing.
	StatusCancelling Status = "cancelling"
)

// Live reports whether an instance of status st has not ended: active or
// cancelling.
func (st Status) Live() bool { return st == StatusActive || st == StatusCancelling }

// State is the durable state of one instance. Variables and Status live in
// their own columns; the rest is stored as one JSON document (the tokens column).
type State struct {
	Status    Status         `json:"-"`
	Variables map[string]any `json:"-"`
	Tokens    []Token        `json:"tokens"`
	// Seq is the last token sequence number handed out; token ids derive from it
	// so a re-run of the same step yields the same ids.
	Seq int64 `json:"seq"`
	// Armed lists the process level's open waits: the message and timer
	// starts of event subprocesses at process level, armed when the instance
	// starts. Their store rows are keyed by token id "" and closed when the
	// process ends. (A subprocess's event subprocess waits are in its scope
	// token's Armed, keyed by that token's id.)
	Armed []Armed `json:"armed,omitempty"`
	// Parent is set on an instance a call activity started.
	Parent *ParentRef `json:"parent,omitempty"`
	// Compensable are the completed activities a compensation throw may
	// still compensate, the latest completion last (compensation.go).
	Compensable []Compensable `json:"comp,omitempty"`
	// Escalated counts the escalation relays (ParentEscalation) an instance
	// with a Parent sent it from steps that did not end it.
	Escalated int `json:"escalated,omitempty"`
	// Then is what the instance does once its terminating tokens have ended
	// (terminating.go): complete after a terminate end event, end cancelled
	// or in favour of its parent, start an interrupting event subprocess.
	Then *Then `json:"then,omitempty"`
}

// Compensable is a completed activity with a compensation handler that no
// compensation has undone yet. Completions of one activity in one place
// share a record (Times counts them), so an instance holds at most one
// record per activity and place whatever its loops do.
type Compensable struct {
	// Element is the activity, which has a compensation boundary event.
	Element string `json:"el"`
	// Scope is the token of the scope whose compensation throws reach it
	// ("" = the process): the scope it completed in or, once the embedded
	// subprocesses around it (In) completed, theirs.
	Scope string `json:"scope,omitempty"`
	// In lists the completed embedded subprocesses between Scope and the
	// activity, outermost first: an activityRef naming In[0] reaches it.
	In []string `json:"in,omitempty"`
	// Times counts its completions: its handler runs that many times.
	Times int `json:"n"`
}

// Token is one active position inside an instance.
type Token struct {
	ID      string `json:"id"`
	Element string `json:"el"`
	// Scope is the id of the token of the enclosing subprocess, event
	// subprocess or multi-instance body ("" = process).
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
	// Escalated counts, on a call activity waiting for its child, the
	// child's escalation relays it applied (TriggerChildEscalated).
	Escalated int `json:"escalated,omitempty"`
	// Vars are the local variables of the element instance the token is:
	// its input mappings, a subprocess's locals, a multi-instance body's
	// output collection, an inner instance's item and loopCounter.
	// Expressions see them over the instance variables, innermost scope
	// first; a write goes to the nearest scope that defines the name, else
	// to the instance variables.
	Vars map[string]any `json:"vars,omitempty"`
	// Loop is the loopCounter (from 1) of an inner instance of a
	// multi-instance activity; its Scope is the body's token.
	Loop int `json:"loop,omitempty"`
	// Multi counts the inner instances of a multi-instance body
	// (Wait == WaitMulti).
	Multi Multi `json:"multi,omitzero"`
	// Comp is set on a compensation handler's token: the id of the
	// compensation throw or end event token that waits for it.
	Comp string `json:"comp,omitempty"`
	// Activation marks one activation of the ad-hoc subprocess at Element
	// (a scope, Wait == WaitScope, scoped to the subprocess's token) that
	// holds the flow of the activity it runs. Writes from inside it stay
	// in it unless a scope within it defines the name, as in Zeebe.
	Activation bool `json:"activation,omitempty"`
	// Fulfilled is set on an ad-hoc subprocess whose completion condition
	// held (or whose worker said so) while activations it waits for still
	// run: it completes when the last one ends.
	Fulfilled bool `json:"fulfilled,omitempty"`
	// Listener is set while the token runs its element's listeners
	// (WaitListener), or stopped in an incident of one of them.
	Listener *ListenerRun `json:"lsn,omitempty"`
	// Then is what the token does once the terminating tokens under it
	// (or, on a user task running its canceling listeners, itself) have
	// ended (terminating.go).
	Then *Then `json:"then,omitempty"`
}

// Multi counts the inner instances of a multi-instance body.
type Multi struct {
	// Instances is the size of the input collection when the body started.
	Instances int `json:"n"`
	Completed int `json:"done,omitempty"`
}

// Armed is one open wait of a token.
type Armed struct {
	// Element is the element whose row this is: the token's own element (catch
	// event, receive or service task), a boundary event, an event after an
	// event-based gateway, or the start event of an event subprocess.
	Element string `json:"el"`
	// Key is the correlation key the subscription was opened with: a later
	// change of variables must not move an open subscription.
	Key string `json:"key,omitempty"`
	// Message is the message (or signal) name the subscription was opened
	// with, when the element's name is an expression
	// (bpmn.Message.NameExpression, bpmn.Signal.NameExpression); "" for a
	// static name, which the element itself gives.
	Message string `json:"msg,omitempty"`
	// Left counts how many more times a cycle timer fires after its armed
	// firing (-1 = unbounded).
	Left int `json:"left,omitempty"`
}

// WaitKind names what a parked token waits for.
type WaitKind string

const (
	WaitMessage  WaitKind = "message"  // message catch event or receive task
	WaitTimer    WaitKind = "timer"    // timer catch event
	WaitSignal   WaitKind = "signal"   // signal catch event
	WaitEvent    WaitKind = "event"    // event-based gateway: first of several waits wins
	WaitTask     WaitKind = "task"     // pull task (service task, user task, ...)
	WaitJoin     WaitKind = "join"     // parallel join, waiting for sibling flows
	WaitScope    WaitKind = "scope"    // subprocess or event subprocess containing child tokens
	WaitMulti    WaitKind = "multi"    // multi-instance body containing its inner instances
	WaitAdHoc    WaitKind = "adhoc"    // ad-hoc subprocess containing its activations (and its job, when a worker chooses them)
	WaitChild    WaitKind = "child"    // call activity waiting for its child instance
	WaitListener WaitKind = "listener" // a listener's job (Token.Listener)
	// WaitTerminating: a scope ended while user tasks inside it run their
	// canceling listeners; it ends after them (terminating.go).
	WaitTerminating WaitKind = "terminating"
	WaitIncident    WaitKind = "incident" // stopped by an incident until an operator retries
)

// WaitCompensation parks a compensation throw or end event until the
// handlers it started (the tokens whose Comp is its id) have completed.
const WaitCompensation WaitKind = "compensation"

// TriggerKind names what resumed the instance.
type TriggerKind string

const (
	TriggerStart   TriggerKind = "start"
	TriggerMessage TriggerKind = "message"
	TriggerTimer   TriggerKind = "timer"
	// TriggerSignal resumes the signal wait (TokenID, Element) that a
	// broadcast of signal Signal reached, with its Variables.
	TriggerSignal        TriggerKind = "signal"
	TriggerTaskCompleted TriggerKind = "task_completed"
	TriggerTaskFailed    TriggerKind = "task_failed"
	TriggerTaskError     TriggerKind = "task_error"
	// TriggerTaskAssign assigns the user task (TokenID, Element) to
	// Variables["assignee"] (a string, or null to unassign) once its
	// assigning listeners are done: an assignment through /v1 of a user
	// task that has some.
	TriggerTaskAssign TriggerKind = "task_assign"
	// TriggerTaskUpdate changes the open user task (TokenID, Element) by
	// Variables (UserTaskChanges as JSON) once its updating listeners are
	// done: an update through /v1 of a user task that has some.
	TriggerTaskUpdate TriggerKind = "task_update"
	// TriggerChildCompleted resumes a call activity (TokenID, Element) whose
	// child instance ended: with its variables, or with ErrorCode when an
	// uncaught BPMN error ended it.
	TriggerChildCompleted TriggerKind = "child_completed"
	// TriggerChildFailed tells a call activity (TokenID, Element) that its
	// child could not be started (no such definition, no none start event):
	// the token stops in an incident (ErrorMessage says why) that a retry
	// resolves by calling again.
	TriggerChildFailed TriggerKind = "child_failed"
	// TriggerChildEscalated hands a call activity (TokenID, Element) the
	// Escalations its running child threw and none of the child's scopes
	// caught: the call activity's boundary events and the scopes around it
	// catch them as if the call activity threw them.
	TriggerChildEscalated TriggerKind = "child_escalated"
	// TriggerCancel ends an active instance (admin).
	TriggerCancel TriggerKind = "cancel"
	// TriggerRetry resolves the incident of token TokenID and runs its
	// element again (admin).
	TriggerRetry TriggerKind = "retry"
	// TriggerModify moves the instance's tokens (admin, Operate's "modify
	// instance"): the tokens Modification.Cancel names end, Variables are
	// merged, and tokens start at the elements Modification.Activate names.
	TriggerModify TriggerKind = "modify"
)

// Modification is what TriggerModify changes: moving a token is cancelling
// it and activating the element it moves to.
type Modification struct {
	// Cancel names process-level tokens to end, with what they hold (their
	// waits, a called instance, an incident, the tokens inside a scope).
	Cancel []string
	// Activate names process-level elements (not inside a subprocess, not
	// boundary events) to start a token at, each run as if a flow reached
	// it.
	Activate []string
}

// Trigger is the one resume that a step applies.
type Trigger struct {
	Kind TriggerKind
	// Message is the BPMN message name (TriggerMessage).
	Message string
	// CorrelationKey, when set, must equal the waiting subscription's key.
	CorrelationKey string
	// Signal is the signal name (TriggerSignal).
	Signal string
	// TokenID and Element identify the wait a timer, task or child trigger
	// resumes, or the token a retry resolves. On TriggerStart, Element names
	// the message or timer start event to start at ("" = the none start
	// event).
	TokenID string
	Element string
	// ErrorCode is the BPMN error thrown by a task worker (TriggerTaskError)
	// or that ended a child instance (TriggerChildCompleted).
	ErrorCode string
	// Escalations are the codes of the escalations a child threw that none
	// of its scopes caught, in the order thrown (TriggerChildEscalated; with
	// TriggerChildCompleted, those of the step that ended it, caught before
	// its end is applied).
	Escalations []string `json:",omitempty"`
	// Escalated is ChildResult.Escalated (TriggerChildCompleted).
	Escalated int `json:",omitempty"`
	// ErrorMessage describes a task failure (TriggerTaskFailed) or why a
	// child could not start (TriggerChildFailed).
	ErrorMessage string
	// ErrorDetails are a task worker's details of a failure (TriggerTaskFailed).
	ErrorDetails string
	// Retries is the task's remaining retries reported with TriggerTaskFailed;
	// with TriggerRetry, the retries of the task it re-creates (0 = the
	// definition's).
	Retries int
	// RetryTimeout delays the task TriggerTaskFailed re-creates (Task.NotBefore).
	RetryTimeout time.Duration
	// Variables are merged into the instance (start variables, message payload,
	// task results, a child's variables; with TriggerRetry, merged before the
	// element runs again).
	Variables map[string]any
	// Parent is the call activity that starts this instance (TriggerStart).
	Parent *ParentRef
	// Modification is TriggerModify's change.
	Modification *Modification `json:",omitempty"`
}

// WaitRef names one wait of one token. An empty Element means every wait of
// the token. TokenID "" is the process level (State.Armed).
type WaitRef struct {
	TokenID string
	Element string
}

// WaitRename moves the store row of one wait of token TokenID from element
// From to element To, keeping everything else (a timer's due time, a task's
// lock). Only migration produces it.
type WaitRename struct {
	TokenID string
	From    string
	To      string
}

// Subscription is an open message subscription, or with Signal set a signal
// subscription (Message is then the signal name; it has no key). Message is
// the evaluated name when the element's name is an expression.
type Subscription struct {
	TokenID        string
	Element        string
	Message        string
	CorrelationKey string
	Signal         bool
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
	TokenID string
	Element string
	// Type is the worker topic; "" for a Camunda user task (zeebe:userTask),
	// bpmn.UserTaskType for a job-worker user task.
	Type    string
	Retries int
	// Variables are the task's own input: its input mappings and the locals
	// of its scopes (an inner instance's item and loopCounter), nil when it
	// has none. The instance variables are not copied here: the task API
	// reads them beside these when a worker fetches the task.
	Variables map[string]any
	// Headers are the task's zeebe:taskHeaders (static configuration for the
	// worker), nil when it has none.
	Headers map[string]string
	// User is set on user tasks.
	User *UserTask
	// NotBefore keeps the task from being fetched before it (zero = now):
	// the retry timeout of a failed task.
	NotBefore time.Time
	// ErrorMessage and ErrorDetails are the failure a re-created task
	// carries to the next worker that fetches it.
	ErrorMessage, ErrorDetails string
}

// UserTask is what a user task carries, evaluated when the task is created.
type UserTask struct {
	Assignee                        string
	CandidateGroups, CandidateUsers []string
	FormKey, FormID                 string
	// DueDate and FollowUpDate are RFC 3339 date-time text, "" when unset.
	DueDate, FollowUpDate string
	// Priority is 0 to 100, default 50.
	Priority int
}

// Assignment sets the assignee of the user task (TokenID, Element); nil
// unassigns it.
type Assignment struct {
	TokenID  string
	Element  string
	Assignee *string
}

// UserTaskChanges are the fields of a user task an update changes; a nil
// field is left as it is, an empty list or date clears it.
type UserTaskChanges struct {
	CandidateGroups *[]string `json:"candidate_groups,omitempty"`
	CandidateUsers  *[]string `json:"candidate_users,omitempty"`
	DueDate         *string   `json:"due_date,omitempty"`
	FollowUpDate    *string   `json:"follow_up_date,omitempty"`
	Priority        *int      `json:"priority,omitempty"`
}

// UserTaskUpdate applies Changes to the user task (TokenID, Element).
type UserTaskUpdate struct {
	TokenID string
	Element string
	Changes UserTaskChanges
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

// SignalThrow is a signal a step throws: the store records it in the
// outbox with the step's commit, and it is broadcast after the commit
// (store.BroadcastSignal), never inside the step.
type SignalThrow struct {
	// ID derives from the instance, step, element and token like
	// OutboxMessage.ID: a re-run of the step throws it once.
	ID        string
	Element   string
	Signal    string
	Variables map[string]any
}

// Incident stops one token until an operator retries it.
type Incident struct {
	TokenID string `json:"token"`
	Element string `json:"el"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Stage is where a retry resumes the token.
	Stage Stage `json:"stage,omitempty"`
	// ErrorMessage and ErrorDetails are, for a task that failed with no
	// retries left, the worker's own message and details (a stack trace):
	// stored with the incident, not in the instance's state.
	ErrorMessage string `json:"-"`
	ErrorDetails string `json:"-"`
}

// Stage tells where a retry resumes a token stopped by an incident.
type Stage string

const (
	// StageActivate runs the element again from its start.
	StageActivate Stage = ""
	// StageComplete applies the element's output mappings again (its result
	// was merged unmapped when they failed), then leaves it.
	StageComplete Stage = "complete"
	// StageLeave leaves the element, its outputs applied.
	StageLeave Stage = "leave"
	// StageAdHocJob opens the job of an ad-hoc subprocess again (its job
	// failed, or its result could not be applied); its activations run on.
	StageAdHocJob Stage = "adhoc_job"
	// StageBehaviour runs the element's own behaviour again, its input
	// mappings applied and its start listeners done: an incident that
	// arose after them does not run them again.
	StageBehaviour Stage = "behaviour"
)

// ParentRef names the call activity that started an instance.
type ParentRef struct {
	InstanceID string `json:"instance"`
	TokenID    string `json:"token"`
	Element    string `json:"el"`
}

// ChildStart asks the store to create a child instance in this step's
// commit: the latest version of DefinitionKey, started at its none start
// event with Variables and Parent = {this instance, TokenID, Element}.
type ChildStart struct {
	// InstanceID is the parent instance id + "/" + TokenID: a re-run of the
	// step derives the same id.
	InstanceID    string
	TokenID       string
	Element       string
	DefinitionKey string
	// Binding and VersionTag say which version of DefinitionKey starts
	// (bpmn.CallDefinition): the store resolves them when the child starts.
	Binding    string
	VersionTag string
	Variables  map[string]any
}

// ChildResult is what an instance with a Parent reports when it ends: the
// store relays it to the parent as TriggerChildCompleted.
type ChildResult struct {
	Parent    ParentRef
	Variables map[string]any
	// ErrorCode is set when an uncaught BPMN error ended the child.
	ErrorCode string
	// Escalated is how many escalation relays the child sent before the
	// step that ended it (State.Escalated): the parent applies the end only
	// once it has applied as many.
	Escalated int `json:",omitempty"`
}

// ParentEscalation is what an instance with a Parent relays to its parent's
// call activity when escalations none of its scopes caught were thrown in a
// step: their codes in the order thrown. The store sends it with the step's
// NotifyParent when the step also ended the instance, so that the parent
// catches them before it applies the end.
type ParentEscalation struct {
	// ID is derived from the step, so that a re-run of the step sends it once.
	ID     string
	Parent ParentRef
	Codes  []string
}

// Effects are the side effects of one step, written by the store in the
// step's commit transaction, in this order: CloseWaits, RenameWaits, the new
// subscriptions, timers and tasks, outbox messages and signals, Assignments, Updates, ResolvedIncidents, then
// Incidents (a retried token that fails again at once appears in both),
// StartChildren, CancelChildren, NotifyParent and EscalateParent.
type Effects struct {
	// CloseWaits are written first: subscriptions, timers and tasks of these
	// waits are deleted.
	CloseWaits    []WaitRef
	RenameWaits   []WaitRename
	Subscriptions []Subscription
	Timers        []Timer
	Tasks         []Task
	// Assignments set the assignee of open user tasks (and end their
	// assigning state). (Left out of JSON when empty, as traces print
	// effects.)
	Assignments []Assignment `json:",omitempty"`
	// Updates change fields of open user tasks (and end their updating
	// state), after the Assignments.
	Updates []UserTaskUpdate `json:",omitempty"`
	Publish []OutboxMessage
	// Signals are thrown after the commit, with the outbox messages.
	Signals []SignalThrow
	// ResolvedIncidents are token ids whose open incidents this step resolves.
	ResolvedIncidents []string
	Incidents         []Incident
	StartChildren     []ChildStart
	// CancelChildren are ids of child instances to cancel (TriggerCancel).
	CancelChildren []string
	// NotifyParent is set when an instance with a Parent ended.
	NotifyParent *ChildResult
	// EscalateParent is set when an instance with a Parent threw escalations
	// none of its scopes caught.
	EscalateParent *ParentEscalation `json:",omitempty"`
	// Completed is set when the instance reached its end.
	Completed bool
	// Passed are the ids of the elements tokens completed or left and of
	// the sequence flows they took, in the order the step moved them (an
	// element completed and left at once appears once). At most MaxPassed;
	// PassedCut says the step passed more, as a loop does.
	Passed    []string `json:",omitempty"`
	PassedCut bool     `json:",omitempty"`
}

// MaxPassed bounds Effects.Passed: a step that loops many times records
// the start of its path, not all of it.
const MaxPassed = 256

// Instance is what a step starts from: the row read at claim time.
type Instance struct {
	ID string
	// Version is the step counter read at claim time; the step being computed
	// will commit Version+1.
	Version int64
	State   State
}
