-- The release and schema version each live replica runs (issue 38), beside
-- its registration (the lease "replica/<id>", which it does not change: the
-- releases before this one keep writing that lease as they did). A row is
-- the holder's, the process of that lease; a lease without a row is a
-- replica of a release before v0.2.0. A contract migration is applied only
-- when no live replica is older than it allows (docs/operations.md,
-- "Upgrading").
CREATE TABLE replica_versions (
    holder         text        PRIMARY KEY,
    replica_id     text        NOT NULL,
    release        text        NOT NULL,
    revision       text        NOT NULL,
    schema_version integer     NOT NULL,
    registered_at  timestamptz NOT NULL DEFAULT now()
);
