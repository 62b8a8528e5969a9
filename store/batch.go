package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/startstop"
)

// Batches: several steps per round trip and per WAL flush. A lane with
// several relays queued claims their instances in one statement and commits
// their steps in one transaction, each step still fenced on its own owner and
// version. Only plain relays to known instances go this way; everything else
// (starts, timer fires, admin operations) keeps the one-step statements.

// ErrNotWritten reports a step of a batch that the batch did not commit
// because another step's writes failed (a copy of a relay committed first,
// …): nothing was written and its claim is still
// held; commit it on its own (WriteStep) to learn its outcome.
var ErrNotWritten = errors.New("store: step left out of its batch commit; commit it on its own")

// ClaimBatchRequest claims several instances, each for its own owner (the
// lanes of a replica claim together).
type ClaimBatchRequest struct {
	Timeout time.Duration
	// InstanceIDs are distinct; Owners[i] claims InstanceIDs[i], and
	// InboxIDs[i] is the relay message id of InstanceIDs[i] (its claim is
	// refused if that relay was applied).
	InstanceIDs []string
	Owners      []string
	InboxIDs    []string
}

// Claimed is the result of one instance of a batch claim.
type Claimed struct {
	Instance Instance
	// OK says the claim was taken. When it was not, nothing tells why:
	// claim that instance on its own (Claim) to learn it. When it was taken
	// but Err is set, the row cannot be stepped as it is and the claim is
	// held: release it.
	OK  bool
	Err error
}

// The batch claim locks the instance rows in id order, so that two batches
// claiming overlapping sets (two replicas, or a mis-routed relay) never
// deadlock, then takes their claims (takeClaim) and returns the rows claimed.
var claimBatchSQL = `
WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $4::text[]) AS r(id, owner, inbox)),
     i AS (SELECT i.id, i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version, r.owner
             FROM instances i JOIN r ON r.id = i.id
            WHERE i.version > 0 AND NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = r.inbox)
            ORDER BY i.id FOR NO KEY UPDATE OF i),
     c AS (` + takeClaim("SELECT id, owner, now() FROM i") + `)
SELECT i.id, i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version
  FROM i JOIN c ON c.instance_id = i.id`

// byPrimaryKey keeps the batch statements on instances_pkey. Their join of
// a parameter array with instances is planned once per connection (pgx
// prepares it); planned while the table was small or never analyzed, it
// would read the whole table on every batch ever after (tools/bench/plans/new).
const byPrimaryKey = "SELECT " + byKeySetting

// ClaimBatch takes the claims of several instances with one conditional
// statement (the conditions of Claim: free, stale or ours, relay not yet
// applied) and loads the rows claimed. The result is aligned with
// r.InstanceIDs. An error leaves it unknown which claims were taken: the
// caller must treat every one as maybe held and release it.
func (s *Store) ClaimBatch(ctx context.Context, r ClaimBatchRequest) ([]Claimed, error) {
	out := make([]Claimed, len(r.InstanceIDs))
	at := make(map[string]int, len(r.InstanceIDs))
	for i, id := range r.InstanceIDs {
		at[id] = i
		out[i].Instance.ID = id
	}
	b := &pgx.Batch{}
	if !s.syncClaims {
		b.Queue(asyncCommit)
	}
	b.Queue(byPrimaryKey)
	b.Queue(claimBatchSQL, r.InstanceIDs, r.Owners, r.Timeout, r.InboxIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var inst Instance
			var status string
			var tokens []byte
			if err := rows.Scan(&inst.ID, &inst.DefinitionKey, &inst.DefinitionVersion, &status, &inst.State.Variables, &tokens, &inst.Version); err != nil {
				return err
			}
			i, ok := at[inst.ID]
			if !ok {
				return fmt.Errorf("batch claim returned instance %s that it was not asked for", inst.ID)
			}
			inst.State.Status = engine.Status(status)
			c := Claimed{Instance: inst, OK: true}
			if err := json.Unmarshal(tokens, &c.Instance.State); err != nil {
				c.Err = fmt.Errorf("decoding tokens of %s: %w", inst.ID, err)
			}
			out[i] = c
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return out, translate(err, fmt.Sprintf("claiming %d instances", len(r.InstanceIDs)))
	}
	return out, nil
}

