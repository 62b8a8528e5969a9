-- User task listeners (issue 26): an assignment through /v1 of a user task
-- with assigning listeners is recorded on its row as the outcome 'assign'
-- (the task is assigning: no other assignment nor completion is taken)
-- with the relay that runs the listeners' jobs; the step that applies it
-- sets the assignee and clears the outcome.
ALTER TABLE tasks DROP CONSTRAINT tasks_outcome_check,
    ADD CONSTRAINT tasks_outcome_check CHECK (outcome IN ('completed', 'failed', 'bpmn_error', 'assign'));
