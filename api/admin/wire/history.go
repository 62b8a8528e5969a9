package wire

import "time"

// HistoryStep is one committed step of an instance, as GET
// /v1/instances/{id}/history answers it (newest first).
type HistoryStep struct {
	// Version is the step counter the step committed (Instance.Version).
	Version     int64     `json:"version"`
	CommittedAt time.Time `json:"committed_at"`
	// Cause is what advanced the instance: relay, start, child_start,
	// task, child_ended, cancel_child, signal, timer, timer_start, or
	// admin_<op> (admin_start, admin_cancel, admin_retry, admin_variables,
	// admin_migrate).
	Cause string `json:"cause"`
	// Detail names what the cause carried: a message's name, a task
	// outcome and its element, a timer's element, a migration's target.
	Detail string `json:"detail"`
	// Owner held the claim the step committed under.
	Owner string `json:"owner"`
	// MessageID is the relay the step applied (its inbox row), if any.
	MessageID *string `json:"message_id"`
	// Bounces counts the claim refusals the resume met before it applied,
	// when it counts them (a timer fire, an instance of a bulk migration);
	// null otherwise.
	Bounces *int `json:"bounces"`
	// Passed are the ids of the elements the step's tokens completed or
	// left and of the sequence flows they took, in order (an element
	// completed and left at once appears once); empty for a step recorded
	// before paths were. At most 256; PassedCut says the step passed more.
	Passed    []string `json:"passed"`
	PassedCut bool     `json:"passed_cut"`
}

// History answers GET /v1/instances/{id}/history: a page of steps, newest
// first; Next is the cursor of the older ones (null on the last page).
type History struct {
	InstanceID string        `json:"instance_id"`
	Steps      []HistoryStep `json:"steps"`
	Next       *string       `json:"next"`
}

// MigrationPreflight answers POST /v1/instances/{id}/migrate/preflight: what
// the migration would do, checked on the instance as last committed, with
// nothing claimed or written. OK false carries the refusal the migration
// would meet (Code, Detail).
type MigrationPreflight struct {
	InstanceID string        `json:"instance_id"`
	From       DefinitionRef `json:"from"`
	To         DefinitionRef `json:"to"`
	// Version is the step counter the check read: a step committed since
	// may change the answer.
	Version int64 `json:"version"`
	OK      bool  `json:"ok"`
	// Status is the HTTP status the migration would answer (200 when OK);
	// Code and Detail its refusal's problem.
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Tokens are where each token is and would be (empty when refused).
	Tokens []MigratedToken `json:"tokens"`
}

// MigratedToken is one token of a migration's preview.
type MigratedToken struct {
	ID   string `json:"id"`
	From string `json:"from"`
	To   string `json:"to"`
	Wait string `json:"wait"`
}

// ModificationRequest is the body of POST /v1/instances/{id}/modification
// and of its preflight: the process-level tokens to cancel, the variables
// to merge, and the process-level elements to start a token at. Moving a
// token is cancelling it and activating where it goes.
type ModificationRequest struct {
	Cancel    []string       `json:"cancel,omitempty"`
	Activate  []string       `json:"activate,omitempty"`
	Variables map[string]any `json:"variables,omitempty"`
}

// Modified answers a modification: the instance as its step left it.
type Modified struct {
	InstanceID string  `json:"instance_id"`
	Status     string  `json:"status"`
	Tokens     []Token `json:"tokens"`
}

// ModificationPreflight answers POST /v1/instances/{id}/modification/
// preflight: what the modification would do on the instance as its last
// step committed it, claiming and writing nothing.
type ModificationPreflight struct {
	InstanceID string `json:"instance_id"`
	// Version is the step counter the check read.
	Version int64 `json:"version"`
	OK      bool  `json:"ok"`
	// Status is the HTTP status the modification would answer (200 when
	// OK); Code and Detail its refusal's problem.
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Tokens are where the tokens would be once the step ran (empty when
	// refused), and InstanceStatus the instance's status then.
	Tokens         []Token `json:"tokens"`
	InstanceStatus string  `json:"instance_status,omitempty"`
}
