-- The probes of one instance's unpublished outbox rows (a commit leasing the
-- rows it writes to its replica's publisher, the lease's order checks) must
-- read outbox_instance_unpublished. outbox_unpublished (seq) served them too,
-- as a scan of every unpublished row filtered by instance: a generic plan
-- made while few rows were unpublished kept doing that through a backlog (a
-- broker outage), on every commit that writes a message. Its predicate now
-- also says seq > 0 (true of every row), which only the lease's walk in seq
-- order states, so no probe can use it.
--
-- During a rollout, replicas of the previous build lease without seq > 0:
-- their lease walks outbox_seq instead, more slowly, until they are replaced.
DROP INDEX outbox_unpublished;
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL AND seq > 0;
