package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Task outcomes a worker reports.
const (
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskBPMNError = "bpmn_error"
	// TaskAssign is an assignment of a user task with assigning listeners
	// (Variables {"assignee": …}): the task is assigning until the step
	// that runs them applies it (migration 0027).
	TaskAssign = "assign"
	// TaskUpdate is an update of a user task with updating listeners
	// (Variables: engine.UserTaskChanges): the task is updating until the
	// step that runs them applies it (migration 0029).
	TaskUpdate = "update"
)

// TopicLock asks for tasks of one topic (a service task's type).
type TopicLock struct {
	Topic        string
	LockDuration time.Duration
	// DefinitionKeys, when not empty, takes only tasks of instances of these
	// definitions.
	DefinitionKeys []string
}

// LockedTask is a task locked to a worker by FetchAndLock.
type LockedTask struct {
	ID                int64
	Topic             string
	InstanceID        string
	TokenID           string
	Element           string
	DefinitionKey     string
	DefinitionVersion int
	// InstanceKey and DefinitionZeebeKey are the instance's and the
	// definition version's Zeebe keys (migration 0019).
	InstanceKey        int64
	DefinitionZeebeKey int64
	Retries            int
	Priority           int
	Variables          map[string]any
	Headers            map[string]string
	CreatedAt          time.Time
	LockExpires        time.Time
	// Waited is how long the task waited from its creation to this lock
	// (database clock).
	Waited time.Duration
	// Relocked: the task was locked before by a worker whose lock expired.
	Relocked     bool
	ErrorMessage *string
	ErrorDetails *string
}

// VariablesNamed is what a job's activation sends of the task's variables:
// those of names when there are any (the client's fetchVariable), else
// all; never a nil map.
func (t LockedTask) VariablesNamed(names []string) map[string]any {
	vars := t.Variables
	if len(names) > 0 {
		vars = make(map[string]any, len(names))
		for _, name := range names {
			if v, ok := t.Variables[name]; ok {
				vars[name] = v
			}
		}
	}
	if vars == nil {
		vars = map[string]any{}
	}
	return vars
}

// HeadersOrEmpty is the task's custom headers, never a nil map.
func (t LockedTask) HeadersOrEmpty() map[string]string {
	if t.Headers == nil {
		return map[string]string{}
	}
	return t.Headers
}

// fetchAndLockSQL locks up to $4 open tasks of the asked topics to worker
// $1, each for its topic's lock duration, in order (the %[1]s of the tasks,
// %[2]s of the picks). SKIP LOCKED keeps two fetches' statements apart, and
// the lock (locked_by, lock_expires_at) keeps a task from other workers until
// it expires, so two workers never hold one task.
//
// Each topic walks its index in the order tasks are taken and stops at the
// limit (the LATERAL): ordered across topics at once, the statement read and
// sorted every open task of the topic, and looked up every one's instance,
// to lock one (850 µs a fetch of 256 waiting tasks; BENCHMARKS.md).
//
// A task's variables are its instance's variables as they are at the fetch,
// overlaid with the task's own input (tasks.variables: its input mappings,
// an inner instance's item), as the engine's view of the token overlays
// them: the row holds no copy of the instance's variables.
var fetchAndLockSQL = `
WITH want AS (
	SELECT * FROM unnest($2::text[], $3::float8[], $5::text[]) AS w(topic, lock_secs, keys)
), cand AS (
	SELECT c.* FROM want w CROSS JOIN LATERAL (
		SELECT t.id, t.priority, t.locked_by AS prev, w.lock_secs, i.definition_key, i.definition_version,
		       i.variables AS instance_variables, i.zeebe_key AS instance_key,
		       (SELECT d.zeebe_key FROM definitions d WHERE d.key = i.definition_key AND d.version = i.definition_version) AS definition_zeebe_key
		  FROM tasks t
		  JOIN instances i ON i.id = t.instance_id
		 WHERE t.type = w.topic AND t.outcome IS NULL
		   AND (t.locked_by IS NULL OR t.lock_expires_at < now())
		   AND (t.not_before IS NULL OR t.not_before <= now())
		   AND (w.keys = '' OR i.definition_key = ANY (string_to_array(w.keys, chr(31))))
		   AND t.instance_id || chr(31) || t.token_id || chr(31) || t.element_id <> ALL ($6::text[])
		 ORDER BY %[1]s
		 LIMIT $4
		 FOR UPDATE OF t SKIP LOCKED
	) c
	ORDER BY %[2]s
	LIMIT $4
)
` + lockCandidatesSQL

