package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// InstanceFilter narrows an instance list; After is the cursor (from the
// previous page's Next). Empty fields do not filter.
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
	// Key keeps the instances started with this business key (the
	// correlation key of the message that started them), by
	// instances_start_key (0035). WaitingAt keeps those with a token at
	// that element. Neither is a batch's filter: a replica of the previous
	// release, which may run a batch, would not know them.
	Key       string `json:"-"`
	WaitingAt string `json:"-"`
	// Sort is the order of the list: SortID (""), SortStart or SortEnd;
	// Desc reverses it (newest first for the times).
	Sort  string `json:"-"`
	Desc  bool   `json:"-"`
	Limit int
	After string
	// Scan is the most instances a page walks to check the filters no
	// index serves (all but Definition and Key, and the creation time
	// under SortStart); required when any is set.
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
	// EndedAt is when it ended, nil while it runs.
	EndedAt *time.Time
}

// The orders of an instance list: by id, by start (creation) time, by end
// time (the instances that ended only). A time order's cursor is the
// time and the id, "<RFC 3339 time>|<id>".
const (
	SortID    = ""
	SortStart = "start"
	SortEnd   = "end"
)

// InstanceCursor reads the cursor of a time order.
func InstanceCursor(after string) (time.Time, string, error) {
	at, id, ok := strings.Cut(after, "|")
	t, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil {
		return t, "", fmt.Errorf("after %q is not a cursor of this order (<RFC 3339 time>|<id>)", after)
	}
	return t, id, nil
}

// InstancePage is one page of an instance list. Next is the cursor of the
// following page, "" on the last: a page whose walk reached the filter's
// Scan ends there, with fewer than Limit instances or none.
type InstancePage struct {
	Instances []InstanceSummary
	Next      string
}

// InstanceCountCap is the most instances CountInstances walks: past it the
// count is an estimate.
const InstanceCountCap = 10_000

// instanceQuery is the walk of an instance list: the conditions its index
// serves and the checks it makes on each instance walked.
type instanceQuery struct {
	walk, checks []string
	args         []any
	sortColumn   string
}

func (q *instanceQuery) arg(v any) string {
	q.args = append(q.args, v)
	return fmt.Sprintf("$%d", len(q.args))
}

func (q *instanceQuery) keep() string {
	if len(q.checks) == 0 {
		return "true"
	}
	return strings.Join(q.checks, " AND ")
}

