-- The ceiling: one ping relay's SQL as the worker runs it (store.Claim, then
-- store.CommitStep with the effects the engine produces for bench/ping.bpmn),
-- with no broker, no Go and no engine. Run by bench/load as
--   pgbench -n -M prepared -f ceiling.sql -c C -j J -T S -D instances=K -D clients=C -D timeout=30s
-- with PGOPTIONS naming the run's schema and, like the worker's pool,
-- synchronous_commit=off for the claim (the commit turns it back on).
--
-- Client c only takes instances i with i % C = c, so clients never collide on
-- a claim (the claim would then match nothing and \gset would abort the client).
\set n random(0, :instances / :clients - 1)
\set i :client_id + :clients * :n
-- The relay's message id, which the claim checks against the inbox and the
-- commit records there.
\set mid random(1, 9223372036854775806)

-- store.Claim: claim and load in one statement (claimSQL, verbatim but for
-- the owner, which is the client number here).
WITH i AS (
	SELECT i.id, i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version
	  FROM instances i
	 WHERE i.id = :i AND i.version > 0 AND NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = :mid)
	   FOR NO KEY UPDATE
), c AS (
	INSERT INTO claims AS c (instance_id, owner, claimed_at) SELECT id, :client_id, now() FROM i
	ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at
	 WHERE c.owner = EXCLUDED.owner OR c.claimed_at < now() - :timeout::interval
	RETURNING c.instance_id
)
SELECT i.definition_key, i.definition_version, i.status, i.variables, i.tokens, i.version
  FROM i JOIN c ON c.instance_id = i.id \gset

-- The engine's step: token t<version> leaves its wait and parks again as
-- t<version+1> (the token sequence advances by one per step, as the version does).
\set next :version + 1

-- store.CommitStep: one pipeline, one implicit transaction, one round trip.
-- The array and JSON parameters the worker binds are built here from the
-- variables above.
\startpipeline
SELECT sutra_commit(:i, :client_id, :version, :status, :variables,
	('{"tokens":[{"id":"t' || :next || '","el":"Catch","flow":"Flow_Loop","wait":"message","armed":[{"el":"Catch","key":"' || :i || '"}]}],"seq":' || :next || '}')::jsonb);
DELETE FROM subscriptions t USING unnest(ARRAY['t' || :version]::text[], ARRAY['']::text[]) AS w(tok, el)
	WHERE t.instance_id = :i AND t.token_id = w.tok AND (w.el = '' OR t.element_id = w.el);
DELETE FROM timers t USING unnest(ARRAY['t' || :version]::text[], ARRAY['']::text[]) AS w(tok, el)
	WHERE t.instance_id = :i AND t.token_id = w.tok AND (w.el = '' OR t.element_id = w.el);
DELETE FROM tasks t USING unnest(ARRAY['t' || :version]::text[], ARRAY['']::text[]) AS w(tok, el)
	WHERE t.instance_id = :i AND t.token_id = w.tok AND (w.el = '' OR t.element_id = w.el);
INSERT INTO subscriptions (instance_id, token_id, element_id, message_name, correlation_key)
	SELECT :i, * FROM unnest(ARRAY['t' || :next]::text[], ARRAY['Catch']::text[], ARRAY['ping']::text[], ARRAY[:i]::text[]);
INSERT INTO inbox_days (message_id, instance_id, day) VALUES (:mid, :i, sutra_inbox_day(:mid));
SELECT sutra_buffered_match(:i, ARRAY['t' || :next]::text[], ARRAY['Catch']::text[]);
\endpipeline