// lockCandidatesSQL locks the tasks of cand to worker $1 and returns what
// scanLocked reads: the end of every statement that locks tasks;
// lockCreatedCandidatesSQL locks each to its cand.worker.
var (
	lockCandidatesSQL        = lockCandidates("$1")
	lockCreatedCandidatesSQL = lockCandidates("cand.worker")
)

func lockCandidates(worker string) string {
	return `
UPDATE tasks t SET locked_by = ` + worker + `, lock_expires_at = now() + make_interval(secs => cand.lock_secs)
  FROM cand WHERE t.id = cand.id
RETURNING t.id, t.type, t.instance_id, t.token_id, t.element_id, cand.definition_key, cand.definition_version,
	t.retries, t.priority, cand.instance_variables || t.variables, t.headers, t.created_at, t.lock_expires_at, now() - t.created_at,
	cand.prev IS NOT NULL, t.error_message, t.error_details, cand.instance_key, cand.definition_zeebe_key`
}

// lockCreatedSQL locks the tasks named by their keys (instance, token,
// element: $2–$4) and topics ($5), each for its lock duration ($6) to its
// worker ($1), that are still open, of that topic and free: the tasks a
// step of this replica created and handed to waiting fetches (taskwait),
// which need no look to be found. A task another fetch took first, or one
// re-created with another type, is left out.
var lockCreatedSQL = `
WITH cand AS (
	SELECT t.id, t.locked_by AS prev, w.lock_secs, w.worker, i.definition_key, i.definition_version,
	       i.variables AS instance_variables, i.zeebe_key AS instance_key,
	       (SELECT d.zeebe_key FROM definitions d WHERE d.key = i.definition_key AND d.version = i.definition_version) AS definition_zeebe_key
	  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::float8[]) AS w(worker, instance_id, token_id, element_id, topic, lock_secs)
	  JOIN tasks t ON t.instance_id = w.instance_id AND t.token_id = w.token_id AND t.element_id = w.element_id
	  JOIN instances i ON i.id = t.instance_id
	 WHERE t.type = w.topic AND t.outcome IS NULL
	   AND (t.locked_by IS NULL OR t.lock_expires_at < now())
	   AND (t.not_before IS NULL OR t.not_before <= now())
	   FOR UPDATE OF t SKIP LOCKED
)` + lockCreatedCandidatesSQL

// fetchSetupSQL precedes a fetch in its transaction: a lock is soft state
// (no WAL flush), and the fetch runs its cached generic plan. Left to
// choose, PostgreSQL planned each execution anew (the generic plan's estimate
// for LIMIT $4 looks dear beside a custom plan's), and planning the statement
// cost more than running it (0.5–1.9 ms against 0.2 ms).
const fetchSetupSQL = asyncCommit + ", " + genericPlansSetting

// The two fetchAndLock statements: oldest first, and highest priority first
// (usePriority). Each walks an index in its order (migration 0012): t.type
// leads the ORDER BY so that the index on (type, …) matches it.
var (
	fetchOldestSQL     = fmt.Sprintf(fetchAndLockSQL, "t.type, t.id", "c.id")
	fetchByPrioritySQL = fmt.Sprintf(fetchAndLockSQL, "t.type, t.priority DESC, t.id", "c.priority DESC, c.id")
)

// FetchAndLock locks up to max open tasks of topics to worker, highest
// priority first when byPriority, else oldest first. One statement, in one
// round trip. A lock is soft state, like a claim, so it skips the WAL flush:
// a lock lost with a database crash makes its task fetchable again, and the
// first worker's outcome is then refused (LOCK_LOST), as after an expiry.
func (s *Store) FetchAndLock(ctx context.Context, worker string, topics []TopicLock, max int, byPriority bool) ([]LockedTask, error) {
	return s.FetchAndLockExcept(ctx, worker, topics, max, byPriority, nil)
}

