-- Deployed DMN decisions (issue 26), versioned by decision id as processes
-- are by process id. A DRD file may hold several decisions: each row names
-- the file it came from by checksum (deployed_files now holds DMN files
-- too), so that a redeploy of the same file is a no-op, and the file is
-- what a step evaluates, its required decisions included.
CREATE TABLE decisions (
    decision_id  text        NOT NULL,
    version      integer     NOT NULL,
    checksum     text        NOT NULL REFERENCES deployed_files (checksum),
    name         text        NOT NULL,
    -- The decision's zeebe:versionTag, for bindingType versionTag.
    version_tag  text,
    deployed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (decision_id, version),
    UNIQUE (decision_id, checksum)
);

CREATE INDEX decisions_version_tag ON decisions (decision_id, version_tag, version) WHERE version_tag IS NOT NULL;