// instanceWalk builds f's walk and checks, the cursor aside.
func instanceWalk(f InstanceFilter) (*instanceQuery, error) {
	q := &instanceQuery{walk: []string{"i.version > 0"}}
	switch f.Sort {
	case SortID:
		q.sortColumn = "NULL::timestamptz"
	case SortStart:
		q.sortColumn = "i.created_at"
	case SortEnd:
		q.sortColumn = "i.ended_at"
		q.walk = append(q.walk, "i.ended_at IS NOT NULL")
	default:
		return nil, fmt.Errorf("sort %q is not %q or %q", f.Sort, SortStart, SortEnd)
	}
	if f.Definition != "" {
		q.walk = append(q.walk, "i.definition_key = "+q.arg(f.Definition))
	}
	if f.Key != "" {
		q.walk = append(q.walk, "i.start_correlation_key = "+q.arg(f.Key))
	}
	if f.Version != 0 {
		q.checks = append(q.checks, "i.definition_version = "+q.arg(f.Version))
	}
	if f.Status != "" {
		q.checks = append(q.checks, "i.status = "+q.arg(f.Status))
	}
	if f.HasIncident != nil {
		q.checks = append(q.checks, q.arg(*f.HasIncident)+" = "+openIncidentSQL)
	}
	if f.Variable != "" {
		q.checks = append(q.checks, fmt.Sprintf("i.variables -> %s = %s::jsonb", q.arg(f.Variable), q.arg(string(f.Value))))
	}
	if f.WaitingAt != "" {
		q.checks = append(q.checks, fmt.Sprintf("i.tokens -> 'tokens' @> jsonb_build_array(jsonb_build_object('el', %s::text))", q.arg(f.WaitingAt)))
	}
	// Under SortStart the creation time bounds the index's range.
	created := &q.checks
	if f.Sort == SortStart {
		created = &q.walk
	}
	if !f.CreatedAfter.IsZero() {
		*created = append(*created, "i.created_at >= "+q.arg(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		*created = append(*created, "i.created_at < "+q.arg(f.CreatedBefore))
	}
	return q, nil
}

// ListInstances pages through instances in f's order. It walks the
// instances by an index, the primary key (id order), instances_created or
// instances_definition_created (start time), instances_ended (end time),
// instances_definition (a definition in id order, 0022) or
// instances_start_key (a business key, 0035), and stops at the page's end;
// the other filters are checked on the instances walked, at most f.Scan of
// them per page, so that a filter few instances pass costs one bounded walk
// per page, not a scan of the table.
func (s *Store) ListInstances(ctx context.Context, f InstanceFilter) (InstancePage, error) {
	q, err := instanceWalk(f)
	if err != nil {
		return InstancePage{}, err
	}
	dir, back, cmp := "", " DESC", ">"
	if f.Desc {
		dir, back, cmp = " DESC", "", "<"
	}
	switch {
	case f.Sort == SortID:
		if f.After != "" || !f.Desc {
			q.walk = append(q.walk, "i.id "+cmp+" "+q.arg(f.After))
		}
	case f.After != "":
		t, id, err := InstanceCursor(f.After)
		if err != nil {
			return InstancePage{}, err
		}
		q.walk = append(q.walk, fmt.Sprintf("(%s, i.id) %s (%s, %s)", q.sortColumn, cmp, q.arg(t), q.arg(id)))
	}
	order := "i.id" + dir
	if f.Sort != SortID {
		order = q.sortColumn + dir + ", i.id" + dir
	}
	// The walk is the page when nothing is checked on it; otherwise it is
	// f.Scan instances, of which the page keeps the first f.Limit that pass.
	// The last row (id NULL) carries the last instance walked, the cursor
	// of a page the walk ended, and how many were walked.
	walkLimit := f.Limit
	if len(q.checks) > 0 {
		walkLimit = f.Scan
	}
	keep := q.keep()
	// The limits are written into the statement, not passed: a generic
	// plan, blind to them, would sort the whole table by time rather than
	// walk the index for a few rows.
	walkArg, limitArg := strconv.Itoa(walkLimit), strconv.Itoa(f.Limit)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`
		WITH walked AS MATERIALIZED (
			SELECT i.id, %[1]s AS t, (%[2]s) AS keep FROM instances i WHERE %[3]s ORDER BY %[4]s LIMIT %[5]s),
		page AS (SELECT id FROM walked WHERE keep ORDER BY t%[6]s, id%[6]s LIMIT %[7]s),
		last AS (SELECT id, t FROM walked ORDER BY t%[9]s, id%[9]s LIMIT 1)
		SELECT false AS summary, i.id, i.zeebe_key, i.definition_key, i.definition_version, i.status, i.version, %[8]s,
		       i.created_at, i.updated_at, i.ended_at, %[1]s AS t, NULL::bigint
		  FROM page JOIN instances i ON i.id = page.id
		UNION ALL
		SELECT true, (SELECT id FROM last), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, (SELECT t FROM last),
		       (SELECT count(*) FROM walked)
		 ORDER BY summary, t%[6]s, id%[6]s`,
		q.sortColumn, keep, strings.Join(q.walk, " AND "), order, walkArg, dir, limitArg, openIncidentSQL, back), q.args...)
	if err != nil {
		return InstancePage{}, translate(err, "listing instances")
	}
	var page InstancePage
	var last string
	var walked int
	cursor := func(id string, t *time.Time) string {
		if f.Sort == SortID || t == nil {
			return id
		}
		return t.UTC().Format(time.RFC3339Nano) + "|" + id
	}
	for rows.Next() {
		var summary bool
		var id, key, status *string
		var zeebeKey *int64
		var version *int
		var step *int64
		var incident *bool
		var created, updated, ended, t *time.Time
		var n *int
		if err := rows.Scan(&summary, &id, &zeebeKey, &key, &version, &status, &step, &incident, &created, &updated, &ended, &t, &n); err != nil {
			rows.Close()
			return InstancePage{}, translate(err, "listing instances")
		}
		if summary {
			walked = *n
			if id != nil {
				last = cursor(*id, t)
			}
			continue
		}
		page.Instances = append(page.Instances, InstanceSummary{ID: *id, ZeebeKey: *zeebeKey, DefinitionKey: *key, DefinitionVersion: *version,
			Status: *status, Version: *step, HasIncident: *incident, CreatedAt: *created, UpdatedAt: *updated, EndedAt: ended})
		if len(page.Instances) == f.Limit {
			page.Next = cursor(*id, t)
		}
	}
	if err := rows.Err(); err != nil {
		return InstancePage{}, translate(err, "listing instances")
	}
	if len(page.Instances) < f.Limit && walked == walkLimit && last != "" {
		page.Next = last
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

// InstanceCount is how many instances an instance list's filter matches:
// exactly when Exact, else an estimate.
type InstanceCount struct {
	Count int64
	Exact bool
}

// CountInstances counts the instances f matches (its cursor aside; its
// order only in that SortEnd counts the instances that ended) on a walk of at most InstanceCountCap of them, so that no page
// view counts a large table: when the walk ends before the cap the count is
// exact; otherwise it is the planner's estimate of the instances the walk
// would reach (its index's condition) times the share of the walked ones
// that passed the checks.
func (s *Store) CountInstances(ctx context.Context, f InstanceFilter) (InstanceCount, error) {
	q, err := instanceWalk(f)
	if err != nil {
		return InstanceCount{}, err
	}
	where := strings.Join(q.walk, " AND ")
	var walked, kept int64
	err = s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE keep)
		FROM (SELECT (%s) AS keep FROM instances i WHERE %s LIMIT %d) w`, q.keep(), where, InstanceCountCap),
		q.args...).Scan(&walked, &kept)
	if err != nil {
		return InstanceCount{}, translate(err, "counting instances")
	}
	if walked < InstanceCountCap {
		return InstanceCount{Count: kept, Exact: true}, nil
	}
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	var raw []byte
	// The checks ride along, folded away, so that every argument has its
	// place.
	if err := s.pool.QueryRow(ctx, fmt.Sprintf("EXPLAIN (FORMAT JSON) SELECT 1 FROM instances i WHERE %s AND (true OR (%s))", where, q.keep()),
		q.args...).Scan(&raw); err != nil {
		return InstanceCount{}, translate(err, "estimating the instances")
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		return InstanceCount{}, fmt.Errorf("reading the plan's estimate: %v: %s", err, raw)
	}
	reach := max(int64(plan[0].Plan.Rows), walked)
	return InstanceCount{Count: int64(float64(reach) * float64(kept) / float64(walked)), Exact: false}, nil
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