// FetchAndLockExcept is FetchAndLock leaving out the tasks of except (by
// their keys): those handed to another waiting fetch, which locks them next
// (taskwait), as Zeebe activates a job pushed to a stream at its creation.
func (s *Store) FetchAndLockExcept(ctx context.Context, worker string, topics []TopicLock, max int, byPriority bool, except []CreatedTask) ([]LockedTask, error) {
	skip := make([]string, 0, len(except)) // never NULL: <> ALL (NULL) takes nothing
	for _, c := range except {
		skip = append(skip, createdKey(c.InstanceID, c.TokenID, c.Element))
	}
	names, secs, keys := make([]string, len(topics)), make([]float64, len(topics)), make([]string, len(topics))
	for i, t := range topics {
		names[i], secs[i], keys[i] = t.Topic, t.LockDuration.Seconds(), strings.Join(t.DefinitionKeys, "\x1f")
	}
	fetch := fetchOldestSQL
	if byPriority {
		fetch = fetchByPrioritySQL
	}
	tasks, err := s.lockTasks(ctx, fetch, worker, names, secs, max, keys, skip)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(tasks, func(a, b LockedTask) int {
		if byPriority && a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		return int(a.ID - b.ID)
	})
	return tasks, nil
}

// CreatedTask is a pull task a committed step created, named by its key:
// what a waiting fetch is handed to lock (LockCreated).
type CreatedTask struct {
	Topic, InstanceID, TokenID, Element string
	// LockDuration is the lock the fetch takes it for (LockCreated).
	LockDuration time.Duration
}

// LockCreated locks tasks to worker by their keys, oldest first, those that
// are still open, of their topic and free. One statement, which reads each
// task by its key: the fetch of a task handed to a waiter finds nothing it
// was not told of. Like FetchAndLock, the lock skips the WAL flush.
// Concurrent calls share the statement (group): each is answered with the
// tasks it asked for that it locked.
func (s *Store) LockCreated(ctx context.Context, worker string, created []CreatedTask) ([]LockedTask, error) {
	tasks, err := s.locks.do(ctx, lockAsk{worker: worker, created: created})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(tasks, func(a, b LockedTask) int { return int(a.ID - b.ID) })
	return tasks, nil
}

// lockAsk is one LockCreated call.
type lockAsk struct {
	worker  string
	created []CreatedTask
}

// createdKey names a created task by its key.
func createdKey(instance, token, element string) string {
	return instance + "\x1f" + token + "\x1f" + element
}

// newLockGroup is the group of LockCreated calls: concurrent fetches of
// created tasks share one statement (a task is handed to one waiter at a
// time, and a statement never takes a task key twice).
func (s *Store) newLockGroup() *group[lockAsk, []LockedTask] {
	return &group[lockAsk, []LockedTask]{
		keys: func(a lockAsk) []string {
			keys := make([]string, len(a.created))
			for i, c := range a.created {
				keys[i] = createdKey(c.InstanceID, c.TokenID, c.Element)
			}
			return keys
		},
		run: s.lockCreated,
	}
}

// lockCreated locks the tasks of calls in one statement and gives each call
// those it asked for.
func (s *Store) lockCreated(ctx context.Context, calls []*groupCall[lockAsk, []LockedTask]) error {
	var workers, insts, toks, els, topics []string
	var secs []float64
	byKey := map[string]*groupCall[lockAsk, []LockedTask]{}
	for _, c := range calls {
		for _, t := range c.in.created {
			workers, insts, toks, els, topics = append(workers, c.in.worker), append(insts, t.InstanceID), append(toks, t.TokenID),
				append(els, t.Element), append(topics, t.Topic)
			secs = append(secs, t.LockDuration.Seconds())
			byKey[createdKey(t.InstanceID, t.TokenID, t.Element)] = c
		}
	}
	tasks, err := s.lockTasks(ctx, lockCreatedSQL, workers, insts, toks, els, topics, secs)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if c := byKey[createdKey(t.InstanceID, t.TokenID, t.Element)]; c != nil {
			c.out = append(c.out, t)
		}
	}
	return nil
}

