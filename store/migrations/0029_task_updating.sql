-- User task updates (issue 26): an update through /v1 of a user task with
-- updating listeners is recorded on its row as the outcome 'update' (the
-- task is updating: no assignment, other update nor completion is taken)
-- with the relay that runs the listeners' jobs; the step that applies it
-- changes the task and clears the outcome.
ALTER TABLE tasks DROP CONSTRAINT tasks_outcome_check,
    ADD CONSTRAINT tasks_outcome_check CHECK (outcome IN ('completed', 'failed', 'bpmn_error', 'assign', 'update'));
