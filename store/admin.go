package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
)

// Reads: what an operator (or a client) reads about definitions,
// instances, incidents and user tasks, in the store's own types; each
// protocol maps them to its wire types. None of them claims anything:
// reading an instance's row while a step holds it shows the last committed
// step.

// DefinitionVersions are the deployed versions of one definition key.
type DefinitionVersions struct {
	Key      string
	Versions []int
	// ZeebeKeys are the versions' keys for Zeebe clients, in the order of
	// Versions.
	ZeebeKeys []int64
	Latest    int
}

// ListDefinitions lists every definition key with its versions.
func (s *Store) ListDefinitions(ctx context.Context) ([]DefinitionVersions, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, array_agg(version ORDER BY version), array_agg(zeebe_key ORDER BY version), max(version)
		FROM definitions GROUP BY key ORDER BY key`)
	if err != nil {
		return nil, translate(err, "listing definitions")
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DefinitionVersions, error) {
		var d DefinitionVersions
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

// InstanceDetail is an instance as its last step committed it (its
// summary), with its variables and tokens, its open waits, its incidents,
// its called instances' open incidents and the claim held on it.
type InstanceDetail struct {
	InstanceSummary
	Variables map[string]any
	Tokens    []ActiveToken
	// Compensable are the completed activities a compensation throw may
	// still undo, the latest completion last.
	Compensable         []engine.Compensable
	Subscriptions       []MessageSubscription
	SignalSubscriptions []SignalSubscription
	Timers              []ArmedTimer
	Tasks               []OpenTask
	Incidents           []Incident
	// CalledIncidents are the open incidents of the instances it called,
	// at any depth (the first MaxCalledIncidents, oldest first).
	CalledIncidents []CalledIncident
	// Claim is the claim held on it, if any.
	Claim    *HeldClaim
	ParentID *string
}

// ActiveToken is one token of an instance.
type ActiveToken struct {
	ID      string
	Element string
	Wait    engine.WaitKind
	Scope   string
	// CalledInstance is the id of the instance a call activity's token
	// waits for (wait child).
	CalledInstance string
}

// MessageSubscription is an open message wait.
type MessageSubscription struct {
	Token, Element, Message, CorrelationKey string
	CreatedAt                               time.Time
}

// SignalSubscription is an open signal wait: a catch, boundary or event
// subprocess start event waiting for a broadcast of its signal.
type SignalSubscription struct {
	Token, Element, Signal string
	CreatedAt              time.Time
}

// ArmedTimer is a timer waiting to fire.
type ArmedTimer struct {
	Token, Element string
	DueAt          time.Time
	Attempts       int
}

// OpenTask is a task (a job, an external or a user task) not yet done;
// its id is its key for Zeebe clients.
type OpenTask struct {
	ID            int64
	Token         string
	Element       string
	Topic         string
	UserTask      bool
	Retries       int
	LockedBy      *string
	LockExpiresAt *time.Time
}

// CalledIncident is an open incident of an instance called, directly or
// not, by the instance read; CalledBy is the element of the read
// instance's call activity it descends from.
type CalledIncident struct {
	Incident
	CalledBy string
}

// MaxCalledIncidents is the most called instances' incidents an instance
// detail holds.
const MaxCalledIncidents = 100

// HeldClaim is a claim held on an instance, and for how long.
type HeldClaim struct {
	Owner string
	Age   time.Duration
}

// Instance reads an instance, its waits, incidents and claim, in one round
// trip. ErrNotFound when it does not exist (or is a start that never
// committed its first step).
func (s *Store) Instance(ctx context.Context, id string) (InstanceDetail, error) {
	d := InstanceDetail{InstanceSummary: InstanceSummary{ID: id}}
	var tokens []byte
	var owner *string
	var age *time.Duration
	b := &pgx.Batch{}
	b.Queue(`SELECT i.zeebe_key, i.definition_key, i.definition_version, i.status, i.version, i.variables, i.tokens, c.owner,
			now() - c.claimed_at, i.parent_id, i.created_at, i.updated_at
		  FROM instances i LEFT JOIN claims c ON c.instance_id = i.id WHERE i.id = $1 AND i.version > 0`, id).QueryRow(func(r pgx.Row) error {
		return r.Scan(&d.ZeebeKey, &d.DefinitionKey, &d.DefinitionVersion, &d.Status, &d.Version, &d.Variables, &tokens, &owner, &age,
			&d.ParentID, &d.CreatedAt, &d.UpdatedAt)
	})
	b.Queue(`SELECT token_id, element_id, message_name, correlation_key, created_at FROM subscriptions WHERE instance_id = $1 ORDER BY created_at`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Subscriptions, err = pgx.AppendRows(d.Subscriptions, rows, func(r pgx.CollectableRow) (MessageSubscription, error) {
				var v MessageSubscription
				return v, r.Scan(&v.Token, &v.Element, &v.Message, &v.CorrelationKey, &v.CreatedAt)
			})
			return err
		})
	b.Queue(`SELECT token_id, element_id, signal_name, created_at FROM signal_subscriptions WHERE instance_id = $1 ORDER BY id`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.SignalSubscriptions, err = pgx.AppendRows(d.SignalSubscriptions, rows, func(r pgx.CollectableRow) (SignalSubscription, error) {
				var v SignalSubscription
				return v, r.Scan(&v.Token, &v.Element, &v.Signal, &v.CreatedAt)
			})
			return err
		})
	b.Queue(`SELECT token_id, element_id, due_at, attempts FROM timers WHERE instance_id = $1 ORDER BY due_at`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Timers, err = pgx.AppendRows(d.Timers, rows, func(r pgx.CollectableRow) (ArmedTimer, error) {
				var v ArmedTimer
				return v, r.Scan(&v.Token, &v.Element, &v.DueAt, &v.Attempts)
			})
			return err
		})
	b.Queue(`SELECT id, token_id, element_id, type, user_task, retries, locked_by, lock_expires_at FROM tasks WHERE instance_id = $1 ORDER BY id`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			d.Tasks, err = pgx.AppendRows(d.Tasks, rows, func(r pgx.CollectableRow) (OpenTask, error) {
				var v OpenTask
				return v, r.Scan(&v.ID, &v.Token, &v.Element, &v.Topic, &v.UserTask, &v.Retries, &v.LockedBy, &v.LockExpiresAt)
			})
			return err
		})
	b.Queue(incidentSelect+` WHERE x.instance_id = $1 ORDER BY x.id`, id).Query(func(rows pgx.Rows) error {
		var err error
		d.Incidents, err = pgx.AppendRows(d.Incidents, rows, scanIncident)
		return err
	})
	// The called instances' incidents, at any depth (by instances_parent,
	// 0007), each with the token of this instance whose call it descends
	// from (a child's id is <parent>/<token>).
	var calledBy []string
	b.Queue(`WITH RECURSIVE called(id, token) AS (
			SELECT k.id, substr(k.id, length($1) + 2) FROM instances k WHERE k.parent_id = $1
			UNION ALL
			SELECT k.id, c.token FROM called c JOIN instances k ON k.parent_id = c.id)
		SELECT x.id, x.instance_id, x.token_id, x.element_id, x.code, x.message, x.error_message, x.error_details,
		       x.created_at, x.resolved_at, c.token
		  FROM called c JOIN incidents x ON x.instance_id = c.id AND x.resolved_at IS NULL ORDER BY x.id LIMIT $2`, id, MaxCalledIncidents).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c CalledIncident
			var token string
			i := &c.Incident
			if err := rows.Scan(&i.ID, &i.InstanceID, &i.Token, &i.Element, &i.Code, &i.Message, &i.ErrorMessage, &i.ErrorDetails,
				&i.CreatedAt, &i.ResolvedAt, &token); err != nil {
				return err
			}
			d.CalledIncidents = append(d.CalledIncidents, c)
			calledBy = append(calledBy, token)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return d, translate(err, "reading instance "+id)
	}
	var st engine.State
	if err := json.Unmarshal(tokens, &st); err != nil {
		return d, fmt.Errorf("decoding tokens of %s: %w", id, err)
	}
	elementOf := make(map[string]string, len(st.Tokens))
	for _, t := range st.Tokens {
		tok := ActiveToken{ID: t.ID, Element: t.Element, Wait: t.Wait, Scope: t.Scope}
		if t.Wait == engine.WaitChild {
			tok.CalledInstance = id + "/" + t.ID
		}
		d.Tokens = append(d.Tokens, tok)
		elementOf[t.ID] = t.Element
	}
	for n, token := range calledBy {
		d.CalledIncidents[n].CalledBy = elementOf[token]
	}
	d.Compensable = st.Compensable
	if owner != nil {
		d.Claim = &HeldClaim{Owner: *owner}
		if age != nil {
			d.Claim.Age = *age
		}
	}
	d.HasIncident = len(d.CalledIncidents) > 0
	for _, i := range d.Incidents {
		d.HasIncident = d.HasIncident || i.ResolvedAt == nil
	}
	if d.Variables == nil {
		d.Variables = map[string]any{}
	}
	return d, nil
}

// incidentSelect reads incidents (x) with their instance's definition.
const incidentSelect = `SELECT x.id, x.instance_id, x.token_id, x.element_id, x.code, x.message, x.error_message, x.error_details,
		x.created_at, x.resolved_at, i.definition_key, i.definition_version
	  FROM incidents x LEFT JOIN instances i ON i.id = x.instance_id`

// openIncidentSQL is true when instance i, or an instance it called at any
// depth, has an open incident: a parent waiting on a stuck child is stuck.
const openIncidentSQL = `EXISTS (
	WITH RECURSIVE self(id) AS (SELECT i.id UNION ALL SELECT k.id FROM self s JOIN instances k ON k.parent_id = s.id)
	SELECT 1 FROM self JOIN incidents x ON x.instance_id = self.id AND x.resolved_at IS NULL)`

// Incident is one incident: an element that stopped its instance's token
// until it is retried. Its id is drawn from sutra_keys: it is its Zeebe key
// too.
type Incident struct {
	ID         int64
	InstanceID string
	Token      string
	Element    string
	Code       string
	Message    string
	// ErrorMessage and ErrorDetails are what the worker of a task that
	// failed to zero retries reported (migration 0033).
	ErrorMessage, ErrorDetails *string
	CreatedAt                  time.Time
	ResolvedAt                 *time.Time
	// DefinitionKey and DefinitionVersion are its instance's process (nil
	// when the instance is gone).
	DefinitionKey     *string
	DefinitionVersion *int
}

func scanIncident(r pgx.CollectableRow) (Incident, error) {
	var i Incident
	err := r.Scan(&i.ID, &i.InstanceID, &i.Token, &i.Element, &i.Code, &i.Message, &i.ErrorMessage, &i.ErrorDetails,
		&i.CreatedAt, &i.ResolvedAt, &i.DefinitionKey, &i.DefinitionVersion)
	return i, err
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
	// Scan is the most instances a page walks to check the filters no
	// index serves (all but Definition); required when any is set.
	Scan int
}

// InstanceSummary is an instance as an instance list shows it.
type InstanceSummary struct {
	ID string
	// ZeebeKey is the instance's key for Zeebe clients.
	ZeebeKey          int64
	DefinitionKey     string
	DefinitionVersion int
	Status            string
	// Version is the step counter of its last step.
	Version int64
	// HasIncident is true when it, or an instance it called at any depth,
	// has an open incident.
	HasIncident bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// InstancePage is one page of an instance list. Next is the cursor of the
// following page, "" on the last: a page whose walk reached the filter's
// Scan ends there, with fewer than Limit instances or none.
type InstancePage struct {
	Instances []InstanceSummary
	Next      string
}

// ListInstances pages through instances by id. It walks the instances in id
// order, by the primary key or, for a definition, instances_definition
// (0022), and stops at the page's end; the other filters are checked on the
// instances walked, at most f.Scan of them per page, so that a filter few
// instances pass costs one bounded walk per page, not a scan of the table.
func (s *Store) ListInstances(ctx context.Context, f InstanceFilter) (InstancePage, error) {
	walk := []string{"i.version > 0", "i.id > $1"}
	var checks []string
	args := []any{f.After}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Definition != "" {
		walk = append(walk, "i.definition_key = "+arg(f.Definition))
	}
	if f.Version != 0 {
		checks = append(checks, "i.definition_version = "+arg(f.Version))
	}
	if f.Status != "" {
		checks = append(checks, "i.status = "+arg(f.Status))
	}
	if f.HasIncident != nil {
		checks = append(checks, arg(*f.HasIncident)+" = "+openIncidentSQL)
	}
	if f.Variable != "" {
		checks = append(checks, fmt.Sprintf("i.variables -> %s = %s::jsonb", arg(f.Variable), arg(string(f.Value))))
	}
	if !f.CreatedAfter.IsZero() {
		checks = append(checks, "i.created_at >= "+arg(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		checks = append(checks, "i.created_at < "+arg(f.CreatedBefore))
	}
	keep := "true"
	if len(checks) > 0 {
		keep = strings.Join(checks, " AND ")
	}
	// The walk is the page when nothing is checked on it; otherwise it is
	// f.Scan instances, of which the page keeps the first f.Limit that pass.
	// The last row (id NULL) carries the last id walked, the cursor of a
	// page the walk ended.
	walkLimit := f.Limit
	if len(checks) > 0 {
		walkLimit = f.Scan
	}
	walkArg, limitArg := arg(walkLimit), arg(f.Limit)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`
		WITH walked AS MATERIALIZED (
			SELECT i.id, (%s) AS keep FROM instances i WHERE %s ORDER BY i.id LIMIT %s),
		page AS (SELECT id FROM walked WHERE keep ORDER BY id LIMIT %s)
		SELECT i.id, i.zeebe_key, i.definition_key, i.definition_version, i.status, i.version, %s, i.created_at, i.updated_at, NULL, NULL
		  FROM page JOIN instances i ON i.id = page.id
		UNION ALL
		SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, (SELECT max(id) FROM walked), (SELECT count(*) FROM walked)
		 ORDER BY 1`,
		keep, strings.Join(walk, " AND "), walkArg, limitArg, openIncidentSQL), args...)
	if err != nil {
		return InstancePage{}, translate(err, "listing instances")
	}
	var page InstancePage
	var walkedTo *string
	var walked int
	for rows.Next() {
		var id, key, status, last *string
		var zeebeKey *int64
		var version *int
		var step *int64
		var incident *bool
		var created, updated *time.Time
		var n *int
		if err := rows.Scan(&id, &zeebeKey, &key, &version, &status, &step, &incident, &created, &updated, &last, &n); err != nil {
			rows.Close()
			return InstancePage{}, translate(err, "listing instances")
		}
		if id == nil {
			walkedTo, walked = last, *n
			continue
		}
		page.Instances = append(page.Instances, InstanceSummary{ID: *id, ZeebeKey: *zeebeKey, DefinitionKey: *key, DefinitionVersion: *version,
			Status: *status, Version: *step, HasIncident: *incident, CreatedAt: *created, UpdatedAt: *updated})
	}
	if err := rows.Err(); err != nil {
		return InstancePage{}, translate(err, "listing instances")
	}
	switch {
	case len(page.Instances) == f.Limit:
		page.Next = page.Instances[len(page.Instances)-1].ID
	case walked == walkLimit && walkedTo != nil:
		page.Next = *walkedTo
	}
	return page, nil
}

// ElementCount is, for one element of a definition version, the tokens of
// active instances at it and the open incidents raised at it.
type ElementCount struct {
	Element   string
	Active    int64
	Incidents int64
}

// ElementStatistics counts, for each element of definition key@version,
// the tokens of its active instances there and the open incidents raised
// there, or in an instance called there at any depth (the console's
// diagram overlay), over the next limit active
// instances of that version after the cursor after, in id order
// (instances_active_definition, 0022): a client sums the pages. Each
// instance counted is one read of its row, scattered over the table, about
// 0.1 to 0.3 ms each when the table is larger than the cache: pages of a
// few hundred keep a call near 100 ms. walked is
// the number of instances counted; next is the cursor of the following
// page, "" on the last.
func (s *Store) ElementStatistics(ctx context.Context, key string, version int, after string, limit int) (
	elements []ElementCount, walked int, next string, err error) {
	rows, err := s.pool.Query(ctx, `
		WITH RECURSIVE ids AS MATERIALIZED (
			SELECT id FROM instances
			 WHERE definition_key = $1 AND definition_version = $2 AND status = 'active' AND id > $3
			 ORDER BY id LIMIT $4),
		-- One lookup by key per instance of the page: joined plainly, the
		-- planner reads the whole table to join a few thousand rows.
		w AS MATERIALIZED (
			SELECT ids.id, i.tokens FROM ids
			 CROSS JOIN LATERAL (SELECT x.tokens FROM instances x WHERE x.id = ids.id AND x.version > 0 LIMIT 1) i),
		-- The instances they called, at any depth (instances_parent, 0007),
		-- each with the token of the call it descends from.
		called(root, token, id) AS (
			SELECT w.id, substr(k.id, length(w.id) + 2), k.id FROM w JOIN instances k ON k.parent_id = w.id
			UNION ALL
			SELECT c.root, c.token, k.id FROM called c JOIN instances k ON k.parent_id = c.id),
		t AS (
			SELECT tok->>'el' AS element, count(*) AS active
			  FROM w CROSS JOIN LATERAL jsonb_array_elements(w.tokens->'tokens') tok GROUP BY 1),
		-- An incident of a called instance counts on the call activity.
		x AS (
			SELECT element, count(*) AS incidents FROM (
				SELECT x.element_id AS element FROM w JOIN incidents x ON x.instance_id = w.id AND x.resolved_at IS NULL
				UNION ALL
				SELECT tok->>'el' FROM called c JOIN incidents x ON x.instance_id = c.id AND x.resolved_at IS NULL
				  JOIN w ON w.id = c.root CROSS JOIN LATERAL jsonb_array_elements(w.tokens->'tokens') tok
				 WHERE tok->>'id' = c.token) e GROUP BY 1)
		SELECT coalesce(t.element, x.element), coalesce(t.active, 0), coalesce(x.incidents, 0), NULL, NULL
		  FROM t FULL JOIN x ON x.element = t.element
		UNION ALL
		SELECT NULL, 0, 0, (SELECT max(id) FROM ids), (SELECT count(*) FROM ids)
		 ORDER BY 1`, key, version, after, limit)
	if err != nil {
		return nil, 0, "", translate(err, "counting tokens by element")
	}
	elements = []ElementCount{}
	var last *string
	for rows.Next() {
		var element, lastID *string
		var e ElementCount
		var n *int
		if err := rows.Scan(&element, &e.Active, &e.Incidents, &lastID, &n); err != nil {
			rows.Close()
			return nil, 0, "", translate(err, "counting tokens by element")
		}
		if element == nil {
			last, walked = lastID, *n
			continue
		}
		e.Element = *element
		elements = append(elements, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, "", translate(err, "counting tokens by element")
	}
	if walked == limit && last != nil {
		next = *last
	}
	return elements, walked, next, nil
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
		 WHERE x.id > $1 AND ($2 = '' OR x.instance_id = $2)
		   AND ($3::boolean IS NULL OR $3 = (x.resolved_at IS NULL))
		 ORDER BY x.id LIMIT $4`, f.After, f.InstanceID, f.Open, f.Limit)
	if err != nil {
		return nil, translate(err, "listing incidents")
	}
	out, err := pgx.CollectRows(rows, scanIncident)
	return out, translate(err, "listing incidents")
}

