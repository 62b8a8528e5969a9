-- A deployed file is stored once (issue 23): definitions name their file by
-- its checksum (the SHA-256 of the whole file, which they carried already)
-- instead of each holding a copy of it. A file of 300 processes was stored
-- 300 times (a 317 KB file took 94 MB).
CREATE TABLE deployed_files (
    checksum    text        PRIMARY KEY,
    xml         text        NOT NULL,
    deployed_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO deployed_files (checksum, xml, deployed_at)
SELECT DISTINCT ON (checksum) checksum, xml, deployed_at FROM definitions ORDER BY checksum, deployed_at;

-- The dropped column's bytes stay on disk until the table is rewritten
-- (VACUUM FULL definitions, at a quiet moment).
ALTER TABLE definitions
    DROP COLUMN xml,
    ADD CONSTRAINT definitions_file FOREIGN KEY (checksum) REFERENCES deployed_files (checksum);
