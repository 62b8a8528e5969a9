package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
)

// ErrDuplicate reports a relay whose message id a committed step already applied.
var ErrDuplicate = errors.New("store: message already applied")

// Instance is an instance row as read by its claim.
type Instance struct {
	ID                string
	DefinitionKey     string
	DefinitionVersion int
	Version           int64
	State             engine.State
}

// ClaimHeldError is the refusal of a claim that another owner holds.
type ClaimHeldError struct {
	InstanceID string
	Holder     string
	Age        time.Duration
}

func (e *ClaimHeldError) Error() string {
	return fmt.Sprintf("%s: instance %s is claimed by %s (claim age %s)", fault.ClaimHeld, e.InstanceID, e.Holder, e.Age.Round(time.Millisecond))
}

// Unwrap exposes the code to fault.Code.
func (e *ClaimHeldError) Unwrap() error {
	return &fault.Error{Code: fault.ClaimHeld, Msg: "claim held"}
}

// ClaimRequest says which row to claim.
type ClaimRequest struct {
	InstanceID string
	Owner      string
	Timeout    time.Duration
	// InboxID, when set, refuses the claim with ErrDuplicate if that relay
	// message id was already applied.
	InboxID string
	// StartKey, when set, creates the instance (claimed, version 0) from the
	// latest version of that definition if it does not exist yet.
	StartKey string
	// StartCorrelationKey, for a start by a message with a correlation key,
	// is held by the instance while it is active (ErrStartKeyActive when an
	// active instance of the definition holds it). ParentID names the parent
	// of a call activity's child.
	StartCorrelationKey string
	ParentID            string
	// StartVersion starts at that version of StartKey (0: the latest).
	StartVersion int
}

// The claim lives in claims, a row that exists only while its instance is
// claimed, so that a step's update of instances changes no indexed column
// and is HOT (migration 0026). takeClaim inserts the claims row of each
// row of its source, or takes over the existing one when it is ours or
// stale ($3 the claim timeout); it returns the instance ids it claimed.
// Its source locks the instance rows first: every statement that writes
// both tables locks the instance row before the claims row, so none
// deadlocks another.
func takeClaim(source string) string {
	return `INSERT INTO claims AS c (instance_id, owner, claimed_at) ` + source + `
	ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at
	 WHERE c.owner = EXCLUDED.owner OR c.claimed_at < now() - $3::interval
	RETURNING c.instance_id`
}

// claimSQL locks the instance row (waiting only for a commit in flight,
// whose row it then loads), claims it unless the relay was applied, and
// returns the row if the claim was taken: one statement, one round trip.
var claimSQL = `
WITH i AS (
	SELECT i.id, i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version
	  FROM instances i
	 WHERE i.id = $1 AND i.version > 0 AND NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = $4)
	   FOR NO KEY UPDATE
), c AS (` + takeClaim("SELECT id, $2, now() FROM i") + `)
SELECT i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version
  FROM i JOIN c ON c.instance_id = i.id`

// A start creates its row already claimed; a version-0 row left by a start
// that never committed is taken over by the next start like any stale
// claim, and rewritten for the new start only once the claim is taken. The
// instance row, when it exists, is locked before the claim (the count reads
// all of l first).
var claimOrCreateSQL = `
WITH l AS (
	SELECT id FROM instances WHERE id = $1 FOR NO KEY UPDATE
), c AS (` + takeClaim(`SELECT $1, $2, now() FROM (SELECT count(*) FROM l) locked
	 WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = $4)`) + `)
INSERT INTO instances AS i (id, definition_key, definition_version, status, start_correlation_key, parent_id)
SELECT c.instance_id, $5, (SELECT max(version) FROM definitions WHERE key = $5 AND ($8 = 0 OR version = $8)), 'active',
	NULLIF($6, ''), NULLIF($7, '')
  FROM c
ON CONFLICT (id) DO UPDATE SET
	definition_key = CASE WHEN i.version = 0 THEN EXCLUDED.definition_key ELSE i.definition_key END,
	definition_version = CASE WHEN i.version = 0 THEN EXCLUDED.definition_version ELSE i.definition_version END,
	start_correlation_key = CASE WHEN i.version = 0 THEN EXCLUDED.start_correlation_key ELSE i.start_correlation_key END,
	parent_id = CASE WHEN i.version = 0 THEN EXCLUDED.parent_id ELSE i.parent_id END
RETURNING i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version`

