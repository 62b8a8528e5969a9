// Package wire holds the bodies of the admin API's calls and answers
// (/v1, docs/openapi.yaml): the server (api/admin and the store's queries
// behind it) and its clients (cmd/sutractl) share these declarations, so
// that neither can drift from the other. It imports nothing of the worker,
// so a client links none of it.
package wire

import (
	"encoding/json"
	"time"
)

// StartRequest is the body of POST /v1/instances.
type StartRequest struct {
	Definition string         `json:"definition"`
	Version    int            `json:"version,omitempty"`
	InstanceID string         `json:"instance_id,omitempty"`
	Variables  map[string]any `json:"variables,omitempty"`
}

// MigrateRequest is the body of POST /v1/instances/{id}/migrate.
type MigrateRequest struct {
	TargetVersion int               `json:"target_version"`
	Mapping       map[string]string `json:"mapping,omitempty"`
}

// MigrationRequest is the body of POST /v1/migrations.
type MigrationRequest struct {
	Definition  string            `json:"definition"`
	FromVersion int               `json:"from_version"`
	ToVersion   int               `json:"to_version"`
	Mapping     map[string]string `json:"mapping,omitempty"`
}

// RetryRequest is the body of POST /v1/incidents/{id}/retry.
type RetryRequest struct {
	Variables map[string]any `json:"variables,omitempty"`
	// Retries are the attempts a failed task gets again (0: the retries
	// its model gives it).
	Retries int `json:"retries,omitempty"`
}

// MessageRequest is the body of POST /v1/messages.
type MessageRequest struct {
	Message        string         `json:"message"`
	CorrelationKey string         `json:"correlation_key,omitempty"`
	InstanceID     string         `json:"instance_id,omitempty"`
	Variables      map[string]any `json:"variables,omitempty"`
	TTL            string         `json:"ttl,omitempty"`
	MessageID      string         `json:"message_id,omitempty"`
}

// AssignmentRequest is the body of POST /v1/user-tasks/{id}/assignment; a
// null assignee unassigns.
type AssignmentRequest struct {
	Assignee *string `json:"assignee"`
}

// AssignmentAccepted answers (202) an assignment of a user task with
// assigning listeners: it takes effect once their jobs are done.
type AssignmentAccepted struct {
	State string `json:"state"`
}

// UserTaskUpdate is the body of PATCH /v1/user-tasks/{id}: the fields it
// changes. An omitted (or null) field is left as it is; an empty list or
// date ("") clears it.
type UserTaskUpdate struct {
	CandidateGroups *[]string `json:"candidate_groups,omitempty"`
	CandidateUsers  *[]string `json:"candidate_users,omitempty"`
	DueDate         *string   `json:"due_date,omitempty"`
	FollowUpDate    *string   `json:"follow_up_date,omitempty"`
	Priority        *int      `json:"priority,omitempty"`
}

// UpdateAccepted answers (202) an update of a user task with updating
// listeners: it takes effect once their jobs are done.
type UpdateAccepted struct {
	State string `json:"state"`
}

// CompletionRequest is the body of POST /v1/user-tasks/{id}/completion.
type CompletionRequest struct {
	Variables map[string]any `json:"variables,omitempty"`
	// Override completes a task assigned to someone else.
	Override bool `json:"override,omitempty"`
}

// Deployed is one definition a deploy created or found unchanged.
type Deployed struct {
	Key     string `json:"key"`
	Version int    `json:"version"`
	// ZeebeKey is the version's key for Zeebe clients (processDefinitionKey);
	// none for a DMN file.
	ZeebeKey  int64 `json:"zeebe_key,string,omitempty"`
	Unchanged bool  `json:"unchanged"`
}

// DeployedDecision is one decision a deploy created or found unchanged.
type DeployedDecision struct {
	DecisionID string `json:"decision_id"`
	Name       string `json:"name"`
	Version    int    `json:"version"`
	VersionTag string `json:"version_tag,omitempty"`
	Unchanged  bool   `json:"unchanged"`
}

// Deployment answers POST /v1/definitions: what the file was (Kind, "bpmn"
// or "dmn"), the first process or decision it held (a decision's key is
// its decision id), and every one.
type Deployment struct {
	Deployed
	Kind        string             `json:"kind"`
	Definitions []Deployed         `json:"definitions"`
	Decisions   []DeployedDecision `json:"decisions"`
}

