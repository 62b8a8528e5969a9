package bench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
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

// HotStatements are the statements a step, a relay, the timer poller and the
// outbox publisher run on every pass: each must find its rows through an
// index whatever the tables hold. Add one in one line; the origin of each is
// named beside it, since these are copies (a drift shows as a plan that no
// longer matches the store's statement, not as a failure).
var HotStatements = []Statement{
	// store.Claim (claimSQL, claimOrCreateSQL) and Store.Applied.
	{Name: "claim", Uses: "instances_pkey", SQL: `UPDATE instances i SET owner = $2, claimed_at = now()
 WHERE i.id = $1 AND i.version > 0 AND (i.owner IS NULL OR i.owner = $2 OR i.claimed_at < now() - $3::interval)
	AND NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = $4)
RETURNING i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version`},
	{Name: "claim_or_create", SQL: `INSERT INTO instances AS i (id, definition_key, definition_version, status, owner, claimed_at, start_correlation_key, parent_id)
VALUES ($1, $5, (SELECT max(version) FROM definitions WHERE key = $5 AND ($8::int = 0 OR version = $8::int)), 'active', $2, now(),
	NULLIF($6, ''), NULLIF($7, ''))
ON CONFLICT (id) DO UPDATE SET owner = $2, claimed_at = now()
 WHERE (i.owner IS NULL OR i.owner = $2 OR i.claimed_at < now() - $3::interval)
	AND NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = $4)
RETURNING i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version`},
	{Name: "inbox_applied", SQL: `SELECT EXISTS (SELECT 1 FROM inbox WHERE message_id = $1)`},
	// store.ClaimBatch and CommitBatch (claimBatchSQL, commitBatchSQL): the
	// batch's fence; its writes are the single step's, below.
	{Name: "claim_batch", Uses: "instances_pkey", Setup: noSeqScan, SQL: `WITH r AS (SELECT * FROM unnest($1::text[], $4::text[]) AS r(id, inbox)),
     l AS (SELECT i.id FROM instances i JOIN r ON r.id = i.id ORDER BY i.id FOR UPDATE OF i)
UPDATE instances i SET owner = $2, claimed_at = now()
  FROM r JOIN l ON l.id = r.id
 WHERE i.id = r.id AND i.version > 0
   AND (i.owner IS NULL OR i.owner = $2 OR i.claimed_at < now() - $3::interval)
   AND NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = r.inbox)
RETURNING i.id, i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version`},
	{Name: "commit_batch", Uses: "instances_pkey", Setup: noSeqScan, SQL: `WITH c AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[])
                  AS c(id, owner, version, status, variables, tokens)),
     l AS (SELECT i.id FROM instances i JOIN c ON c.id = i.id ORDER BY i.id FOR UPDATE OF i)
UPDATE instances i
   SET status = c.status, variables = c.variables::jsonb, tokens = c.tokens::jsonb,
       version = i.version + 1, owner = NULL, claimed_at = NULL, updated_at = now()
  FROM c JOIN l ON l.id = c.id
 WHERE i.id = c.id AND i.owner = c.owner AND i.version = c.version
RETURNING i.id`},
	// store.Release.
	{Name: "release", Uses: "instances_pkey", SQL: `UPDATE instances SET owner = NULL, claimed_at = NULL WHERE id = $1 AND owner = $2`,
		Known: byClaimedAt},
	// store.CommitStep: sutra_commit's UPDATE (migration 0004), the effects
	// (queueEffects), the inbox row, and sutra_buffered_match's two
	// statements (migration 0007).
	{Name: "commit_instance", Uses: "instances_pkey", SQL: `UPDATE instances
   SET status = $4, variables = $5::jsonb, tokens = $6::jsonb,
       version = version + 1, owner = NULL, claimed_at = NULL, updated_at = now()
 WHERE id = $1 AND owner = $2 AND version = $3`,
		Known: byClaimedAt},
	{Name: "close_subscriptions", SQL: closeWaits("subscriptions")},
	{Name: "close_timers", SQL: closeWaits("timers")},
	{Name: "close_tasks", SQL: closeWaits("tasks")},
	{Name: "open_subscriptions", SQL: `INSERT INTO subscriptions (instance_id, token_id, element_id, message_name, correlation_key)
	SELECT $1::text, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[])`},
	{Name: "arm_timers", SQL: `INSERT INTO timers (instance_id, token_id, element_id, due_at, repeat, interval)
	SELECT $1::text, * FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::int[], $6::text[])
	ON CONFLICT (instance_id, token_id, element_id) DO UPDATE
	   SET due_at = EXCLUDED.due_at, repeat = EXCLUDED.repeat, interval = EXCLUDED.interval,
	       attempts = 0, locked_by = NULL, locked_until = NULL`},
	{Name: "inbox_insert", SQL: `INSERT INTO inbox (message_id, instance_id) VALUES ($1, $2)`},
	{Name: "buffered_match_keys", SQL: `SELECT DISTINCT hashtext(s.message_name || chr(31) || s.correlation_key) AS h
	  FROM subscriptions s JOIN unnest($2::text[], $3::text[]) AS w(tok, el)
	    ON s.instance_id = $1 AND s.token_id = w.tok AND s.element_id = w.el
	 ORDER BY 1`},
	{Name: "buffered_match", SQL: `SELECT b.id, b.message_id, b.message_name, b.correlation_key, b.variables
	  FROM subscriptions s JOIN unnest($2::text[], $3::text[]) AS w(tok, el)
	         ON s.instance_id = $1 AND s.token_id = w.tok AND s.element_id = w.el
	  JOIN buffered_messages b
	         ON b.message_name = s.message_name AND b.correlation_key = s.correlation_key AND b.expires_at > now()
	        AND b.start_definition IS NULL
	 WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = b.message_id)
	 ORDER BY b.id LIMIT 1`},
	// store.ResolveOrBuffer: sutra_resolve_or_buffer's look-up (migration 0002).
	{Name: "resolve_subscription", SQL: `SELECT s.instance_id FROM subscriptions s
	 WHERE s.message_name = $1 AND s.correlation_key = $2 ORDER BY s.created_at LIMIT 1`},
	// store.TakeDueTimers (takeDueSQL, nextDueSQL).
	{Name: "timers_take_due", SQL: `WITH due AS (
	SELECT id FROM timers
	 WHERE due_at <= now() AND (locked_until IS NULL OR locked_until < now())
	 ORDER BY due_at LIMIT $2
	 FOR UPDATE SKIP LOCKED
)
UPDATE timers t SET locked_by = $1, locked_until = now() + $3::interval
 WHERE t.id = ANY (ARRAY(SELECT id FROM due))
RETURNING t.id, t.instance_id, t.token_id, t.element_id, t.due_at, t.attempts, t.locked_until,
          t.definition_key, t.definition_version, t.fired`},
	{Name: "timers_next_due", SQL: `SELECT EXTRACT(EPOCH FROM due_at - now())::float8 FROM timers
 WHERE locked_until IS NULL OR locked_until < now()
 ORDER BY due_at LIMIT 1`},
	// store.LeaseOutbox (leaseOrderSQL, leaseOutboxSQL), SettleOutbox, TrimOutbox.
	{Name: "outbox_lease", Setup: "SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)",
		SQL: `WITH cand AS (
	SELECT o.id, o.instance_id, o.seq FROM outbox o
	 WHERE o.published_at IS NULL
	   AND (o.locked_until IS NULL OR o.locked_until < now())
	   AND NOT EXISTS (SELECT 1 FROM outbox e
	                    WHERE e.instance_id = o.instance_id AND e.seq < o.seq AND e.published_at IS NULL
	                      AND e.locked_until >= now() OFFSET 0)
	 ORDER BY o.seq LIMIT $2
	 FOR UPDATE SKIP LOCKED
)
UPDATE outbox o SET locked_by = $1, locked_until = now() + $3::interval
  FROM cand c
 WHERE o.id = c.id
   AND NOT EXISTS (SELECT 1 FROM outbox e
                    WHERE e.instance_id = c.instance_id AND e.seq < c.seq AND e.published_at IS NULL
                      AND e.id NOT IN (SELECT id FROM cand) OFFSET 0)
RETURNING o.id, o.seq, o.instance_id, o.element_id, o.target, o.message_name, o.correlation_key,
          o.variables, o.routing_key, o.body, o.attempts, EXTRACT(EPOCH FROM now() - o.created_at)::float8`},
	{Name: "outbox_published", KnownEmpty: "id = ANY ($2) on a table of a few pages is a sequential scan", SQL: `UPDATE outbox SET published_at = now(), locked_by = NULL, locked_until = NULL
	WHERE id = ANY($2::text[]) AND locked_by = $1`},
	{Name: "outbox_trim", KnownEmpty: tiny, SQL: `DELETE FROM outbox WHERE id = ANY (ARRAY(
	SELECT id FROM outbox WHERE published_at < now() - $1::interval LIMIT $2))`},
	// The sweeper: store.SweepClaims and TrimInbox.
	{Name: "sweep_claims", KnownEmpty: tiny, SQL: `WITH stale AS (
	SELECT id, owner, claimed_at, version FROM instances
	 WHERE owner IS NOT NULL AND claimed_at < now() - $1::interval
	 ORDER BY claimed_at LIMIT $2
	 FOR UPDATE SKIP LOCKED
), cleared AS (
	UPDATE instances SET owner = NULL, claimed_at = NULL
	 WHERE id = ANY (ARRAY(SELECT id FROM stale WHERE version > 0))
	RETURNING id
), dropped AS (
	DELETE FROM instances WHERE id = ANY (ARRAY(SELECT id FROM stale WHERE version = 0))
	RETURNING id
)
SELECT id, owner, now() - claimed_at FROM stale`},
	{Name: "inbox_trim", KnownEmpty: tiny, SQL: `DELETE FROM inbox WHERE message_id = ANY (ARRAY(
	SELECT message_id FROM inbox WHERE received_at < now() - $1::interval LIMIT $2))`},
}