// Claim takes the claim on one instance row with one conditional statement and
// loads the row. It never waits for a holder: a held claim is refused with
// *ClaimHeldError; a missing instance with fault.NotFound; an applied relay
// with ErrDuplicate. Any other error leaves it unknown whether the claim was
// taken (the statement may have committed before the client failed): the
// caller must treat the claim as maybe held and release it.
func (s *Store) Claim(ctx context.Context, r ClaimRequest) (Instance, error) {
	b := &pgx.Batch{}
	if !s.syncClaims {
		b.Queue(asyncCommit)
	}
	var q *pgx.QueuedQuery
	if r.StartKey != "" {
		q = b.Queue(claimOrCreateSQL, r.InstanceID, r.Owner, r.Timeout, r.InboxID, r.StartKey, r.StartCorrelationKey, r.ParentID, r.StartVersion)
	} else {
		q = b.Queue(claimSQL, r.InstanceID, r.Owner, r.Timeout, r.InboxID)
	}
	inst := Instance{ID: r.InstanceID}
	var status string
	var tokens []byte
	var scanned bool
	q.QueryRow(func(row pgx.Row) error {
		err := row.Scan(&inst.DefinitionKey, &inst.DefinitionVersion, &status, &inst.State.Variables, &tokens, &inst.Version)
		scanned = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // not claimed: whyNotClaimed tells why
		}
		return err
	})
	err := s.pool.SendBatch(ctx, b).Close()
	if err != nil {
		if isUniqueViolation(err, "instances_active_start_key") {
			return inst, ErrStartKeyActive
		}
		err = translate(err, "claiming "+r.InstanceID)
		if r.StartKey != "" && fault.Code(err) == "" && isSQLState(err, sqlstateNotNull) {
			return inst, fault.New(fault.UnknownDefinition, "definition %q is not deployed", r.StartKey)
		}
		return inst, err
	}
	if !scanned {
		return inst, s.whyNotClaimed(ctx, r)
	}
	inst.State.Status = engine.Status(status)
	if err := json.Unmarshal(tokens, &inst.State); err != nil {
		// Permanent: the row can never be stepped as it is. The claim is held.
		return inst, fmt.Errorf("decoding tokens of %s: %w", r.InstanceID, err)
	}
	return inst, nil
}

// whyNotClaimed looks once more to tell a duplicate, a missing instance and a
// held claim apart. It reads only the claim columns, never the state.
func (s *Store) whyNotClaimed(ctx context.Context, r ClaimRequest) error {
	var exists, applied bool
	var owner *string
	var age *time.Duration
	var version int64
	err := s.pool.QueryRow(ctx, `
		SELECT i.id IS NOT NULL, c.owner, now() - c.claimed_at, COALESCE(i.version, 0),
		       EXISTS (SELECT 1 FROM inbox WHERE message_id = $2)
		  FROM (SELECT 1) one LEFT JOIN instances i ON i.id = $1 LEFT JOIN claims c ON c.instance_id = $1`, r.InstanceID, r.InboxID).
		Scan(&exists, &owner, &age, &version, &applied)
	switch {
	case err != nil:
		return translate(err, "looking up "+r.InstanceID)
	case applied:
		return ErrDuplicate
	case r.StartKey == "" && (!exists || version == 0 && owner == nil):
		// Missing, or a start that gave up before its first commit.
		return fault.New(fault.NotFound, "instance %s does not exist", r.InstanceID)
	case owner == nil:
		// Released between the claim and this look: a refusal all the same.
		return &ClaimHeldError{InstanceID: r.InstanceID, Holder: "(released meanwhile)"}
	}
	held := &ClaimHeldError{InstanceID: r.InstanceID, Holder: *owner}
	if age != nil {
		held.Age = *age
	}
	return held
}