// Decision is one deployed version of a decision (GET /v1/decisions).
type Decision struct {
	DecisionID string    `json:"decision_id"`
	Name       string    `json:"name"`
	Version    int       `json:"version"`
	VersionTag *string   `json:"version_tag"`
	DeployedAt time.Time `json:"deployed_at"`
}

// EvaluationRequest is the body of POST /v1/decisions/{id}/evaluation.
type EvaluationRequest struct {
	Variables map[string]any `json:"variables,omitempty"`
	// Version is the version to evaluate (0: the latest).
	Version int `json:"version,omitempty"`
}

// Evaluation answers POST /v1/decisions/{id}/evaluation: the decision
// evaluated (with its key for Zeebe clients and the graph of the file it
// came from), its output, as a business rule task's result variable
// receives it, and every decision evaluated, required ones first.
type Evaluation struct {
	DecisionID string              `json:"decision_id"`
	Name       string              `json:"name"`
	Version    int                 `json:"version"`
	ZeebeKey   int64               `json:"zeebe_key,string"`
	DRG        DRG                 `json:"drg"`
	Output     any                 `json:"output"`
	Decisions  []EvaluatedDecision `json:"decisions"`
}

// DRG is a DMN file as a decision requirements graph: its definitions' id
// and name, and its key for Zeebe clients (decisionRequirementsKey).
type DRG struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	ZeebeKey int64  `json:"zeebe_key,string"`
}

// EvaluatedDecision is one decision of an evaluation.
type EvaluatedDecision struct {
	DecisionID string `json:"decision_id"`
	Name       string `json:"name"`
	Version    int    `json:"version"`
	ZeebeKey   int64  `json:"zeebe_key,string"`
	// Type is decision_table or literal_expression.
	Type   string `json:"type"`
	Output any    `json:"output"`
	// Inputs are a decision table's inputs as evaluated, in column order
	// (empty for a literal expression).
	Inputs []EvaluatedValue `json:"inputs"`
	// MatchedRules are a decision table's rules that matched, in rule order
	// (empty for a literal expression).
	MatchedRules []MatchedRule `json:"matched_rules"`
}

// EvaluatedValue is the value of one input or output column of a table.
type EvaluatedValue struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// MatchedRule is a rule that matched: its id, its position in the table
// (from 1) and its outputs by name.
type MatchedRule struct {
	RuleID  string         `json:"rule_id"`
	Index   int            `json:"index"`
	Outputs map[string]any `json:"outputs"`
}

// DefinitionVersions lists the versions of one definition key.
type DefinitionVersions struct {
	Key      string `json:"key"`
	Versions []int  `json:"versions"`
	// ZeebeKeys are the versions' keys for Zeebe clients, in the order of
	// Versions, as strings of digits.
	ZeebeKeys []string `json:"zeebe_keys"`
	Latest    int      `json:"latest"`
}

// Definitions answers GET /v1/definitions.
type Definitions struct {
	Definitions []DefinitionVersions `json:"definitions"`
}

// DefinitionRef names a definition version.
type DefinitionRef struct {
	Key     string `json:"key"`
	Version int    `json:"version"`
}

// Instance answers GET /v1/instances/{id}.
type Instance struct {
	ID string `json:"instance_id"`
	// ZeebeKey is the instance's key for Zeebe clients (processInstanceKey).
	ZeebeKey   int64          `json:"zeebe_key,string"`
	Definition DefinitionRef  `json:"definition"`
	Status     string         `json:"status"`
	Version    int64          `json:"version"`
	Variables  map[string]any `json:"variables"`
	Tokens     []Token        `json:"tokens"`
	// Compensable are the completed activities a compensation throw may
	// still undo, the latest completion last.
	Compensable []Compensable `json:"compensable"`
	Waits       Waits         `json:"waits"`
	Incidents   []Incident    `json:"incidents"`
	// CalledIncidents are the open incidents of the instances it called,
	// at any depth (the first MaxCalledIncidents, oldest first): a parent
	// that waits on a stuck child shows it.
	CalledIncidents []CalledIncident `json:"called_incidents"`
	Claim           *Claim           `json:"claim"`
	ParentID        *string          `json:"parent_id"`
	CreatedAt       time.Time        `json:"created_at"`
	UpdatedAt       time.Time        `json:"updated_at"`
}

