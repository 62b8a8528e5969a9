-- Retention by dropping partitions (issue 41), the expand step. The inbox
-- and the step history move into tables partitioned by day (UTC): the
-- sweeper, under its lease, creates each day's partition ahead and detaches
-- and drops those whose every row is past the retention, so no trim
-- deletes rows one by one (store/partitions.go, sweeper).
--
-- A replica of the release before (v0.1.0) keeps working beside this one
-- until the contract step (0036): the tables it knew are renamed
-- (*_before_days) and their names become views over the old table and the
-- partitioned one together. It reads through them as before; its inserts
-- go into the partitioned tables by INSTEAD OF triggers (its concurrent
-- duplicate still fails on a constraint named inbox_pkey); its trims delete
-- only from the old tables. This release writes into the partitioned
-- tables directly and reads through the views; the sweeper moves the old
-- tables' rows over in batches, each in one statement (a row is in one
-- table or the other at every snapshot), and the contract step drops them.

-- inbox_days: the relays applied. The unique key must hold the partition
-- key, so it is (message_id, day): a copy of a relay recorded on the same
-- day fails on it. A copy recorded the next day is caught by the insert,
-- which puts the row into yesterday's partition when the message id is
-- there (so it fails on that partition's key), and by every claim, which
-- reads all the live partitions (docs/design.md, "Retention").
CREATE TABLE inbox_days (
    message_id  text        NOT NULL,
    instance_id text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    day         date        NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')::date,
    PRIMARY KEY (message_id, day)
) PARTITION BY RANGE (day);

-- step_history_days: no unique key (a step's row is written once, by the
-- commit its fence admitted), read by instance newest first.
CREATE TABLE step_history_days (
    instance_id  text        NOT NULL,
    version      bigint      NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    cause        text        NOT NULL,
    detail       text        NOT NULL DEFAULT '',
    owner        text        NOT NULL,
    message_id   text,
    bounces      integer,
    passed       text[],
    passed_cut   boolean     NOT NULL DEFAULT false
) PARTITION BY RANGE (committed_at);
CREATE INDEX step_history_days_instance ON step_history_days (instance_id, version);

-- The trims of v0.1.0 look for old rows through the views until the
-- contract step, which drops these: a BRIN index costs a step next to
-- nothing, where a scan of every day each sweep would not.
CREATE INDEX inbox_days_received_at ON inbox_days USING brin (received_at);
CREATE INDEX step_history_days_committed_at ON step_history_days USING brin (committed_at);

-- sutra_day_partitions creates the missing partitions of parent (inbox_days
-- or step_history_days) for the days from p_from to p_to, each named
-- <parent>_YYYYMMDD, and returns how many it created. Each is created on
-- its own and then attached, which locks the parent only in SHARE UPDATE
-- EXCLUSIVE mode: steps keep writing meanwhile (CREATE TABLE ... PARTITION
-- OF would lock them out).
CREATE FUNCTION sutra_day_partitions(p_parent text, p_from date, p_to date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    d    date;
    part text;
    n    integer := 0;
BEGIN
    IF p_parent NOT IN ('inbox_days', 'step_history_days') THEN
        RAISE EXCEPTION 'sutra_day_partitions: % is not partitioned by day', p_parent;
    END IF;
    FOR d IN SELECT generate_series(p_from, p_to, interval '1 day')::date LOOP
        part := p_parent || '_' || to_char(d, 'YYYYMMDD');
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
                               WHERE c.relname = part AND s.nspname = current_schema());
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS)', part, p_parent);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       p_parent, part, d::text || ' 00:00:00+00', (d + 1)::text || ' 00:00:00+00');
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

