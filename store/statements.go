package store

// The statements of the hot path that are sent from more than one place or
// that the plan checks read (HotStatements); the others stand beside the
// one function that sends them.

const appliedSQL = `SELECT EXISTS (SELECT 1 FROM inbox WHERE message_id = $1)`

const releaseSQL = `DELETE FROM claims WHERE instance_id = $1 AND owner = $2`

// inboxInsertSQL records the relays the steps applied: $1 their message
// ids, $2 their instances. Each row goes into the partition of the day
// sutra_inbox_day says (yesterday's when a copy is there, so that the
// insert fails on its key: isInboxDuplicate); received_at and day take
// their defaults.
const inboxInsertSQL = `INSERT INTO inbox_days (message_id, instance_id, day)
	SELECT m, i, sutra_inbox_day(m) FROM unnest($1::text[], $2::text[]) AS r(m, i)`

// skipOutboxRelaySQL marks the outbox relay row $1, which the step applying
// it records in the inbox, published without sending it: sent, it would be
// acked as a duplicate. A row a publisher leased is left to it (it may be on
// its way), and so is a row another transaction locks (SKIP LOCKED: the step
// never waits on a publisher).
const skipOutboxRelaySQL = `WITH r AS (
	SELECT id FROM outbox WHERE id = $1 AND target = 'relay' AND published_at IS NULL AND locked_by IS NULL
	   FOR UPDATE SKIP LOCKED)
UPDATE outbox o SET published_at = now() FROM r WHERE o.id = r.id`

// closeWaitsSQL deletes the steps' closed waits from table (subscriptions,
// timers or tasks): $1, $2 and $3 the instances, tokens and elements (an
// empty element closes every wait of the token).
func closeWaitsSQL(table string) string {
	return `DELETE FROM ` + table + ` t USING unnest($1::text[], $2::text[], $3::text[]) AS w(id, tok, el)
	WHERE t.instance_id = w.id AND t.token_id = w.tok AND (w.el = '' OR t.element_id = w.el)`
}

const openSubscriptionsSQL = `INSERT INTO subscriptions (instance_id, token_id, element_id, message_name, correlation_key)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])`

// openSignalsSQL opens signal subscriptions. A wait re-opened in the same
// commit (a closed and re-armed boundary event) keeps no old row: closes run
// first.
const openSignalsSQL = `INSERT INTO signal_subscriptions (instance_id, token_id, element_id, signal_name)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`

const armTimersSQL = `INSERT INTO timers (instance_id, token_id, element_id, due_at, repeat, interval)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::int[], $6::text[])
	ON CONFLICT (instance_id, token_id, element_id) DO UPDATE
	   SET due_at = EXCLUDED.due_at, repeat = EXCLUDED.repeat, interval = EXCLUDED.interval,
	       attempts = 0, failures = 0, incident_id = NULL, locked_by = NULL, locked_until = NULL`

const outboxPublishedSQL = `UPDATE outbox SET published_at = now(), locked_by = NULL, locked_until = NULL
	WHERE id = ANY($2) AND locked_by = $1`

const trimOutboxSQL = `DELETE FROM outbox WHERE id = ANY (ARRAY(
	SELECT id FROM outbox WHERE published_at < now() - $1::interval LIMIT $2))`

// sweepClaimsSQL clears up to $2 claims older than $1 (SweepClaims), on
// claims_claimed_at. It locks the instance rows with the claims rows and
// skips those another transaction holds (a claim or a commit in flight), so
// it never waits, nor breaks the order instance row, then claims row.
const sweepClaimsSQL = `WITH stale AS (
	SELECT c.instance_id AS id, c.owner, c.claimed_at, i.version
	  FROM claims c JOIN instances i ON i.id = c.instance_id
	 WHERE c.claimed_at < now() - $1::interval
	 ORDER BY c.claimed_at LIMIT $2
	 FOR UPDATE OF i, c SKIP LOCKED
), cleared AS (
	DELETE FROM claims WHERE instance_id = ANY (ARRAY(SELECT id FROM stale))
	RETURNING instance_id
), dropped AS (
	DELETE FROM instances WHERE id = ANY (ARRAY(SELECT id FROM stale WHERE version = 0))
	RETURNING id
)
SELECT id, owner, now() - claimed_at FROM stale`

// HotStatement is one statement of the hot path as the store sends it, and
// the planner setting it sends before it in the same transaction.
type HotStatement struct {
	SQL, Setup string
}

// HotStatements are the statements every step, relay, timer poll, outbox
// lease, sweep and task fetch sends, by name, exactly as the store sends them: the plan
// checks (bench.HotStatements, make bench-plans) explain these, not copies.
func HotStatements() map[string]HotStatement {
	return map[string]HotStatement{
		"claim":               {SQL: claimSQL},
		"claim_or_create":     {SQL: claimOrCreateSQL},
		"inbox_applied":       {SQL: appliedSQL},
		"claim_batch":         {SQL: claimBatchSQL, Setup: byPrimaryKey},
		"commit_batch":        {SQL: groupFenceSQL, Setup: commitPlans},
		"release":             {SQL: releaseSQL},
		"close_subscriptions": {SQL: closeWaitsSQL("subscriptions"), Setup: commitPlans},
		"close_timers":        {SQL: closeWaitsSQL("timers"), Setup: commitPlans},
		"close_tasks":         {SQL: closeWaitsSQL("tasks"), Setup: commitPlans},
		"open_subscriptions":  {SQL: openSubscriptionsSQL, Setup: commitPlans},
		"close_signals":       {SQL: closeWaitsSQL("signal_subscriptions"), Setup: commitPlans},
		"open_signals":        {SQL: openSignalsSQL, Setup: commitPlans},
		"arm_timers":          {SQL: armTimersSQL, Setup: commitPlans},
		"inbox_insert":        {SQL: inboxInsertSQL, Setup: commitPlans},
		"buffered_match_keys": {SQL: bufferedLocksSQL, Setup: commitPlans},
		"buffered_match":      {SQL: bufferedLookSQL, Setup: commitPlans},
		"timers_take_due":     {SQL: takeDueSQL},
		"timers_next_due":     {SQL: nextDueSQL},
		"outbox_insert":       {SQL: insertMessageSQL, Setup: commitPlans},
		"outbox_insert_relay": {SQL: insertRelaySQL, Setup: commitPlans},
		"outbox_lease":        {SQL: leaseOutboxSQL, Setup: leaseOrderSQL},
		"outbox_published":    {SQL: outboxPublishedSQL},
		"outbox_trim":         {SQL: trimOutboxSQL},
		"sweep_claims":        {SQL: sweepClaimsSQL},
		"history_insert":      {SQL: historyInsertSQL, Setup: commitPlans},
		"fetch_and_lock":      {SQL: fetchOldestSQL, Setup: fetchSetupSQL},
		"fetch_by_priority":   {SQL: fetchByPrioritySQL, Setup: fetchSetupSQL},
	}
}