// Token is one active token.
type Token struct {
	ID      string `json:"id"`
	Element string `json:"element"`
	Wait    string `json:"wait"`
	Scope   string `json:"scope,omitempty"`
	// CalledInstance is the id of the instance a call activity's token
	// waits for (wait "child").
	CalledInstance string `json:"called_instance,omitempty"`
}

// Compensable is a completed activity with a compensation handler that no
// compensation has undone yet.
type Compensable struct {
	Element string `json:"element"`
	// Scope is the token of the scope whose compensation throws reach it;
	// absent at process level.
	Scope string `json:"scope,omitempty"`
	// In are the completed embedded subprocesses between Scope and the
	// activity, outermost first.
	In []string `json:"in,omitempty"`
	// Times counts its completions there: its handler runs that many times.
	Times int `json:"times"`
}

// Claim is a held claim.
type Claim struct {
	Owner      string  `json:"owner"`
	AgeSeconds float64 `json:"age_seconds"`
}

// Waits are an instance's open waits.
type Waits struct {
	Subscriptions []Subscription       `json:"subscriptions"`
	Signals       []SignalSubscription `json:"signals"`
	Timers        []Timer              `json:"timers"`
	Tasks         []Task               `json:"tasks"`
}

// SignalSubscription is an open signal wait: a catch, boundary or event
// subprocess start event waiting for a broadcast of its signal.
type SignalSubscription struct {
	Token     string    `json:"token"`
	Element   string    `json:"element"`
	Signal    string    `json:"signal"`
	CreatedAt time.Time `json:"created_at"`
}

// Subscription is an open message subscription.
type Subscription struct {
	Token          string    `json:"token"`
	Element        string    `json:"element"`
	Message        string    `json:"message"`
	CorrelationKey string    `json:"correlation_key"`
	CreatedAt      time.Time `json:"created_at"`
}

// Timer is an armed timer.
type Timer struct {
	Token    string    `json:"token"`
	Element  string    `json:"element"`
	DueAt    time.Time `json:"due_at"`
	Attempts int       `json:"attempts"`
}

// Task is an open task. Its id is its key for Zeebe clients (the job
// key), given again as zeebe_key.
type Task struct {
	ID            string     `json:"id"`
	ZeebeKey      string     `json:"zeebe_key"`
	Token         string     `json:"token"`
	Element       string     `json:"element"`
	Topic         string     `json:"topic"`
	UserTask      bool       `json:"user_task"`
	Retries       int        `json:"retries"`
	LockedBy      *string    `json:"locked_by"`
	LockExpiresAt *time.Time `json:"lock_expires_at"`
}

// Incident is one incident; its id travels as a string of digits, like
// every row id. Its id is its key for Zeebe clients, given again as
// zeebe_key.
type Incident struct {
	ID         int64  `json:"id,string"`
	ZeebeKey   int64  `json:"zeebe_key,string"`
	InstanceID string `json:"instance_id"`
	Token      string `json:"token"`
	Element    string `json:"element"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	// ErrorMessage and ErrorDetails are, for a task that failed with no
	// retries left, what its worker reported (errorMessage, errorDetails:
	// a stack trace); null otherwise.
	ErrorMessage *string    `json:"error_message"`
	ErrorDetails *string    `json:"error_details"`
	CreatedAt    time.Time  `json:"created_at"`
	ResolvedAt   *time.Time `json:"resolved_at"`
	// Definition is the process of its instance, in an incident list;
	// ProcessName and ElementName are its and the element's names in the
	// BPMN there (left out when they have none).
	Definition  *DefinitionRef `json:"definition,omitempty"`
	ProcessName string         `json:"process_name,omitempty"`
	ElementName string         `json:"element_name,omitempty"`
}

// MaxCalledIncidents is the most called instances' incidents an instance
// shows.
const MaxCalledIncidents = 100

// CalledIncident is an open incident of an instance called, directly or
// not, by the instance read; CalledBy is the element of the read
// instance's call activity it descends from.
type CalledIncident struct {
	Incident
	CalledBy string `json:"called_by"`
}

// InstanceCount is the total of GET /v1/instances?total=true: exact when
// Exact, else an estimate.
type InstanceCount struct {
	Count int64 `json:"count"`
	Exact bool  `json:"exact"`
}

// InstanceSummary is one item of GET /v1/instances.
type InstanceSummary struct {
	ID          string        `json:"instance_id"`
	ZeebeKey    int64         `json:"zeebe_key,string"`
	Definition  DefinitionRef `json:"definition"`
	Status      string        `json:"status"`
	Version     int64         `json:"version"`
	HasIncident bool          `json:"has_incident"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
	// EndedAt is when it ended (null while it runs); DurationMS how long it
	// ran, or has been running at the answer, in milliseconds.
	EndedAt    *time.Time `json:"ended_at"`
	DurationMS int64      `json:"duration_ms"`
}

