-- Retention by dropping partitions (issue 41), the contract step of 0034:
-- once no replica of before schema 34 runs (v0.1.0 registers none), the
-- tables of before the partitioning go. The sweeper has moved their rows
-- over by then, but for a batch or two; what is left moves here, into the
-- partitions of its days (the sweeper drops those past the retention). The
-- views inbox and step_history stay, over the partitioned tables alone:
-- the releases from 0034 on read through them.
-- sutra:contract min-schema=34
SELECT sutra_day_partitions('inbox_days',
    (SELECT min(received_at AT TIME ZONE 'UTC')::date FROM inbox_before_days), (now() AT TIME ZONE 'UTC')::date);
INSERT INTO inbox_days (message_id, instance_id, received_at, day)
SELECT message_id, instance_id, received_at, (received_at AT TIME ZONE 'UTC')::date FROM inbox_before_days
ON CONFLICT DO NOTHING;

SELECT sutra_day_partitions('step_history_days',
    (SELECT min(committed_at AT TIME ZONE 'UTC')::date FROM step_history_before_days), (now() AT TIME ZONE 'UTC')::date);
INSERT INTO step_history_days (instance_id, version, committed_at, cause, detail, owner, message_id, bounces, passed, passed_cut)
SELECT instance_id, version, committed_at, cause, detail, owner, message_id, bounces, passed, passed_cut FROM step_history_before_days;

-- Only the replicas of before wrote through the views and trimmed.
DROP INDEX inbox_days_received_at;
DROP INDEX step_history_days_committed_at;
DROP TRIGGER inbox_insert ON inbox;
DROP TRIGGER inbox_delete ON inbox;
DROP TRIGGER step_history_insert ON step_history;
DROP TRIGGER step_history_delete ON step_history;
DROP FUNCTION sutra_inbox_view_insert(), sutra_inbox_view_delete(),
    sutra_step_history_view_insert(), sutra_step_history_view_delete();

CREATE OR REPLACE VIEW inbox AS SELECT message_id, instance_id, received_at FROM inbox_days;
DROP VIEW step_history;
CREATE VIEW step_history AS
    SELECT instance_id, version, committed_at, cause, detail, owner, message_id, bounces, passed, passed_cut
      FROM step_history_days;

CREATE OR REPLACE FUNCTION sutra_consume_buffered(p_id bigint, p_instance text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    mid text;
BEGIN
    DELETE FROM buffered_messages WHERE id = p_id AND expires_at > now() RETURNING message_id INTO mid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'buffered message % is gone', p_id USING ERRCODE = 'SU004';
    END IF;
    INSERT INTO inbox_days (message_id, instance_id, day) VALUES (mid, p_instance, sutra_inbox_day(mid))
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'buffered message % was already applied', mid USING ERRCODE = 'SU004';
    END IF;
END
$$;

DROP TABLE inbox_before_days;
DROP TABLE step_history_before_days;