// groupFenceSQL is the fence of a group: the UPDATE of every step of the
// group whose claim is still its own (the instance at the version read at
// claim time, locked in id order like the group claim, and its claims row
// this owner's, deleted: the release), which moves the counter past every
// resume the step commits (a chain's too). It returns the ids that matched;
// the others are left out of the writes that follow.
const groupFenceSQL = `
WITH c AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[])
                  AS c(id, owner, version, status, variables, tokens, steps)),
     l AS (SELECT i.id FROM instances i JOIN c ON c.id = i.id AND i.version = c.version ORDER BY i.id FOR NO KEY UPDATE OF i),
     k AS (DELETE FROM claims k USING c, l WHERE k.instance_id = l.id AND c.id = l.id AND k.owner = c.owner
           RETURNING k.instance_id)
UPDATE instances i
   SET status = c.status, variables = c.variables::jsonb, tokens = c.tokens::jsonb,
       version = i.version + c.steps, updated_at = now()
  FROM c JOIN k ON k.instance_id = c.id
 WHERE i.id = c.id AND i.version = c.version
RETURNING i.id`

// WriteGroup commits several steps (of distinct instances, each maybe a
// chain of resumes: StepWrites.Earlier) in one
// transaction that waits for one WAL flush, in two round trips: the fence of
// every step, which returns the steps that passed, then their writes and the
// commit. (One round trip, fence and writes pipelined, needs a second path
// for a group that lost a claim; this one is the only path.)
// The result is aligned with cs: nil, committed and released;
// an error with fault.StepFenced, that step's claim was swept or stolen and
// it did not happen, while the others committed; ErrNotWritten, nothing
// was written for that step (another step's writes failed) and its claim is
// still held; *BufferedMatch, a buffered message matches a subscription that
// step opened: nothing was written for it, its claim is still held, and the
// others were written as a group without it; fault.StepTooLarge, that step
// is past the store's limits and was left out before anything was sent, its
// claim still held. An error
// returned for all of cs leaves each outcome unknown, as a failed WriteStep
// does.
func (s *Store) WriteGroup(ctx context.Context, cs []StepWrites) []error {
	errs := make([]error, len(cs))
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	n := len(cs)
	ids, owners, statuses, vars, tokens := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, counts := make([]int64, n), make([]int64, n)
	tooLarge := false
	for i, c := range cs {
		docs, err := s.encodeStep(c)
		switch {
		case fault.Code(err) == fault.StepTooLarge:
			errs[i], tooLarge = err, true
			continue
		case err != nil:
			return fail(err)
		}
		ids[i], owners[i], versions[i], statuses[i], vars[i], tokens[i] = c.InstanceID, c.Owner, c.Version, string(c.State.Status), string(docs.vars), string(docs.tokens)
		counts[i] = int64(1 + len(c.Earlier))
	}
	if tooLarge {
		return s.writeGroupWithout(ctx, cs, errs)
	}
	what := fmt.Sprintf("committing %d steps", n)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fail(translate(err, what))
	}
	// A connection left inside the transaction (a failed ROLLBACK) is
	// destroyed by the pool on release, never reused.
	defer conn.Release()
	// committed tells the outbox publisher of w once the transaction
	// committed.
	var w *outboxWrites
	committed := func() []error {
		conn.Release()
		s.notifyOutbox(w)
		return errs
	}

	// Round trip 1: open the transaction (durable: it waits for the WAL
	// flush, like WriteStep) and fence every step, learning which passed.
	matched := make(map[string]bool, n)
	b := &pgx.Batch{}
	queueBegin(b)
	b.Queue(groupFenceSQL, ids, owners, versions, statuses, vars, tokens, counts).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			matched[id] = true
		}
		return rows.Err()
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		rollback(ctx, conn)
		return fail(translate(err, what))
	}

	// Round trip 2: the writes of the steps that passed the fence, then COMMIT.
	var passed []StepWrites
	for i, c := range cs {
		if !matched[c.InstanceID] {
			errs[i] = fault.New(fault.StepFenced, "instance %s is not claimed by %s at version %d", c.InstanceID, c.Owner, c.Version)
			continue
		}
		passed = append(passed, c)
	}
	b = &pgx.Batch{}
	w = s.outboxWrites()
	if err := s.queueStepWrites(b, w, passed...); err != nil {
		rollback(ctx, conn)
		return fail(err)
	}
	b.Queue("COMMIT")
	if err = conn.SendBatch(ctx, b).Close(); err == nil {
		return committed()
	}
	rollback(ctx, conn)
	if id, ok := matchedRow(err); ok {
		conn.Release() // writing the rest takes a connection of its own
		return s.writeGroupAround(ctx, cs, errs, id)
	}
	return stepsFailed(errs, cs, matched, err, what)
}