// ElementStatistics counts, for one element of a definition version, the
// tokens of active instances at it and the open incidents raised at it.
type ElementStatistics struct {
	Element   string `json:"element"`
	Active    int64  `json:"active"`
	Incidents int64  `json:"incidents"`
}

// Statistics answers GET /v1/definitions/{key}/versions/{version}/statistics:
// the counts over one page of the version's active instances (Instances of
// them); Next is the cursor of the following page, null on the last.
type Statistics struct {
	Elements  []ElementStatistics `json:"elements"`
	Instances int                 `json:"instances"`
	Next      *string             `json:"next"`
}

// WhoAmI answers GET /v1/whoami: the scope the presented token opens
// (admin or tasks), or open when the routes serve every caller.
type WhoAmI struct {
	Scope string `json:"scope"`
}

// Started answers POST /v1/instances.
type Started struct {
	InstanceID string `json:"instance_id"`
	ZeebeKey   int64  `json:"zeebe_key,string"`
}

// Cancelled answers POST /v1/instances/{id}/cancel: status cancelled (200),
// or cancelling (202) while user tasks in it run their canceling
// listeners.
type Cancelled struct {
	InstanceID string `json:"instance_id"`
	Status     string `json:"status"`
}

// VariablesSet answers PATCH /v1/instances/{id}/variables: every variable
// of the instance after the merge.
type VariablesSet struct {
	InstanceID string         `json:"instance_id"`
	Variables  map[string]any `json:"variables"`
}

// Migrated answers POST /v1/instances/{id}/migrate.
type Migrated struct {
	InstanceID string        `json:"instance_id"`
	Definition DefinitionRef `json:"definition"`
}

// MigrationStarted answers POST /v1/migrations.
type MigrationStarted struct {
	ID string `json:"id"`
}