// Release gives up a claim without a step, if owner holds it (harmless when
// it does not). A start that never committed (version 0) leaves no row behind.
// It first waits for the row's lock, so that a claim statement of owner still
// running on the server (its client failed; the claim may be held) finishes
// before the release looks at the owner.
func (s *Store) Release(ctx context.Context, id, owner string) error {
	b := &pgx.Batch{}
	if !s.syncClaims {
		b.Queue(asyncCommit)
	}
	b.Queue("SELECT 1 FROM instances WHERE id = $1 FOR UPDATE", id)
	b.Queue(`DELETE FROM instances WHERE id = $1 AND version = 0
		AND EXISTS (SELECT 1 FROM claims WHERE instance_id = $1 AND owner = $2)`, id, owner)
	b.Queue(releaseSQL, id, owner)
	return translate(s.pool.SendBatch(ctx, b).Close(), "releasing "+id)
}

// StepWrites is one step's durable outcome.
type StepWrites struct {
	InstanceID string
	Owner      string
	// Version is the step counter read at claim time: the fence.
	Version int64
	State   engine.State
	Effects engine.Effects
	// InboxID records the relay message id applied by this step.
	InboxID string
	// FromOutbox: the relay InboxID names is one of the worker's own outbox
	// rows (a task outcome's, which the local fast path may apply before it
	// is published). The commit marks the row published unless a publisher
	// holds it, so that it is never sent: its copy would only be a
	// duplicate (skipOutboxRelaySQL).
	FromOutbox bool
	// TimerID is the timer row this step's fire consumes. The commit fails
	// with fault.NotWaiting when the row is gone (the wait was closed).
	TimerID int64
	// RearmAt, when set, moves the fire's timer row (a timer start event's
	// schedule) to its next fire at that time instead of consuming it.
	RearmAt time.Time
	// Consumed are buffered messages applied after the step, in order, each
	// with the effects of applying it; State is the state after the last.
	Consumed []Consumed
	// SkipBufferCheck leaves out the look for buffered messages matching the
	// subscriptions this step opened (a step that consumed its maximum).
	SkipBufferCheck bool
	// DefinitionVersion, when set, moves the instance to that version of its
	// definition (a migration), after the fence.
	DefinitionVersion int
	// CloseTables, when set, is aligned with Effects.CloseWaits and names the
	// tables each closed wait has rows in (engine.CloseTables): the close
	// deletes from those only. Unset, it deletes from every wait table.
	CloseTables []engine.WaitTables
	// History is why the step ran, for its row in the step history.
	History StepCause
	// Earlier are resumes of the same claim that ran before this step, in
	// order, each on the state the one before it left (a chain of resumes
	// of one instance, lanes/batch.go); State is the state after the last
	// of them and this step. The commit writes each one's effects, relay
	// and history row in turn (counters Version+1, Version+2, …), then this
	// step's, and moves the instance's counter past them all. Only
	// WriteGroup writes a chain.
	Earlier []EarlierStep
}

// EarlierStep is one resume of a chain committed before the last
// (StepWrites.Earlier): its own effects, relay and history row.
type EarlierStep struct {
	Effects     engine.Effects
	CloseTables []engine.WaitTables
	InboxID     string
	FromOutbox  bool
	History     StepCause
}

// parts are the resumes step c commits, in order: its Earlier ones, then
// its own.
func (c StepWrites) parts() []EarlierStep {
	own := EarlierStep{Effects: c.Effects, CloseTables: c.CloseTables, InboxID: c.InboxID, FromOutbox: c.FromOutbox, History: c.History}
	if len(c.Earlier) == 0 {
		return []EarlierStep{own}
	}
	return append(slices.Clip(c.Earlier), own)
}

// Consumed is a buffered message a step applied in its commit.
type Consumed struct {
	BufferedID int64
	Effects    engine.Effects
}

