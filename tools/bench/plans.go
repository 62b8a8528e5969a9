package bench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/store"
)

// Statement is one statement of the hot path, as the store sends it (or, for
// a PL/pgSQL function's body, as the function runs it, with the function's
// parameters as $n). Setup runs first in the same transaction (a planner
// setting the store sets with the statement). Uses, when set, is an index
// the plan must use (a statement by primary key that wanders to another
// index scans all of it). Known, when set, says why a fault of this
// statement's plan on grown tables is known and not yet fixed, and
// KnownEmpty the same of its plan on tables not analyzed since they were
// nearly empty (a plan a connection keeps until an ANALYZE invalidates it:
// with autovacuum off, forever): the test logs those instead of failing.
type Statement struct {
	Name, SQL, Setup, Uses, Known, KnownEmpty string
}

// HotStatements are the statements a step, a relay, the timer poller, the
// outbox publisher, the sweeper and a task fetch send: each must find its rows through an
// index whatever the tables hold. An entry without SQL is the store's own
// statement of that name (store.HotStatements), so the plans are those of the
// SQL the worker sends; the bodies of PL/pgSQL functions are written out, with
// the migration they come from named beside them.
var HotStatements = fromStore([]Statement{
	{Name: "claim", Uses: "instances_pkey"},
	{Name: "claim_or_create"},
	{Name: "inbox_applied"},
	{Name: "claim_batch", Uses: "instances_pkey"},
	{Name: "commit_batch", Uses: "instances_pkey"},
	// The release deletes the claims row, as sutra_commit does after its
	// UPDATE; claims holds the claims held only, a table of a few pages.
	{Name: "release"},
	// sutra_commit's UPDATE (migration 0026).
	{Name: "commit_instance", Uses: "instances_pkey", SQL: `UPDATE instances
   SET status = $3, variables = $4::jsonb, tokens = $5::jsonb,
       version = version + 1, updated_at = now()
 WHERE id = $1 AND version = $2`},
	{Name: "close_subscriptions"},
	{Name: "close_timers"},
	{Name: "close_tasks"},
	{Name: "open_subscriptions"},
	{Name: "close_signals"},
	{Name: "open_signals"},
	{Name: "arm_timers"},
	{Name: "inbox_insert"},
	{Name: "buffered_match_keys"},
	{Name: "buffered_match"},
	// sutra_resolve_or_buffer's look-up (migration 0002).
	{Name: "resolve_subscription", SQL: `SELECT s.instance_id FROM subscriptions s
	 WHERE s.message_name = $1 AND s.correlation_key = $2 ORDER BY s.created_at LIMIT 1`},
	{Name: "timers_take_due"},
	{Name: "timers_next_due"},
	{Name: "outbox_insert"},
	{Name: "outbox_insert_relay"},
	{Name: "outbox_lease", Uses: "outbox_unpublished"},
	{Name: "outbox_published", KnownEmpty: "id = ANY ($2) on a table of a few pages is a sequential scan"},
	{Name: "outbox_trim", KnownEmpty: tiny},
	{Name: "sweep_claims", KnownEmpty: tiny},
	{Name: "history_insert"},
	{Name: "fetch_and_lock", Uses: "tasks_fetchable_oldest"},
	{Name: "fetch_by_priority", Uses: "tasks_fetchable"},
})

// fromStore fills each statement that has no SQL with the store's statement
// of its name and the planner setting the store sends before it.
func fromStore(ss []Statement) []Statement {
	hot := store.HotStatements()
	for i, s := range ss {
		if s.SQL != "" {
			continue
		}
		h, ok := hot[s.Name]
		if !ok {
			panic("bench: the store has no hot statement " + s.Name)
		}
		ss[i].SQL, ss[i].Setup = h.SQL, h.Setup
	}
	return ss
}

// tiny is why a sweeper statement reads a table of a few pages whole: it is
// the cheapest plan there, and the next ANALYZE (autovacuum's) replans it.
const tiny = "on a table of a few pages a sequential scan is the cheapest plan; the next ANALYZE replans it"

// WatchedTables are the tables no hot statement may read sequentially.
var WatchedTables = []string{"instances", "subscriptions", "timers", "tasks", "inbox", "outbox", "step_history"}

var param = regexp.MustCompile(`\$([0-9]+)`)

// Explain is the generic plan of s in the session of conn: the plan a
// prepared statement keeps once PostgreSQL stops planning it per call
// (plan_cache_mode auto switches after five executions), which is the plan
// that stayed a sequential scan when it was first made on an empty table.
// PostgreSQL 15 has no EXPLAIN (GENERIC_PLAN): the statement is prepared
// with every parameter's type inferred, and explained under
// force_generic_plan with NULL arguments, which a generic plan never looks at.
func Explain(ctx context.Context, conn *pgx.Conn, s Statement) (string, error) {
	n := 0
	for _, m := range param.FindAllStringSubmatch(s.SQL, -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	args := strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
	var plan []string
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if s.Setup != "" {
			if _, err := tx.Exec(ctx, s.Setup); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "PREPARE sutra_explained AS "+s.SQL); err != nil {
			return err
		}
		call := "EXECUTE sutra_explained"
		if n > 0 {
			call += "(" + args + ")"
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+call)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "DEALLOCATE sutra_explained")
		return err
	})
	if err != nil {
		// A failed transaction leaves the prepared statement behind.
		_, _ = conn.Exec(ctx, "DEALLOCATE ALL")
		return "", fmt.Errorf("explaining %s: %w", s.Name, err)
	}
	return strings.Join(plan, "\n"), nil
}

// Faults are what is wrong with s's plan: watched tables read sequentially,
// and the index it should use and does not.
func (s Statement) Faults(plan string) []string {
	var out []string
	for _, t := range SeqScans(plan) {
		out = append(out, "reads "+t+" sequentially")
	}
	if s.Uses != "" && !regexp.MustCompile(`using `+regexp.QuoteMeta(s.Uses)+`\b`).MatchString(plan) {
		out = append(out, "does not use "+s.Uses)
	}
	return out
}

// SeqScans are the watched tables a plan reads sequentially.
func SeqScans(plan string) []string {
	var out []string
	for _, t := range WatchedTables {
		if regexp.MustCompile(`Seq Scan on ` + t + `\b`).MatchString(plan) {
			out = append(out, t)
		}
	}
	return out
}