// Migration answers GET /v1/migrations/{id}: a bulk migration's progress.
type Migration struct {
	ID          string    `json:"id"`
	Definition  string    `json:"definition"`
	FromVersion int       `json:"from_version"`
	ToVersion   int       `json:"to_version"`
	State       string    `json:"state"`
	Total       int       `json:"total"`
	Migrated    int       `json:"migrated"`
	Retrying    int       `json:"retrying"`
	Refused     []Refusal `json:"refused"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Refusal is an instance a bulk migration could not move.
type Refusal struct {
	InstanceID string `json:"instance_id"`
	Code       string `json:"code"`
	Detail     string `json:"detail"`
}

// IncidentRetried answers POST /v1/incidents/{id}/retry.
type IncidentRetried struct {
	IncidentID int64  `json:"incident_id,string"`
	InstanceID string `json:"instance_id"`
	Resolved   bool   `json:"resolved"`
}

// SignalRequest is the body of POST /v1/signals.
type SignalRequest struct {
	Name string `json:"name"`
	// SignalID names the broadcast (default: a new id): a caller that got
	// no answer retries with the same one, and nothing is sent twice.
	SignalID  string         `json:"signal_id,omitempty"`
	Variables map[string]any `json:"variables,omitempty"`
}

// SignalBroadcast answers POST /v1/signals: the broadcast's id, and how
// many waiting subscriptions it reached and instances it starts (each
// resumed or started after the answer, under its own claim).
type SignalBroadcast struct {
	SignalID      string `json:"signal_id"`
	Subscriptions int    `json:"subscriptions"`
	Starts        int    `json:"starts"`
}

// MessagePublished answers POST /v1/messages.
type MessagePublished struct {
	MessageID string `json:"message_id"`
}

// UserTask is a user task as the tools people work them with see it. Its
// id is its key for Zeebe clients (the job key), given again as zeebe_key.
type UserTask struct {
	ID         string `json:"id"`
	ZeebeKey   string `json:"zeebe_key"`
	InstanceID string `json:"instance_id"`
	Element    string `json:"element"`
	// Name and ProcessName are the user task's and its process's names
	// in the BPMN ("" when they have none).
	Name            string         `json:"name"`
	ProcessName     string         `json:"process_name"`
	Definition      DefinitionRef  `json:"definition"`
	Assignee        *string        `json:"assignee"`
	CandidateGroups []string       `json:"candidate_groups"`
	CandidateUsers  []string       `json:"candidate_users"`
	FormKey         *string        `json:"form_key"`
	FormID          *string        `json:"form_id"`
	DueDate         *string        `json:"due_date"`
	FollowUpDate    *string        `json:"follow_up_date"`
	Priority        int            `json:"priority"`
	Variables       map[string]any `json:"variables"`
	// State is created (open) or completing (its completion is on its way
	// to the instance).
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
}

// ParkedMessage is a BPMN message parked after the broker returned it on
// every attempt (SUTRA.OUTBOX.UNROUTABLE).
type ParkedMessage struct {
	ID             string    `json:"id"`
	InstanceID     string    `json:"instance_id"`
	ElementID      string    `json:"element_id"`
	Target         string    `json:"target"`
	Message        string    `json:"message"`
	CorrelationKey string    `json:"correlation_key"`
	Attempts       int       `json:"attempts"`
	CreatedAt      time.Time `json:"created_at"`
	ParkedAt       time.Time `json:"parked_at"`
	Code           string    `json:"code"`
	Reason         string    `json:"reason"`
}

// ParkedSettled answers POST /v1/outbox/parked/{id}/retry and /discard.
type ParkedSettled struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// BatchRequest is the body of POST /v1/batches: an operation on the
// instances Filter matches (the instance list's filters) or on those IDs
// names, one of the two.
type BatchRequest struct {
	// Operation is cancel, retry (the open incidents of each instance) or
	// migrate (to TargetVersion of each instance's definition, with
	// Mapping naming the elements whose ids changed).
	Operation     string            `json:"operation"`
	Filter        *BatchFilter      `json:"filter,omitempty"`
	IDs           []string          `json:"ids,omitempty"`
	TargetVersion int               `json:"target_version,omitempty"`
	Mapping       map[string]string `json:"mapping,omitempty"`
}

// MaxBatchIDs is the most instance ids one batch names.
const MaxBatchIDs = 10000

// BatchFilter is the instance list's filters (GET /v1/instances), as a
// batch names them.
type BatchFilter struct {
	Definition    string          `json:"definition,omitempty"`
	Version       int             `json:"version,omitempty"`
	Status        string          `json:"status,omitempty"`
	HasIncident   *bool           `json:"has_incident,omitempty"`
	Variable      string          `json:"variable,omitempty"`
	Value         json.RawMessage `json:"value,omitempty"`
	CreatedAfter  *time.Time      `json:"created_after,omitempty"`
	CreatedBefore *time.Time      `json:"created_before,omitempty"`
}

// BatchStarted answers POST /v1/batches (202).
type BatchStarted struct {
	ID string `json:"id"`
}

// Batch is a batch operation's progress (GET /v1/batches/{id}).
type Batch struct {
	ID        string `json:"id"`
	Operation string `json:"operation"`
	// State is running until every instance is done, refused or failed.
	State string `json:"state"`
	// Total is the number of ids named; null for a filter, whose
	// instances are not counted up front.
	Total *int  `json:"total"`
	Done  int64 `json:"done"`
	// Refused counts the instances the operation refused, by code
	// (SUTRA.RUNTIME.RESUME.NOT_WAITING: it had ended; …).
	Refused map[string]int64 `json:"refused"`
	// Failed counts the instances whose operation failed with no code.
	Failed int64 `json:"failed"`
	// Retrying counts the instances put off by a held claim, to be tried
	// again.
	Retrying int64 `json:"retrying"`
	// WalkedTo is the last instance id the walk handled.
	WalkedTo  string    `json:"walked_to"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}