// WriteStep writes the step and releases the claim in one transaction (one
// round trip: a batch runs as one implicit transaction). The fence runs first:
// if the claim was swept or stolen it raises, nothing is written, and the
// error carries fault.StepFenced. A fire's timer row is consumed strictly
// before the effects (which may close and re-open the same wait). When the
// step opened a subscription that a buffered message matches, the commit
// rolls back with *BufferedMatch and the claim stays held. A step past the
// store's limits is refused (fault.StepTooLarge) before anything is sent, its
// claim still held.
func (s *Store) WriteStep(ctx context.Context, c StepWrites) error {
	if len(c.Earlier) > 0 {
		return fmt.Errorf("store: the chain of steps of %s commits through WriteGroup", c.InstanceID)
	}
	docs, err := s.encodeStep(c)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(commitPlans)
	b.Queue("SELECT sutra_commit($1, $2, $3, $4, $5, $6)", c.InstanceID, c.Owner, c.Version, string(c.State.Status), docs.vars, docs.tokens)
	w := s.outboxWrites()
	if err := s.queueStepWrites(b, w, c); err != nil {
		return err
	}
	err = s.pool.SendBatch(ctx, b).Close()
	if err == nil {
		s.notifyOutbox(w)
	}
	if id, ok := matchedRow(err); ok {
		m, rerr := s.bufferedRow(ctx, id)
		if rerr != nil {
			return rerr
		}
		return m
	}
	if serr, ok := stepError(err, c); ok {
		return serr
	}
	return translate(err, "committing step of "+c.InstanceID)
}

// queueStepWrites queues every write of the steps of one commit after their
// fence: the one list of them, shared by WriteStep (one step) and
// WriteGroup. What most steps write (their closed, renamed and opened waits,
// the inbox row, the history row, the look for buffered messages) goes as one statement for
// all the steps, over arrays that name each row's instance; the rest goes per
// step. Each step's writes keep their order: the fire's timer row before the
// effects (which may close and re-open its wait), the effects in the order
// queueEffects gives, the inbox and history rows, the buffered messages applied, and the
// look last, so that it sees every subscription the transaction left open.
// The steps are of distinct instances, so the order between them is free;
// the resumes of a chain (StepWrites.Earlier) keep theirs.
// Other replicas hear of the pull tasks the steps create at the commit
// (queueTasksNotice).
func (s *Store) queueStepWrites(b *pgx.Batch, w *outboxWrites, cs ...StepWrites) error {
	parts := make([][]EarlierStep, len(cs))
	var inbox, inboxOf []string
	for i, c := range cs {
		switch {
		case c.TimerID != 0 && !c.RearmAt.IsZero():
			b.Queue("SELECT sutra_rearm_start_timer($1, $2, $3)", c.TimerID, c.InstanceID, c.RearmAt)
		case c.TimerID != 0:
			b.Queue("SELECT sutra_consume_timer($1, $2)", c.TimerID, c.InstanceID)
		}
		if c.DefinitionVersion > 0 {
			b.Queue("UPDATE instances SET definition_version = $2 WHERE id = $1", c.InstanceID, c.DefinitionVersion)
		}
		parts[i] = c.parts()
		for _, p := range parts[i] {
			if p.InboxID != "" {
				inbox, inboxOf = append(inbox, p.InboxID), append(inboxOf, c.InstanceID)
			}
			if p.FromOutbox && p.InboxID != "" {
				b.Queue(skipOutboxRelaySQL, p.InboxID)
			}
		}
	}
	// The effects go in rounds: the first resume of every step, then the
	// second of the chains, …, so that a chain's resume sees the waits the
	// one before it closed and opened.
	for k := 0; ; k++ {
		var round []stepEffects
		for i, c := range cs {
			if k < len(parts[i]) {
				p := parts[i][k]
				round = append(round, stepEffects{id: c.InstanceID, Effects: p.Effects, closeTables: p.CloseTables, job: jobOfRelay(p.InboxID)})
			}
		}
		if len(round) == 0 {
			break
		}
		if err := queueEffects(b, w, round...); err != nil {
			return err
		}
	}
	if len(inbox) > 0 {
		b.Queue(inboxInsertSQL, inbox, inboxOf)
	}
	queueHistory(b, cs)
	var look waitRows
	for _, c := range cs {
		for _, x := range c.Consumed {
			b.Queue("SELECT sutra_consume_buffered($1, $2)", x.BufferedID, c.InstanceID)
			if err := queueEffects(b, w, stepEffects{id: c.InstanceID, Effects: x.Effects}); err != nil {
				return err
			}
		}
		if !c.State.Status.Live() {
			// The instance ended: a message start waiting for its key may start now.
			b.Queue("SELECT sutra_release_start_buffer($1)", c.InstanceID)
		}
		if !c.SkipBufferCheck {
			look.addLooked(c)
		}
	}
	if len(look.ids) > 0 {
		b.Queue(bufferedLocksSQL, look.ids, look.toks, look.els)
		b.Queue(bufferedLookSQL, look.ids, look.toks, look.els)
	}
	s.queueTasksNotice(b, cs)
	return nil
}