// byClaimedAt is why a statement fenced on the owner misses instances_pkey,
// and why that stays: measured in BENCHMARKS.md, "Plans of the hot
// statements".
const byClaimedAt = "owner = $2 implies the predicate of instances_claimed_at, which holds only claimed rows and looks " +
	"empty to the planner: the plan reads that whole partial index and filters on id. Benign as measured: the scans " +
	"mark its dead entries and keep it at a few pages; forcing instances_pkey was no faster and let it grow"

// noSeqScan is the planner setting the batch statements run with
// (store.byPrimaryKey).
const noSeqScan = "SELECT set_config('enable_seqscan', 'off', true)"

// tiny is why a sweeper statement reads a table of a few pages whole: it is
// the cheapest plan there, and the next ANALYZE (autovacuum's) replans it.
const tiny = "on a table of a few pages a sequential scan is the cheapest plan; the next ANALYZE replans it"

// closeWaits is queueEffects' delete of a step's closed waits from table.
func closeWaits(table string) string {
	return `DELETE FROM ` + table + ` t USING unnest($2::text[], $3::text[]) AS w(tok, el)
	WHERE t.instance_id = $1 AND t.token_id = w.tok AND (w.el = '' OR t.element_id = w.el)`
}

// WatchedTables are the tables no hot statement may read sequentially.
var WatchedTables = []string{"instances", "subscriptions", "timers", "tasks", "inbox", "outbox"}

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