// lockTasks runs a statement that locks tasks (lockCandidatesSQL) after
// fetchSetupSQL, in one round trip, and reads the tasks it locked.
func (s *Store) lockTasks(ctx context.Context, sql string, args ...any) ([]LockedTask, error) {
	b := &pgx.Batch{}
	b.Queue(fetchSetupSQL)
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, translate(err, "fetching and locking tasks")
	}
	rows, err := br.Query()
	if err != nil {
		return nil, translate(err, "fetching and locking tasks")
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LockedTask, error) {
		var t LockedTask
		err := r.Scan(&t.ID, &t.Topic, &t.InstanceID, &t.TokenID, &t.Element, &t.DefinitionKey, &t.DefinitionVersion,
			&t.Retries, &t.Priority, &t.Variables, &t.Headers, &t.CreatedAt, &t.LockExpires, &t.Waited,
			&t.Relocked, &t.ErrorMessage, &t.ErrorDetails, &t.InstanceKey, &t.DefinitionZeebeKey)
		return t, err
	})
	if err != nil {
		return nil, translate(err, "fetching and locking tasks")
	}
	return tasks, nil
}

// LockError refuses a call on a task that the worker does not hold.
type LockError struct {
	TaskID int64
	Worker string
	// Holder is the worker that holds the task ("" when nobody does).
	Holder string
	// Expired: the worker's lock expired (and nobody else took the task).
	Expired bool
}

func (e *LockError) Error() string {
	switch {
	case e.Holder == "":
		return fmt.Sprintf("task %d is not locked by worker %q: it is not locked at all", e.TaskID, e.Worker)
	case e.Expired:
		return fmt.Sprintf("task %d: the lock of worker %q has expired", e.TaskID, e.Worker)
	}
	return fmt.Sprintf("task %d is locked by worker %q, not %q", e.TaskID, e.Holder, e.Worker)
}

// TaskReport is what a worker reports of a task it holds.
type TaskReport struct {
	TaskID int64
	Worker string
	// Kind is TaskCompleted, TaskFailed, TaskBPMNError, TaskAssign or
	// TaskUpdate.
	Kind      string
	Variables map[string]any
	// ErrorCode is the BPMN error's code (TaskBPMNError).
	ErrorCode    string
	ErrorMessage string
	ErrorDetails string
	// Retries and RetryTimeout are what is left after a failure (TaskFailed).
	Retries      int
	RetryTimeout time.Duration
	// Human completes a user task through the admin API: no worker's lock
	// fences it. An assigned task is completed only by its assignee, User,
	// unless Override (NotAssigneeError).
	Human    bool
	User     string
	Override bool
	// HolderPrefix, when set, fences on a lock holder that starts with it
	// in place of Worker: a Zeebe job's outcome names no worker, only that
	// a Zeebe worker holds it (api/zeebe locks as "zeebe:<worker>").
	HolderPrefix string
}

// taskRelayRoutingKey is the routing key of task outcome relays.
const taskRelayRoutingKey = "task"

// recordOutcomesSQL records the outcomes of several tasks (one per task),
// each fenced on its lock holder, and writes, in the same statement (one
// transaction, durable at commit), the outbox row that carries each to the
// step pipeline as a relay (outboxInsert). The relay's message id is unique
// per outcome of the row, so its inbox row dedupes a redelivered copy; it
// names the task, which tells each caller of a group its row (jobOfRelay).
var recordOutcomesSQL = outboxInsert(`w AS (
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
	                     $8::int[], $9::bigint[], $10::bool[], $11::text[], $12::bool[], $13::text[])
	    AS w(id, worker, kind, vars, error_code, error_message, error_details, retries, retry_ms, human, usr, override, prefix)
), done AS (
	UPDATE tasks t SET outcome = w.kind, outcomes = t.outcomes + 1,
	       error_message = COALESCE(w.error_message, t.error_message), error_details = COALESCE(w.error_details, t.error_details)
	  FROM w
	 WHERE t.id = w.id AND t.outcome IS NULL
	   AND (t.locked_by = w.worker OR (w.prefix <> '' AND starts_with(t.locked_by, w.prefix))
	        OR (w.human AND t.user_task AND (w.override OR t.assignee IS NULL OR t.assignee = w.usr)))
	RETURNING t.id, t.instance_id, t.token_id, t.element_id, t.outcomes, t.type, w.kind, w.vars, w.error_code,
	          w.error_message AS msg, w.error_details AS details, w.retries, w.retry_ms
),`, "id, instance_id, element_id, message_name, target, routing_key, body", `
SELECT 'task:' || id || ':' || outcomes, instance_id, element_id, type, 'relay', $14::text,
       convert_to(json_build_object(
           'instance_id', instance_id,
           'task', json_build_object('id', id::text, 'token', token_id, 'element', element_id, 'outcome', kind,
                                     'error_code', error_code, 'error_message', msg, 'error_details', details, 'retries', retries,
                                     'retry_timeout_ms', retry_ms),
           'variables', vars::jsonb)::text, 'UTF8')
  FROM done`, false) + outboxRelayReturning

