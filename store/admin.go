package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/engine"
)

// Queries of the admin API: what an operator reads about definitions,
// instances, incidents and user tasks. None of them claims anything: reading
// an instance's row while a step holds it shows the last committed step.

// DefinitionVersions lists the versions of one definition key.
type DefinitionVersions struct {
	Key      string `json:"key"`
	Versions []int  `json:"versions"`
	Latest   int    `json:"latest"`
}

// ListDefinitions lists every definition key with its versions.
func (s *Store) ListDefinitions(ctx context.Context) ([]DefinitionVersions, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, array_agg(version ORDER BY version), max(version) FROM definitions GROUP BY key ORDER BY key`)
	if err != nil {
		return nil, translate(err, "listing definitions")
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DefinitionVersions, error) {
		var d DefinitionVersions
		var versions []int32
		err := r.Scan(&d.Key, &versions, &d.Latest)
		for _, v := range versions {
			d.Versions = append(d.Versions, int(v))
		}
		return d, err
	})
	return defs, translate(err, "listing definitions")
}

// DefinitionXML is the file definition key@version was deployed from (which
// may hold other processes too). ErrNotFound when there is no such version.
func (s *Store) DefinitionXML(ctx context.Context, key string, version int) (string, error) {
	var xml string
	err := s.pool.QueryRow(ctx, `SELECT f.xml FROM definitions d JOIN deployed_files f ON f.checksum = d.checksum
		WHERE d.key = $1 AND d.version = $2`, key, version).Scan(&xml)
	return xml, translate(err, fmt.Sprintf("reading definition %s@%d", key, version))
}

// DefinitionRef names a definition version.
type DefinitionRef struct {
	Key     string `json:"key"`
	Version int    `json:"version"`
}

// InstanceDetail is what GET /v1/instances/{id} shows.
type InstanceDetail struct {
	ID         string         `json:"instance_id"`
	Definition DefinitionRef  `json:"definition"`
	Status     string         `json:"status"`
	Version    int64          `json:"version"`
	Variables  map[string]any `json:"variables"`
	Tokens     []TokenView    `json:"tokens"`
	Waits      Waits          `json:"waits"`
	Incidents  []Incident     `json:"incidents"`
	Claim      *ClaimView     `json:"claim"`
	ParentID   *string        `json:"parent_id"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
}

// TokenView is one active token.
type TokenView struct {
	ID      string `json:"id"`
	Element string `json:"element"`
	Wait    string `json:"wait"`
	Scope   string `json:"scope,omitempty"`
}

// ClaimView is a held claim.
type ClaimView struct {
	Owner      string  `json:"owner"`
	AgeSeconds float64 `json:"age_seconds"`
}

// Waits are an instance's open waits.
type Waits struct {
	Subscriptions []SubscriptionView `json:"subscriptions"`
	Timers        []TimerView        `json:"timers"`
	Tasks         []TaskView         `json:"tasks"`
}

// SubscriptionView is an open message subscription.
type SubscriptionView struct {
	Token          string    `json:"token"`
	Element        string    `json:"element"`
	Message        string    `json:"message"`
	CorrelationKey string    `json:"correlation_key"`
	CreatedAt      time.Time `json:"created_at"`
}

// TimerView is an armed timer.
type TimerView struct {
	Token    string    `json:"token"`
	Element  string    `json:"element"`
	DueAt    time.Time `json:"due_at"`
	Attempts int       `json:"attempts"`
}

// TaskView is an open task.
type TaskView struct {
	ID            string     `json:"id"`
	Token         string     `json:"token"`
	Element       string     `json:"element"`
	Topic         string     `json:"topic"`
	UserTask      bool       `json:"user_task"`
	Retries       int        `json:"retries"`
	LockedBy      *string    `json:"locked_by"`
	LockExpiresAt *time.Time `json:"lock_expires_at"`
}

// Incident is one incident.
type Incident struct {
	ID         int64      `json:"id"`
	InstanceID string     `json:"instance_id"`
	Token      string     `json:"token"`
	Element    string     `json:"element"`
	Code       string     `json:"code"`
	Message    string     `json:"message"`
	CreatedAt  time.Time  `json:"created_at"`
	ResolvedAt *time.Time `json:"resolved_at"`
}

