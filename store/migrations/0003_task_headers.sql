-- zeebe:taskHeaders of a pull task, handed to the worker that fetches it.
ALTER TABLE tasks ADD COLUMN headers jsonb NOT NULL DEFAULT '{}';