// writeGroupAround answers a group whose look raised a match with buffered
// row id: the steps that open a subscription it matches get the match, to
// apply it and be written on their own, and the others are written as a
// group again, so that one match does not cost the group its transaction.
// A row gone meanwhile (or matching no step) leaves every step to be written
// on its own.
func (s *Store) writeGroupAround(ctx context.Context, cs []StepWrites, errs []error, id int64) []error {
	m, err := s.bufferedRow(ctx, id)
	if err != nil && !errors.Is(err, ErrBufferedGone) {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	matched := false
	for i, c := range cs {
		if errs[i] == nil && m != nil && m.opens(c) {
			errs[i], matched = m, true
		}
	}
	if !matched {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = ErrNotWritten
			}
		}
		return errs
	}
	return s.writeGroupWithout(ctx, cs, errs)
}

// writeGroupWithout commits the steps of cs that have no error in errs (the
// others were refused as too large, or matched a buffered message) as a batch of their own; the steps
// encode again, on this rare path only.
func (s *Store) writeGroupWithout(ctx context.Context, cs []StepWrites, errs []error) []error {
	var rest []StepWrites
	var at []int
	for i, c := range cs {
		if errs[i] == nil {
			rest, at = append(rest, c), append(at, i)
		}
	}
	if len(rest) > 0 {
		for k, err := range s.WriteGroup(ctx, rest) {
			errs[at[k]] = err
		}
	}
	return errs
}

// queueBegin opens a batch commit's transaction: durable whatever the
// session's setting, and on the plans of every commit (commitPlans).
func queueBegin(b *pgx.Batch) {
	b.Queue("BEGIN")
	b.Queue(commitPlans + ", set_config('synchronous_commit', 'on', true)")
}

// stepsFailed sets the errors of a batch commit that failed after its fence,
// for the steps that passed it (every step when matched is nil): a step's
// own writes failing leaves the others not committed, to commit on their
// own; any other error leaves each outcome unknown.
func stepsFailed(errs []error, cs []StepWrites, matched map[string]bool, err error, what string) []error {
	for i, c := range cs {
		if matched != nil && !matched[c.InstanceID] {
			continue
		}
		if _, ok := stepError(err, c); ok {
			// One step's writes failed: the others did nothing wrong.
			errs[i] = ErrNotWritten
		} else {
			errs[i] = translate(err, what)
		}
	}
	return errs
}

// rollback ends a failed batch transaction. It is bounded and runs even when
// ctx is done; if it fails the connection stays in its transaction and the
// pool destroys it on release.
func rollback(ctx context.Context, conn *pgxpool.Conn) {
	ctx, cancel := startstop.FinalContext(ctx)
	defer cancel()
	_, _ = conn.Exec(ctx, "ROLLBACK")
}