// Instance reads an instance, its waits, incidents and claim, in one round
// trip. ErrNotFound when it does not exist (or is a start that never
// committed its first step).
func (s *Store) Instance(ctx context.Context, id string) (InstanceDetail, error) {
	d := InstanceDetail{ID: id, Tokens: []TokenView{}, Incidents: []Incident{},
		Waits: Waits{Subscriptions: []SubscriptionView{}, Timers: []TimerView{}, Tasks: []TaskView{}}}
	var tokens []byte
	var owner *string
	var age *time.Duration
	b := &pgx.Batch{}
	b.Queue(`SELECT definition_key, definition_version, status, version, variables, tokens, owner, now() - claimed_at,
			parent_id, created_at, updated_at FROM instances WHERE id = $1 AND version > 0`, id).QueryRow(func(r pgx.Row) error {
		return r.Scan(&d.Definition.Key, &d.Definition.Version, &d.Status, &d.Version, &d.Variables, &tokens, &owner, &age,
			&d.ParentID, &d.CreatedAt, &d.UpdatedAt)
	})
	b.Queue(`SELECT token_id, element_id, message_name, correlation_key, created_at FROM subscriptions WHERE instance_id = $1 ORDER BY created_at`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Waits.Subscriptions, err = pgx.AppendRows(d.Waits.Subscriptions, rows, func(r pgx.CollectableRow) (SubscriptionView, error) {
				var v SubscriptionView
				return v, r.Scan(&v.Token, &v.Element, &v.Message, &v.CorrelationKey, &v.CreatedAt)
			})
			return err
		})
	b.Queue(`SELECT token_id, element_id, due_at, attempts FROM timers WHERE instance_id = $1 ORDER BY due_at`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Waits.Timers, err = pgx.AppendRows(d.Waits.Timers, rows, func(r pgx.CollectableRow) (TimerView, error) {
				var v TimerView
				return v, r.Scan(&v.Token, &v.Element, &v.DueAt, &v.Attempts)
			})
			return err
		})
	b.Queue(`SELECT id::text, token_id, element_id, type, user_task, retries, locked_by, lock_expires_at FROM tasks WHERE instance_id = $1 ORDER BY id`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Waits.Tasks, err = pgx.AppendRows(d.Waits.Tasks, rows, func(r pgx.CollectableRow) (TaskView, error) {
				var v TaskView
				return v, r.Scan(&v.ID, &v.Token, &v.Element, &v.Topic, &v.UserTask, &v.Retries, &v.LockedBy, &v.LockExpiresAt)
			})
			return err
		})
	b.Queue(incidentSelect+` WHERE instance_id = $1 ORDER BY id`, id).Query(func(rows pgx.Rows) error {
		var err error
		d.Incidents, err = pgx.AppendRows(d.Incidents, rows, scanIncident)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return d, translate(err, "reading instance "+id)
	}
	var st engine.State
	if err := json.Unmarshal(tokens, &st); err != nil {
		return d, fmt.Errorf("decoding tokens of %s: %w", id, err)
	}
	for _, t := range st.Tokens {
		d.Tokens = append(d.Tokens, TokenView{ID: t.ID, Element: t.Element, Wait: string(t.Wait), Scope: t.Scope})
	}
	if owner != nil {
		d.Claim = &ClaimView{Owner: *owner}
		if age != nil {
			d.Claim.AgeSeconds = age.Seconds()
		}
	}
	if d.Variables == nil {
		d.Variables = map[string]any{}
	}
	return d, nil
}

const incidentSelect = `SELECT id, instance_id, token_id, element_id, code, message, created_at, resolved_at FROM incidents`

func scanIncident(r pgx.CollectableRow) (Incident, error) {
	var i Incident
	return i, r.Scan(&i.ID, &i.InstanceID, &i.Token, &i.Element, &i.Code, &i.Message, &i.CreatedAt, &i.ResolvedAt)
}

// InstanceSummary is one row of an instance list.
type InstanceSummary struct {
	ID          string        `json:"instance_id"`
	Definition  DefinitionRef `json:"definition"`
	Status      string        `json:"status"`
	Version     int64         `json:"version"`
	HasIncident bool          `json:"has_incident"`
	UpdatedAt   time.Time     `json:"updated_at"`
}

// InstanceFilter narrows an instance list; After is the cursor (the last id
// of the previous page).
type InstanceFilter struct {
	Definition  string
	Status      string
	HasIncident *bool
	Limit       int
	After       string
}

// ListInstances pages through instances by id.
func (s *Store) ListInstances(ctx context.Context, f InstanceFilter) ([]InstanceSummary, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT i.id, i.definition_key, i.definition_version, i.status, i.version,
		       EXISTS (SELECT 1 FROM incidents x WHERE x.instance_id = i.id AND x.resolved_at IS NULL), i.updated_at
		  FROM instances i
		 WHERE i.version > 0 AND i.id > $1
		   AND ($2 = '' OR i.definition_key = $2) AND ($3 = '' OR i.status = $3)
		   AND ($4::boolean IS NULL OR $4 = EXISTS (SELECT 1 FROM incidents x WHERE x.instance_id = i.id AND x.resolved_at IS NULL))
		 ORDER BY i.id LIMIT $5`, f.After, f.Definition, f.Status, f.HasIncident, f.Limit)
	if err != nil {
		return nil, translate(err, "listing instances")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (InstanceSummary, error) {
		var v InstanceSummary
		return v, r.Scan(&v.ID, &v.Definition.Key, &v.Definition.Version, &v.Status, &v.Version, &v.HasIncident, &v.UpdatedAt)
	})
	return out, translate(err, "listing instances")
}

// IncidentFilter narrows an incident list; After is the cursor (an id).
type IncidentFilter struct {
	Open       *bool
	InstanceID string
	Limit      int
	After      int64
}

// ListIncidents pages through incidents by id.
func (s *Store) ListIncidents(ctx context.Context, f IncidentFilter) ([]Incident, error) {
	rows, err := s.pool.Query(ctx, incidentSelect+`
		 WHERE id > $1 AND ($2 = '' OR instance_id = $2)
		   AND ($3::boolean IS NULL OR $3 = (resolved_at IS NULL))
		 ORDER BY id LIMIT $4`, f.After, f.InstanceID, f.Open, f.Limit)
	if err != nil {
		return nil, translate(err, "listing incidents")
	}
	out, err := pgx.CollectRows(rows, scanIncident)
	return out, translate(err, "listing incidents")
}

// IncidentByID reads one incident. ErrNotFound when there is none.
func (s *Store) IncidentByID(ctx context.Context, id int64) (Incident, error) {
	rows, err := s.pool.Query(ctx, incidentSelect+` WHERE id = $1`, id)
	if err != nil {
		return Incident{}, translate(err, "reading incident")
	}
	inc, err := pgx.CollectExactlyOneRow(rows, scanIncident)
	return inc, translate(err, fmt.Sprintf("reading incident %d", id))
}
