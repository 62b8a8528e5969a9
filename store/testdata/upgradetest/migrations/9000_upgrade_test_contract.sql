-- The upgrade test's contract step (make test-upgrade; compiled in only
-- with -tags upgradetest): it must wait until no replica of before schema
-- 32 (v0.1.0 registers none) runs. What it writes tells the test when it
-- was applied.
-- sutra:contract min-schema=32
CREATE TABLE upgrade_test_contract (applied_at timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO upgrade_test_contract DEFAULT VALUES;
