package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
	rows, err := s.pool.Query(ctx, `SELECT key, array_agg(version ORDER BY version), max(version) FROM definitions GROUP BY key ORDER BY key`)
	if err != nil {
		return nil, translate(err, "listing definitions")
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (adminapi.DefinitionVersions, error) {
		var d adminapi.DefinitionVersions
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
	b.Queue(`SELECT definition_key, definition_version, status, version, variables, tokens, owner, now() - claimed_at,
			parent_id, created_at, updated_at FROM instances WHERE id = $1 AND version > 0`, id).QueryRow(func(r pgx.Row) error {
		return r.Scan(&d.Definition.Key, &d.Definition.Version, &d.Status, &d.Version, &d.Variables, &tokens, &owner, &age,
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
	b.Queue(`SELECT id::text, token_id, element_id, type, user_task, retries, locked_by, lock_expires_at FROM tasks WHERE instance_id = $1 ORDER BY id`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Waits.Tasks, err = pgx.AppendRows(d.Waits.Tasks, rows, func(r pgx.CollectableRow) (adminapi.Task, error) {
				var v adminapi.Task
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
	return i, r.Scan(&i.ID, &i.InstanceID, &i.Token, &i.Element, &i.Code, &i.Message, &i.CreatedAt, &i.ResolvedAt)
}

// InstanceFilter narrows an instance list; After is the cursor (the last id
// of the previous page). Empty fields do not filter.
type InstanceFilter struct {
	Definition  string
	Version     int
	Status      string
	HasIncident *bool
	// Variable, when set, keeps the instances whose variable of that name
	// holds Value (JSON, compared as JSON: "1" matches the number 1).
	Variable string
	Value    json.RawMessage
	// CreatedAfter and CreatedBefore bound the creation time [after, before).
	CreatedAfter, CreatedBefore time.Time
	Limit                       int
	After                       string
}

// ListInstances pages through instances by id. The statement names only
// the filters set, so that its plan walks the primary key or, for a
// definition, instances_definition (0022) in id order, and stops at the
// page's end. A variable's value has no index: its filter is checked on the
// rows walked.
func (s *Store) ListInstances(ctx context.Context, f InstanceFilter) ([]adminapi.InstanceSummary, error) {
	const openIncident = `EXISTS (SELECT 1 FROM incidents x WHERE x.instance_id = i.id AND x.resolved_at IS NULL)`
	where := []string{"i.version > 0", "i.id > $1"}
	args := []any{f.After}
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Definition != "" {
		add("i.definition_key = $%d", f.Definition)
	}
	if f.Version != 0 {
		add("i.definition_version = $%d", f.Version)
	}
	if f.Status != "" {
		add("i.status = $%d", f.Status)
	}
	if f.HasIncident != nil {
		add("$%d = "+openIncident, *f.HasIncident)
	}
	if f.Variable != "" {
		add("i.variables -> $%d", f.Variable)
		args = append(args, string(f.Value))
		where[len(where)-1] += fmt.Sprintf(" = $%d::jsonb", len(args))
	}
	if !f.CreatedAfter.IsZero() {
		add("i.created_at >= $%d", f.CreatedAfter)
	}
	if !f.CreatedBefore.IsZero() {
		add("i.created_at < $%d", f.CreatedBefore)
	}
	args = append(args, f.Limit)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`
		SELECT i.id, i.definition_key, i.definition_version, i.status, i.version, %s, i.created_at, i.updated_at
		  FROM instances i
		 WHERE %s
		 ORDER BY i.id LIMIT $%d`, openIncident, strings.Join(where, " AND "), len(args)), args...)
	if err != nil {
		return nil, translate(err, "listing instances")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (adminapi.InstanceSummary, error) {
		var v adminapi.InstanceSummary
		return v, r.Scan(&v.ID, &v.Definition.Key, &v.Definition.Version, &v.Status, &v.Version, &v.HasIncident, &v.CreatedAt, &v.UpdatedAt)
	})
	return out, translate(err, "listing instances")
}

// ElementStatistics counts, for each element of definition key@version, the
// tokens of its active instances there and the open incidents raised there
// (the console's diagram overlay). It reads the active instances of that
// version alone (instances_active_definition, 0022), not every instance.
func (s *Store) ElementStatistics(ctx context.Context, key string, version int) ([]adminapi.ElementStatistics, error) {
	rows, err := s.pool.Query(ctx, `
		WITH t AS (
			SELECT tok->>'el' AS element, count(*) AS active
			  FROM instances i CROSS JOIN LATERAL jsonb_array_elements(i.tokens->'tokens') tok
			 WHERE i.definition_key = $1 AND i.definition_version = $2 AND i.status = 'active' AND i.version > 0
			 GROUP BY 1),
		x AS (
			SELECT x.element_id AS element, count(*) AS incidents
			  FROM incidents x JOIN instances i ON i.id = x.instance_id
			 WHERE x.resolved_at IS NULL AND i.definition_key = $1 AND i.definition_version = $2
			 GROUP BY 1)
		SELECT coalesce(t.element, x.element), coalesce(t.active, 0), coalesce(x.incidents, 0)
		  FROM t FULL JOIN x ON x.element = t.element
		 ORDER BY 1`, key, version)
	if err != nil {
		return nil, translate(err, "counting tokens by element")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (adminapi.ElementStatistics, error) {
		var v adminapi.ElementStatistics
		return v, r.Scan(&v.Element, &v.Active, &v.Incidents)
	})
	return out, translate(err, "counting tokens by element")
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