// stepError maps the errors of a step's own writes (ok false leaves err to
// translate): a copy of the relay committed first, a buffered message
// matched (whose row the caller reads) or went away, the fire's timer row is
// gone.
func stepError(err error, c StepWrites) (error, bool) {
	if isInboxDuplicate(err) {
		// A copy of this relay committed after our claim read the inbox.
		return ErrDuplicate, true
	}
	if _, ok := matchedRow(err); ok {
		return err, true
	}
	if berr, ok := bufferedGone(err); ok {
		return berr, true
	}
	if isSQLState(err, sqlstateTimerGone) {
		return fault.Wrap(fault.NotWaiting, err, "timer %d of %s", c.TimerID, c.InstanceID), true
	}
	return nil, false
}

// Applied reports whether a committed step applied relay message id inboxID.
// The claim's own inbox check reads the snapshot of its statement, which can
// predate a copy's commit that it waited for; a fresh statement cannot.
func (s *Store) Applied(ctx context.Context, inboxID string) (bool, error) {
	var applied bool
	err := s.pool.QueryRow(ctx, appliedSQL, inboxID).Scan(&applied)
	return applied, translate(err, "reading inbox")
}

// stepEffects are the effects of one step (or of a buffered message it
// applied) on instance id; closeTables, when set, says which tables each
// closed wait has rows in (see StepWrites.CloseTables).
type stepEffects struct {
	id string
	engine.Effects
	closeTables []engine.WaitTables
	// job is the task whose outcome the step applied (0: none): a
	// SUTRA.INCIDENT.TASK_FAILED incident it opens records it (job_key).
	job int64
}

// waitRows are rows of wait tables named by instance, token and element,
// column by column, for one statement over several steps.
type waitRows struct{ ids, toks, els []string }

func (w *waitRows) add(id, tok, el string) {
	w.ids, w.toks, w.els = append(w.ids, id), append(w.toks, tok), append(w.els, el)
}

// addLooked adds the subscriptions whose buffered messages commit c must
// look for: every subscription its step and the messages it applied open,
// whether or not a later one closed it again (the look joins the rows still
// open in the transaction).
func (w *waitRows) addLooked(c StepWrites) {
	add := func(subs []engine.Subscription) {
		for _, s := range subs {
			if !s.Signal { // no message is buffered for a signal
				w.add(c.InstanceID, s.TokenID, s.Element)
			}
		}
	}
	for _, p := range c.Earlier {
		add(p.Effects.Subscriptions)
	}
	add(c.Effects.Subscriptions)
	for _, x := range c.Consumed {
		add(x.Effects.Subscriptions)
	}
}