SELECT sutra_day_partitions('inbox_days', (now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 3);
SELECT sutra_day_partitions('step_history_days', (now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 3);

-- The tables of before, under new names (their indexes and constraints
-- keep theirs: inbox_pkey, step_history_pkey), behind views of their old
-- names.
ALTER TABLE inbox RENAME TO inbox_before_days;
ALTER TABLE step_history RENAME TO step_history_before_days;

CREATE VIEW inbox AS
    SELECT message_id, instance_id, received_at FROM inbox_days
    UNION ALL
    SELECT message_id, instance_id, received_at FROM inbox_before_days;

-- ctid: v0.1.0 trims the history by ctid; the view shows the old table's
-- and none of the partitioned one's, so such a trim deletes old rows only.
CREATE VIEW step_history AS
    SELECT instance_id, version, committed_at, cause, detail, owner, message_id, bounces, passed, passed_cut, NULL::tid AS ctid
      FROM step_history_days
    UNION ALL
    SELECT instance_id, version, committed_at, cause, detail, owner, message_id, bounces, passed, passed_cut, ctid
      FROM step_history_before_days;

-- sutra_inbox_day is the day a relay's inbox row goes into: yesterday's,
-- when the message id is recorded there (the insert then fails on that
-- partition's key, as a copy recorded the same day does), else today's.
-- A step's transaction starts after the commit of any copy that claimed
-- the instance before it (the claim is released by that commit), so a
-- copy is at most one day older; older copies are refused by the claim.
CREATE FUNCTION sutra_inbox_day(p_message_id text) RETURNS date
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT day FROM inbox_days
          WHERE message_id = p_message_id AND day = (now() AT TIME ZONE 'UTC')::date - 1),
        (now() AT TIME ZONE 'UTC')::date)
$$;

-- Inserts of v0.1.0 through the views. Its commit tells a copy of a relay
-- that committed first by the constraint name inbox_pkey.
CREATE FUNCTION sutra_inbox_view_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inbox_before_days WHERE message_id = NEW.message_id) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "inbox_pkey"'
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'inbox_pkey', TABLE = 'inbox';
    END IF;
    BEGIN
        INSERT INTO inbox_days (message_id, instance_id, received_at, day)
        VALUES (NEW.message_id, NEW.instance_id, coalesce(NEW.received_at, now()), sutra_inbox_day(NEW.message_id));
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "inbox_pkey"'
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'inbox_pkey', TABLE = 'inbox';
    END;
    RETURN NEW;
END
$$;
CREATE TRIGGER inbox_insert INSTEAD OF INSERT ON inbox
    FOR EACH ROW EXECUTE FUNCTION sutra_inbox_view_insert();

-- v0.1.0's trim deletes from the old table only: the partitioned one's
-- rows go with their partition.
CREATE FUNCTION sutra_inbox_view_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM inbox_before_days WHERE message_id = OLD.message_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN OLD;
END
$$;
CREATE TRIGGER inbox_delete INSTEAD OF DELETE ON inbox
    FOR EACH ROW EXECUTE FUNCTION sutra_inbox_view_delete();

CREATE FUNCTION sutra_step_history_view_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO step_history_days (instance_id, version, committed_at, cause, detail, owner, message_id, bounces, passed, passed_cut)
    VALUES (NEW.instance_id, NEW.version, coalesce(NEW.committed_at, now()), NEW.cause, coalesce(NEW.detail, ''), NEW.owner,
            NEW.message_id, NEW.bounces, NEW.passed, coalesce(NEW.passed_cut, false));
    RETURN NEW;
END
$$;
CREATE TRIGGER step_history_insert INSTEAD OF INSERT ON step_history
    FOR EACH ROW EXECUTE FUNCTION sutra_step_history_view_insert();

CREATE FUNCTION sutra_step_history_view_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.ctid IS NULL THEN
        RETURN NULL;
    END IF;
    DELETE FROM step_history_before_days WHERE ctid = OLD.ctid;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN OLD;
END
$$;
CREATE TRIGGER step_history_delete INSTEAD OF DELETE ON step_history
    FOR EACH ROW EXECUTE FUNCTION sutra_step_history_view_delete();

-- The chained step's consumption of a buffered message (0002) records its
-- message id in the partitioned inbox; ON CONFLICT cannot reach through a
-- view.
CREATE OR REPLACE FUNCTION sutra_consume_buffered(p_id bigint, p_instance text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    mid text;
BEGIN
    DELETE FROM buffered_messages WHERE id = p_id AND expires_at > now() RETURNING message_id INTO mid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'buffered message % is gone', p_id USING ERRCODE = 'SU004';
    END IF;
    INSERT INTO inbox_days (message_id, instance_id, day)
    SELECT mid, p_instance, sutra_inbox_day(mid)
     WHERE NOT EXISTS (SELECT 1 FROM inbox_before_days WHERE message_id = mid)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'buffered message % was already applied', mid USING ERRCODE = 'SU004';
    END IF;
END
$$;
