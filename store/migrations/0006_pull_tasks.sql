-- Pull tasks over HTTP (issue 8): the Camunda 7 external-task protocol.
--
-- A task row is created by the step that parks its token and deleted by the
-- step that resumes it. Between the two, workers lock it (locked_by,
-- lock_expires_at) and report an outcome. The outcome is recorded here, fenced
-- on the lock holder, in the same transaction as the outbox row that carries
-- it to the step pipeline as a relay; a task with an outcome is finished for
-- the API while its step is on the way.
ALTER TABLE tasks
    ADD COLUMN priority      integer NOT NULL DEFAULT 0,
    -- a failed task with retries left is kept from its workers until then
    ADD COLUMN not_before    timestamptz,
    -- the reported outcome (completed, failed, bpmn_error) until the step
    -- applies it; outcomes counts the outcomes recorded for this row, so that
    -- each one's relay has its own message id
    ADD COLUMN outcome       text CHECK (outcome IN ('completed', 'failed', 'bpmn_error')),
    ADD COLUMN outcomes      integer NOT NULL DEFAULT 0,
    ADD COLUMN error_message text,
    ADD COLUMN error_details text;

-- fetchAndLock: one topic, open tasks, oldest (or highest priority) first.
CREATE INDEX tasks_fetchable ON tasks (type, priority DESC, id) WHERE outcome IS NULL;
