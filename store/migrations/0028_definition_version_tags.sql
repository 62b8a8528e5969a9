-- A process's zeebe:versionTag (issue 26), for call activities with
-- bindingType versionTag: they call the latest version of the called
-- process carrying the tag. Versions deployed before this migration carry
-- none until their file is deployed again.
ALTER TABLE definitions ADD COLUMN version_tag text;

CREATE INDEX definitions_version_tag ON definitions (key, version_tag, version) WHERE version_tag IS NOT NULL;