// queueEffects queues the writes of the effects of several steps, each in the
// order the engine requires: closes before renames before opens (a token may
// re-open a wait it closed), resolved incidents before new ones (a retried
// token may appear in both), then the relays to children and parent. Closes,
// renames and opens go as one statement per table for all the steps; the
// rest per step, after them.
func queueEffects(b *pgx.Batch, w *outboxWrites, steps ...stepEffects) error {
	for _, table := range []struct {
		name string
		bit  engine.WaitTables
	}{{"subscriptions", engine.TableSubscriptions}, {"timers", engine.TableTimers}, {"tasks", engine.TableTasks},
		{"signal_subscriptions", engine.TableSignals}} {
		var closed waitRows
		for _, s := range steps {
			for i, w := range s.CloseWaits {
				if len(s.closeTables) == len(s.CloseWaits) && s.closeTables[i]&table.bit == 0 {
					continue // no row of this wait in this table
				}
				closed.add(s.id, w.TokenID, w.Element)
			}
		}
		if len(closed.ids) > 0 {
			b.Queue(closeWaitsSQL(table.name), closed.ids, closed.toks, closed.els)
		}
	}
	var renamed waitRows
	var renamedTo []string
	for _, s := range steps {
		for _, w := range s.RenameWaits {
			renamed.add(s.id, w.TokenID, w.From)
			renamedTo = append(renamedTo, w.To)
		}
	}
	if len(renamed.ids) > 0 {
		// A migration keeps the wait's row: a timer its due time, a task its lock.
		for _, table := range []string{"subscriptions", "timers", "tasks", "signal_subscriptions"} {
			b.Queue(`UPDATE `+table+` t SET element_id = w.dst
				FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS w(id, tok, src, dst)
				WHERE t.instance_id = w.id AND t.token_id = w.tok AND t.element_id = w.src`,
				renamed.ids, renamed.toks, renamed.els, renamedTo)
		}
	}
	var opened, signals waitRows
	var names, keys, signalNames []string
	var armed waitRows
	var due []time.Time
	var repeat []int32
	var intervals []string
	for _, s := range steps {
		for _, sub := range s.Subscriptions {
			if sub.Signal {
				signals.add(s.id, sub.TokenID, sub.Element)
				signalNames = append(signalNames, sub.Message)
				continue
			}
			opened.add(s.id, sub.TokenID, sub.Element)
			names, keys = append(names, sub.Message), append(keys, sub.CorrelationKey)
		}
		for _, t := range s.Timers {
			armed.add(s.id, t.TokenID, t.Element)
			due, repeat, intervals = append(due, t.DueAt), append(repeat, int32(t.Repeat)), append(intervals, t.Interval)
		}
	}
	if len(opened.ids) > 0 {
		b.Queue(openSubscriptionsSQL, opened.ids, opened.toks, opened.els, names, keys)
	}
	if len(signals.ids) > 0 {
		b.Queue(openSignalsSQL, signals.ids, signals.toks, signals.els, signalNames)
	}
	if len(armed.ids) > 0 {
		b.Queue(armTimersSQL, armed.ids, armed.toks, armed.els, due, repeat, intervals)
	}
	for _, s := range steps {
		if err := queueStepEffects(b, w, s.id, s.Effects, s.job); err != nil {
			return err
		}
	}
	return nil
}

