-- Keys for Zeebe clients of deployed decisions (issue 25, after 0019):
-- each decision version has a decisionKey, and each deployed file a key
-- that names it as a decision requirements graph (a DMN file) for
-- decisionRequirementsKey; a BPMN file's key is unused.
ALTER TABLE decisions ADD COLUMN zeebe_key bigint NOT NULL DEFAULT nextval('sutra_keys');
CREATE UNIQUE INDEX decisions_zeebe_key ON decisions (zeebe_key);

ALTER TABLE deployed_files ADD COLUMN zeebe_key bigint NOT NULL DEFAULT nextval('sutra_keys');
