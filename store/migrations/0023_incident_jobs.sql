-- A Zeebe job that fails with no retries left stops in an incident and its
-- task row is gone; Zeebe clients then set its retries by the job's key
-- (UpdateJobRetries) and resolve the incident (issue 25). job_key is the
-- failed task's id (its job key), set when a task outcome's step opens a
-- SUTRA.INCIDENT.TASK_FAILED incident; job_retries is what UpdateJobRetries
-- set meanwhile, the retries of the task the incident's retry creates.
ALTER TABLE incidents ADD COLUMN job_key bigint, ADD COLUMN job_retries integer;
CREATE INDEX incidents_job_key ON incidents (job_key) WHERE job_key IS NOT NULL;