// Recorded is an outcome recorded: its task's topic, and the relay queued in
// the outbox that applies it (what the consumer receives once it is
// published, byte for byte).
type Recorded struct {
	Topic string
	Relay RelayOut
}

// jobOfRelay is the task whose outcome relay has message id id
// ("task:<id>:<n>", recordOutcomeSQL), or 0.
func jobOfRelay(id string) int64 {
	rest, ok := strings.CutPrefix(id, "task:")
	if !ok {
		return 0
	}
	task, _, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(task, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// RecordOutcome records a worker's outcome of a task it holds and queues
// the relay that applies it, durably, in one statement (recordOutcomesSQL). Errors: ErrNotFound
// (no such task, or it already has an outcome), *LockError (another worker
// holds it, or nobody), and the usual classes.
//
// Outcomes recorded concurrently share that statement and its commit (one
// WAL flush): see group. Each is answered only after the commit,
// with its own result.
//
// Unlike other writes of outbox rows, it does not wake the publisher: the
// caller hands the relay to the lanes (consumer.Handoff), which apply it
// without a publish, or wake the publisher when they do not. A relay never
// handed off waits for a publisher's poll.
func (s *Store) RecordOutcome(ctx context.Context, o TaskReport) (Recorded, error) {
	rec, err := s.outcomes.do(ctx, o)
	switch {
	case err != nil:
		return Recorded{}, translate(err, fmt.Sprintf("recording the outcome of task %d", o.TaskID))
	case rec != nil:
		return *rec, nil
	case o.Human:
		return Recorded{}, s.whyNotCompleted(ctx, o.TaskID)
	}
	return Recorded{}, s.whyNotHeld(ctx, o.TaskID, o.Worker)
}

// ExtendLock sets the lock of a task worker holds to expire d from now. A
// lock that expired cannot be extended.
func (s *Store) ExtendLock(ctx context.Context, id int64, worker string, d time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET lock_expires_at = now() + make_interval(secs => $3)
		WHERE id = $1 AND outcome IS NULL AND locked_by = $2 AND lock_expires_at > now()`, id, worker, d.Seconds())
	if err != nil {
		return translate(err, fmt.Sprintf("extending the lock of task %d", id))
	}
	if tag.RowsAffected() == 0 {
		return s.whyNotHeld(ctx, id, worker)
	}
	return nil
}

// SetLockTimeout sets the lock of a locked task to expire d from now,
// whoever holds it (Zeebe's UpdateJobTimeout names no worker). Errors:
// ErrNotFound (no such task, or it has an outcome), *LockError (it is not
// locked, or its lock expired).
func (s *Store) SetLockTimeout(ctx context.Context, id int64, d time.Duration) error {
	var holder *string
	var live, found bool
	err := s.pool.QueryRow(ctx, `WITH t AS (SELECT id, locked_by, lock_expires_at > now() AS live FROM tasks
			WHERE id = $1 AND outcome IS NULL FOR UPDATE), u AS (
		UPDATE tasks SET lock_expires_at = now() + make_interval(secs => $2)
		  FROM t WHERE tasks.id = t.id AND t.locked_by IS NOT NULL AND t.live RETURNING tasks.id)
		SELECT t.locked_by, COALESCE(t.live, false), true FROM t`, id, d.Seconds()).Scan(&holder, &live, &found)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("task %d does not exist or is finished: %w", id, ErrNotFound)
	case err != nil:
		return translate(err, fmt.Sprintf("setting the lock timeout of task %d", id))
	case holder == nil:
		return &LockError{TaskID: id}
	case !live:
		return &LockError{TaskID: id, Worker: *holder, Holder: *holder, Expired: true}
	}
	return nil
}

// SetRetries sets the retries an open task carries to its next worker, or,
// for a task that failed into an open incident (incidents.job_key), the
// retries of the task the incident's retry creates (JobRetries). Errors:
// ErrNotFound (no such task, or it is finished and no open incident holds
// it).
func (s *Store) SetRetries(ctx context.Context, id int64, retries int) error {
	var n int
	err := s.pool.QueryRow(ctx, `WITH t AS (
			UPDATE tasks SET retries = $2 WHERE id = $1 AND outcome IS NULL RETURNING 1
		), i AS (
			UPDATE incidents SET job_retries = $2
			 WHERE job_key = $1 AND resolved_at IS NULL AND NOT EXISTS (SELECT 1 FROM t) RETURNING 1
		) SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM i)`, id, retries).Scan(&n)
	if err != nil {
		return translate(err, fmt.Sprintf("setting the retries of task %d", id))
	}
	if n == 0 {
		return fmt.Errorf("task %d does not exist or is finished: %w", id, ErrNotFound)
	}
	return nil
}

// JobRetries is the retries UpdateJobRetries set on the job that failed
// into incident id (0: none set).
func (s *Store) JobRetries(ctx context.Context, id int64) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(job_retries, 0) FROM incidents WHERE id = $1`, id).Scan(&n)
	return n, translate(err, fmt.Sprintf("reading incident %d", id))
}

