-- The batch ceiling: issue 10's batched protocol priced by itself, with no
-- broker, no Go and no engine. Each transaction of this script is N ping
-- relays' steps: N instances claimed in one statement, then the N steps
-- committed in one transaction (one round trip, one WAL flush) with
-- set-based statements that mirror ceiling.sql's commit, one step per
-- instance. Run by bench/load as
--   pgbench -n -M prepared -f batch.sql -c C -j J -T S -D instances=K -D clients=C -D batch=N -D timeout=30s
-- with PGOPTIONS naming the run's schema and synchronous_commit=off for the
-- claim (the commit turns it back on). Steps/s is pgbench's tps times N.
--
-- Client c takes N of its instances (i % C = c) at a time, so clients never
-- collide and K >= C * N.
\set n random(0, :instances / (:clients * :batch) - 1)
\set base :client_id + :clients * :n * :batch
-- The first of the batch's N relay message ids (the others follow it).
\set mid random(1, 9000000000000000000)

-- The batch claim: each row still free, stale or ours, and its relay not yet
-- in the inbox; claim and load in one statement, as store.Claim does for one.
WITH r AS (
	SELECT (:base::int + :clients::int * j)::text AS id, (:mid::bigint + j)::text AS mid
	  FROM generate_series(0, :batch::int - 1) AS j
), l AS (
	SELECT i.id, r.mid, i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version
	  FROM instances i JOIN r ON r.id = i.id
	 WHERE i.version > 0 AND NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = r.mid)
	 ORDER BY i.id FOR NO KEY UPDATE OF i
), c AS (
	INSERT INTO claims AS c (instance_id, owner, claimed_at) SELECT id, :client_id, now() FROM l
	ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at
	 WHERE c.owner = EXCLUDED.owner OR c.claimed_at < now() - :timeout::interval
	RETURNING c.instance_id
), claimed AS (
	SELECT l.* FROM l JOIN c ON c.instance_id = l.id
)
SELECT array_agg(id ORDER BY id) AS ids, array_agg(mid ORDER BY id) AS mids, array_agg(status ORDER BY id) AS statuses,
       array_agg(variables ORDER BY id) AS variables, array_agg(version ORDER BY id) AS versions
  FROM claimed \gset

-- The engine's steps: token t<version> of each instance leaves its wait and
-- parks again as t<version+1>.

-- The batch commit: one pipeline, one implicit transaction. Each statement
-- covers the N steps; the fence deletes each step's claims row (owner) and
-- updates its instance at its version, so a row whose claim was lost would
-- be left out.
\startpipeline
SELECT set_config('synchronous_commit', 'on', true);
WITH u AS (SELECT * FROM unnest(:ids::text[], :statuses::text[], :variables::jsonb[], :versions::bigint[]) AS u(id, status, variables, version)),
     l AS (SELECT i.id FROM instances i JOIN u ON u.id = i.id AND i.version = u.version ORDER BY i.id FOR NO KEY UPDATE OF i),
     k AS (DELETE FROM claims k USING l WHERE k.instance_id = l.id AND k.owner = :client_id::text RETURNING k.instance_id)
UPDATE instances i
   SET status = u.status, variables = u.variables,
       tokens = ('{"tokens":[{"id":"t' || (u.version + 1) || '","el":"Catch","flow":"Flow_Loop","wait":"message","armed":[{"el":"Catch","key":"' || u.id || '"}]}],"seq":' || (u.version + 1) || '}')::jsonb,
       version = i.version + 1, updated_at = now()
  FROM u JOIN k ON k.instance_id = u.id
 WHERE i.id = u.id AND i.version = u.version;
DELETE FROM subscriptions t USING unnest(:ids::text[], :versions::bigint[]) AS w(id, version)
	WHERE t.instance_id = w.id AND t.token_id = 't' || w.version;
DELETE FROM timers t USING unnest(:ids::text[], :versions::bigint[]) AS w(id, version)
	WHERE t.instance_id = w.id AND t.token_id = 't' || w.version;
DELETE FROM tasks t USING unnest(:ids::text[], :versions::bigint[]) AS w(id, version)
	WHERE t.instance_id = w.id AND t.token_id = 't' || w.version;
INSERT INTO subscriptions (instance_id, token_id, element_id, message_name, correlation_key)
	SELECT w.id, 't' || (w.version + 1), 'Catch', 'ping', w.id FROM unnest(:ids::text[], :versions::bigint[]) AS w(id, version);
INSERT INTO inbox_days (message_id, instance_id, day) SELECT m, i, sutra_inbox_day(m) FROM unnest(:mids::text[], :ids::text[]) AS r(m, i);
-- The look for buffered messages (store.bufferedLocksSQL and bufferedLookSQL):
-- the keys' locks, then, in a statement of its own, the look.
SELECT pg_advisory_xact_lock(7401, k.h)
  FROM (SELECT DISTINCT hashtext(s.message_name || chr(31) || s.correlation_key) AS h
          FROM subscriptions s JOIN unnest(:ids::text[], :versions::bigint[]) AS w(id, version)
            ON s.instance_id = w.id AND s.token_id = 't' || (w.version + 1) AND s.element_id = 'Catch'
         ORDER BY 1 OFFSET 0) k;
SELECT sutra_buffered_found(m.id, m.message_id, m.message_name, m.correlation_key, m.variables)
  FROM (SELECT b.id, b.message_id, b.message_name, b.correlation_key, b.variables
          FROM subscriptions s JOIN unnest(:ids::text[], :versions::bigint[]) AS w(id, version)
                 ON s.instance_id = w.id AND s.token_id = 't' || (w.version + 1) AND s.element_id = 'Catch'
          JOIN buffered_messages b
                 ON b.message_name = s.message_name AND b.correlation_key = s.correlation_key
                AND b.expires_at > now() AND b.start_definition IS NULL
         WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = b.message_id)
         ORDER BY b.id LIMIT 1) m;
\endpipeline
