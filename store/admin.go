package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/api/admin/adminapi"
	"github.com/sutra-run/worker/engine"
)

// Queries of the admin API: what an operator reads about definitions,
// instances, incidents and user tasks, in the shapes the API answers with
// (adminapi). None of them claims anything: reading
// an instance's row while a step holds it shows the last committed step.

// ListDefinitions lists every definition key with its versions.
func (s *Store) ListDefinitions(ctx context.Context) ([]adminapi.DefinitionVersions, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, array_agg(version ORDER BY version), array_agg(zeebe_key::text ORDER BY version), max(version)
		FROM definitions GROUP BY key ORDER BY key`)
	if err != nil {
		return nil, translate(err, "listing definitions")
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (adminapi.DefinitionVersions, error) {
		var d adminapi.DefinitionVersions
		var versions []int32
		err := r.Scan(&d.Key, &versions, &d.ZeebeKeys, &d.Latest)
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

// Instance reads an instance, its waits, incidents and claim, in one round
// trip. ErrNotFound when it does not exist (or is a start that never
// committed its first step).
func (s *Store) Instance(ctx context.Context, id string) (adminapi.Instance, error) {
	d := adminapi.Instance{ID: id, Tokens: []adminapi.Token{}, Incidents: []adminapi.Incident{},
		Waits: adminapi.Waits{Subscriptions: []adminapi.Subscription{}, Timers: []adminapi.Timer{}, Tasks: []adminapi.Task{}}}
	var tokens []byte
	var owner *string
	var age *time.Duration
	b := &pgx.Batch{}
	b.Queue(`SELECT zeebe_key, definition_key, definition_version, status, version, variables, tokens, owner, now() - claimed_at,
			parent_id, created_at, updated_at FROM instances WHERE id = $1 AND version > 0`, id).QueryRow(func(r pgx.Row) error {
		return r.Scan(&d.ZeebeKey, &d.Definition.Key, &d.Definition.Version, &d.Status, &d.Version, &d.Variables, &tokens, &owner, &age,
			&d.ParentID, &d.CreatedAt, &d.UpdatedAt)
	})
	b.Queue(`SELECT token_id, element_id, message_name, correlation_key, created_at FROM subscriptions WHERE instance_id = $1 ORDER BY created_at`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Waits.Subscriptions, err = pgx.AppendRows(d.Waits.Subscriptions, rows, func(r pgx.CollectableRow) (adminapi.Subscription, error) {
				var v adminapi.Subscription
				return v, r.Scan(&v.Token, &v.Element, &v.Message, &v.CorrelationKey, &v.CreatedAt)
			})
			return err
		})
	b.Queue(`SELECT token_id, element_id, due_at, attempts FROM timers WHERE instance_id = $1 ORDER BY due_at`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Waits.Timers, err = pgx.AppendRows(d.Waits.Timers, rows, func(r pgx.CollectableRow) (adminapi.Timer, error) {
				var v adminapi.Timer
				return v, r.Scan(&v.Token, &v.Element, &v.DueAt, &v.Attempts)
			})
			return err
		})
	b.Queue(`SELECT id::text, id::text, token_id, element_id, type, user_task, retries, locked_by, lock_expires_at FROM tasks WHERE instance_id = $1 ORDER BY id`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Waits.Tasks, err = pgx.AppendRows(d.Waits.Tasks, rows, func(r pgx.CollectableRow) (adminapi.Task, error) {
				var v adminapi.Task
				return v, r.Scan(&v.ID, &v.ZeebeKey, &v.Token, &v.Element, &v.Topic, &v.UserTask, &v.Retries, &v.LockedBy, &v.LockExpiresAt)
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
		d.Tokens = append(d.Tokens, adminapi.Token{ID: t.ID, Element: t.Element, Wait: string(t.Wait), Scope: t.Scope})
	}
	if owner != nil {
		d.Claim = &adminapi.Claim{Owner: *owner}
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

func scanIncident(r pgx.CollectableRow) (adminapi.Incident, error) {
	var i adminapi.Incident
	err := r.Scan(&i.ID, &i.InstanceID, &i.Token, &i.Element, &i.Code, &i.Message, &i.CreatedAt, &i.ResolvedAt)
	i.ZeebeKey = i.ID // an incident's id is drawn from sutra_keys
	return i, err
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
func (s *Store) ListInstances(ctx context.Context, f InstanceFilter) ([]adminapi.InstanceSummary, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT i.id, i.zeebe_key, i.definition_key, i.definition_version, i.status, i.version,
		       EXISTS (SELECT 1 FROM incidents x WHERE x.instance_id = i.id AND x.resolved_at IS NULL), i.updated_at
		  FROM instances i
		 WHERE i.version > 0 AND i.id > $1
		   AND ($2 = '' OR i.definition_key = $2) AND ($3 = '' OR i.status = $3)
		   AND ($4::boolean IS NULL OR $4 = EXISTS (SELECT 1 FROM incidents x WHERE x.instance_id = i.id AND x.resolved_at IS NULL))
		 ORDER BY i.id LIMIT $5`, f.After, f.Definition, f.Status, f.HasIncident, f.Limit)
	if err != nil {
		return nil, translate(err, "listing instances")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (adminapi.InstanceSummary, error) {
		var v adminapi.InstanceSummary
		return v, r.Scan(&v.ID, &v.ZeebeKey, &v.Definition.Key, &v.Definition.Version, &v.Status, &v.Version, &v.HasIncident, &v.UpdatedAt)
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
func (s *Store) ListIncidents(ctx context.Context, f IncidentFilter) ([]adminapi.Incident, error) {
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
func (s *Store) IncidentByID(ctx context.Context, id int64) (adminapi.Incident, error) {
	rows, err := s.pool.Query(ctx, incidentSelect+` WHERE id = $1`, id)
	if err != nil {
		return adminapi.Incident{}, translate(err, "reading incident")
	}
	inc, err := pgx.CollectExactlyOneRow(rows, scanIncident)
	return inc, translate(err, fmt.Sprintf("reading incident %d", id))
}
