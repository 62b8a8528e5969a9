-- fetchAndLock walks an index in the order it takes tasks and stops at its
-- limit (issue 8): tasks_fetchable (type, priority DESC, id) serves
-- usePriority, and tasks_fetchable_oldest serves oldest first, the default.
-- Before, the statement ordered by an expression no index has, so each fetch
-- read and sorted every open task of its topic.
CREATE INDEX tasks_fetchable_oldest ON tasks (type, id) WHERE outcome IS NULL;

-- tasks_type (type, lock_expires_at) served no statement the new index does
-- not, and it indexed lock_expires_at, which every lock and extendLock sets:
-- without it those updates change no indexed column, so with room on the
-- page (fillfactor) they are HOT, writing no index entry.
DROP INDEX tasks_type;
ALTER TABLE tasks SET (fillfactor = 80);
