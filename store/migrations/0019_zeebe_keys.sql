-- Keys for Zeebe clients (issue 25): every definition, instance, task (a
-- Zeebe job), incident and buffered message has a stable int64 key, never
-- reused, drawn from one sequence so that a key names one thing whatever
-- RPC carries it. The sequence starts in Zeebe's key space of partition 1
-- (1 << 51), where a Zeebe client expects the keys of a one-partition
-- cluster; today's ids (instance ids, definition key + version) do not
-- change.
--
-- Tasks, incidents and buffered messages already have int64 ids: their new
-- rows take them from the shared sequence, so their id is their key (rows
-- from before keep their small ids, below the sequence's start, so still
-- unique). Definitions and instances gain a key column.
CREATE SEQUENCE sutra_keys START WITH 2251799813685249;

ALTER TABLE tasks ALTER COLUMN id SET DEFAULT nextval('sutra_keys');
ALTER TABLE incidents ALTER COLUMN id SET DEFAULT nextval('sutra_keys');
ALTER TABLE buffered_messages ALTER COLUMN id SET DEFAULT nextval('sutra_keys');

ALTER TABLE definitions ADD COLUMN zeebe_key bigint NOT NULL DEFAULT nextval('sutra_keys');
CREATE UNIQUE INDEX definitions_zeebe_key ON definitions (zeebe_key);

ALTER TABLE instances ADD COLUMN zeebe_key bigint NOT NULL DEFAULT nextval('sutra_keys');
CREATE UNIQUE INDEX instances_zeebe_key ON instances (zeebe_key);