// Unlock ends a task's lock, whoever holds it: the task is fetchable at once.
func (s *Store) Unlock(ctx context.Context, id int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET locked_by = NULL, lock_expires_at = NULL WHERE id = $1 AND outcome IS NULL`, id)
	if err != nil {
		return translate(err, fmt.Sprintf("unlocking task %d", id))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("task %d: %w", id, ErrNotFound)
	}
	return nil
}

// whyNotHeld tells a missing or finished task from one the worker does not
// hold.
func (s *Store) whyNotHeld(ctx context.Context, id int64, worker string) error {
	var holder *string
	var expired, finished bool
	err := s.pool.QueryRow(ctx, `SELECT locked_by, COALESCE(lock_expires_at < now(), false), outcome IS NOT NULL FROM tasks WHERE id = $1`, id).
		Scan(&holder, &expired, &finished)
	switch {
	case errors.Is(err, pgx.ErrNoRows), err == nil && finished:
		return fmt.Errorf("task %d does not exist or is finished: %w", id, ErrNotFound)
	case err != nil:
		return translate(err, fmt.Sprintf("looking up task %d", id))
	case holder == nil:
		return &LockError{TaskID: id, Worker: worker}
	}
	return &LockError{TaskID: id, Worker: worker, Holder: *holder, Expired: *holder == worker && expired}
}

// CountFetchable tells, for each of asks, how many tasks a fetch of it would
// lock now, counting up to limits[i] (each ask's lock duration is unused).
// One statement for all the asks, which is how waiting long polls look for
// tasks: what they cost PostgreSQL does not grow with their number.
func (s *Store) CountFetchable(ctx context.Context, asks []TopicLock, limits []int) ([]int, error) {
	names, keys := make([]string, len(asks)), make([]string, len(asks))
	for i, a := range asks {
		names[i], keys[i] = a.Topic, strings.Join(a.DefinitionKeys, "\x1f")
	}
	rows, err := s.pool.Query(ctx, `SELECT (SELECT count(*) FROM (
			SELECT 1 FROM tasks t
			 WHERE t.type = w.topic AND t.outcome IS NULL
			   AND (t.locked_by IS NULL OR t.lock_expires_at < now())
			   AND (t.not_before IS NULL OR t.not_before <= now())
			   AND (w.keys = '' OR EXISTS (SELECT 1 FROM instances i WHERE i.id = t.instance_id
			                                 AND i.definition_key = ANY (string_to_array(w.keys, chr(31)))))
			 LIMIT w.n) x)::int
		FROM unnest($1::text[], $2::text[], $3::int[]) WITH ORDINALITY AS w(topic, keys, n, ord)
		ORDER BY w.ord`, names, keys, limits)
	if err != nil {
		return nil, translate(err, "looking for tasks to fetch")
	}
	counts, err := pgx.CollectRows(rows, pgx.RowTo[int])
	return counts, translate(err, "looking for tasks to fetch")
}