// IncidentByID reads one incident. ErrNotFound when there is none.
func (s *Store) IncidentByID(ctx context.Context, id int64) (Incident, error) {
	rows, err := s.pool.Query(ctx, incidentSelect+` WHERE x.id = $1`, id)
	if err != nil {
		return Incident{}, translate(err, "reading incident")
	}
	inc, err := pgx.CollectExactlyOneRow(rows, scanIncident)
	return inc, translate(err, fmt.Sprintf("reading incident %d", id))
}

// ReadInstance reads instance id's state as its last step committed it,
// without claiming it: for checks that write nothing (a migration's
// preflight). fault.NotFound when it does not exist.
func (s *Store) ReadInstance(ctx context.Context, id string) (Instance, error) {
	inst := Instance{ID: id}
	var status string
	var tokens []byte
	err := s.pool.QueryRow(ctx, `SELECT definition_key, definition_version, status, variables, tokens, version
		FROM instances WHERE id = $1 AND version > 0`, id).
		Scan(&inst.DefinitionKey, &inst.DefinitionVersion, &status, &inst.State.Variables, &tokens, &inst.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return inst, fault.New(fault.NotFound, "instance %s does not exist", id)
	}
	if err != nil {
		return inst, translate(err, "reading instance "+id)
	}
	inst.State.Status = engine.Status(status)
	if err := json.Unmarshal(tokens, &inst.State); err != nil {
		return inst, fmt.Errorf("decoding tokens of %s: %w", id, err)
	}
	return inst, nil
}