// queueStepEffects queues the writes of one step's effects that go per step,
// after the waits of queueEffects.
func queueStepEffects(b *pgx.Batch, w *outboxWrites, id string, e engine.Effects, job int64) error {
	for _, t := range e.Tasks {
		vars := t.Variables
		if vars == nil {
			vars = map[string]any{}
		}
		headers := t.Headers
		if headers == nil {
			headers = map[string]string{}
		}
		var notBefore *time.Time
		if !t.NotBefore.IsZero() {
			notBefore = &t.NotBefore
		}
		u := t.User
		if u == nil {
			u = &engine.UserTask{}
		}
		groups, users := u.CandidateGroups, u.CandidateUsers
		if groups == nil {
			groups = []string{}
		}
		if users == nil {
			users = []string{}
		}
		b.Queue(`INSERT INTO tasks (instance_id, token_id, element_id, type, retries, variables, headers, not_before,
				user_task, assignee, candidate_groups, candidate_users, form_key, form_id, due_date, follow_up_date, priority,
				error_message, error_details)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, ''), $11, $12, NULLIF($13, ''), NULLIF($14, ''),
				NULLIF($15, ''), NULLIF($16, ''), $17, NULLIF($18, ''), NULLIF($19, ''))
			ON CONFLICT (instance_id, token_id, element_id) DO UPDATE
			   SET type = EXCLUDED.type, retries = EXCLUDED.retries, variables = EXCLUDED.variables,
			       headers = EXCLUDED.headers, not_before = EXCLUDED.not_before, locked_by = NULL,
			       lock_expires_at = NULL, outcome = NULL,
			       error_message = EXCLUDED.error_message, error_details = EXCLUDED.error_details`,
			id, t.TokenID, t.Element, t.Type, t.Retries, vars, headers, notBefore,
			t.User != nil, u.Assignee, groups, users, u.FormKey, u.FormID, u.DueDate, u.FollowUpDate, u.Priority,
			t.ErrorMessage, t.ErrorDetails)
	}
	for _, m := range e.Publish {
		vars := m.Variables
		if vars == nil {
			vars = map[string]any{}
		}
		// A re-run of the same step derives the same id: publish once.
		w.queue(b, insertMessageSQL, m.ID, id, m.Element, m.Message, m.CorrelationKey, vars)
	}
	if err := queueSignalThrows(b, w, id, e.Signals); err != nil {
		return err
	}
	for _, a := range e.Assignments {
		b.Queue(`UPDATE tasks SET assignee = $4, outcome = NULL
			WHERE instance_id = $1 AND token_id = $2 AND element_id = $3 AND user_task`, id, a.TokenID, a.Element, a.Assignee)
	}
	for _, u := range e.Updates {
		b.Queue(`UPDATE tasks SET `+userTaskChangesSet(4)+`, outcome = NULL
			WHERE instance_id = $1 AND token_id = $2 AND element_id = $3 AND user_task`,
			append([]any{id, u.TokenID, u.Element}, userTaskChangesArgs(u.Changes)...)...)
	}
	if len(e.ResolvedIncidents) > 0 {
		b.Queue(`UPDATE incidents SET resolved_at = now() WHERE instance_id = $1 AND token_id = ANY ($2) AND resolved_at IS NULL`,
			id, e.ResolvedIncidents)
	}
	for _, inc := range e.Incidents {
		var jobKey *int64
		if job != 0 && inc.Code == fault.IncidentTaskFailed {
			jobKey = &job
		}
		b.Queue(`INSERT INTO incidents (instance_id, token_id, element_id, code, message, job_key, error_message, error_details)
			VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), NULLIF($8, ''))`,
			id, inc.TokenID, inc.Element, inc.Code, inc.Message, jobKey, inc.ErrorMessage, inc.ErrorDetails)
	}
	relays, err := childRelays(id, e)
	if err != nil {
		return err
	}
	queueRelays(b, w, relays)
	return nil
}

// insertMessageSQL writes a BPMN message to the outbox (outboxInsert).
var insertMessageSQL = outboxInsert("", "id, instance_id, element_id, message_name, correlation_key, variables",
	"VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::jsonb)", true)

// ResolveSubscription returns the instance whose oldest open subscription
// waits for message name with key. A relay already applied (inboxID) is
// ErrDuplicate even though its subscription is gone; no match is
// fault.RelayUncorrelated.
func (s *Store) ResolveSubscription(ctx context.Context, name, key, inboxID string) (string, error) {
	var id *string
	var applied bool
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT instance_id FROM subscriptions WHERE message_name = $1 AND correlation_key = $2
		  ORDER BY created_at LIMIT 1),
		EXISTS (SELECT 1 FROM inbox WHERE message_id = $3)`, name, key, inboxID).Scan(&id, &applied)
	switch {
	case err != nil:
		return "", translate(err, "resolving message "+name)
	case applied:
		return "", ErrDuplicate
	case id == nil:
		return "", fault.New(fault.RelayUncorrelated, "no instance waits for message %q with correlation key %q", name, key)
	}
	return *id, nil
}
