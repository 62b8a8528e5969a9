package store_test

import (
	"maps"
	"testing"
	"time"
)

func TestCensusCountsWhatTheHoldersGaugesReport(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	empty, err := st.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if empty.OldestClaim != 0 || empty.OutboxBacklog != 0 || empty.IncidentsOpen != 0 || len(empty.TasksOpen) != 0 {
		t.Fatalf("census of an empty schema: %+v", empty)
	}
	for _, sql := range []string{
		`INSERT INTO deployed_files (checksum, xml) VALUES ('x', ''); INSERT INTO definitions (key, version, checksum) VALUES ('p', 1, 'x')`,
		`INSERT INTO instances (id, definition_key, definition_version, status, version, updated_at) VALUES
			('held', 'p', 1, 'active', 1, now()), ('young', 'p', 1, 'active', 1, now()),
			('free', 'p', 1, 'active', 1, now() - interval '1 hour')`,
		`INSERT INTO claims (instance_id, owner, claimed_at) VALUES
			('held', 'r/lane/0', now() - interval '40 seconds'), ('young', 'r/lane/1', now())`,
		`INSERT INTO incidents (instance_id, token_id, element_id, code, message, resolved_at) VALUES
			('held', 't1', 'e', 'c', 'm', NULL), ('held', 't2', 'e', 'c', 'm', now())`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries) VALUES
			('held', 't1', 'a', 'ship', 3), ('held', 't2', 'a', 'ship', 3), ('young', 't1', 'b', 'bill', 3)`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries, outcome) VALUES ('young', 't2', 'b', 'bill', 3, 'completed')`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries, user_task) VALUES ('young', 't3', 'c', '', 3, true)`,
		`INSERT INTO outbox (id, instance_id, message_name) VALUES ('o1', 'held', 'm')`,
		`INSERT INTO outbox (id, instance_id, message_name, published_at) VALUES ('o2', 'held', 'm', now())`,
	} {
		if _, err := env.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	c, err := st.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.OldestClaim < 40*time.Second || c.OldestClaim > 10*time.Minute {
		t.Errorf("oldest claim %v, want the held one's 40s (a free row's age does not count)", c.OldestClaim)
	}
	if c.IncidentsOpen != 1 || c.OutboxBacklog != 1 {
		t.Errorf("incidents open %d, backlog %d; want 1 and 1", c.IncidentsOpen, c.OutboxBacklog)
	}
	if want := map[string]int64{"ship": 2, "bill": 1}; !maps.Equal(c.TasksOpen, want) {
		t.Errorf("tasks open %v, want %v (an outcome recorded or a user task does not count)", c.TasksOpen, want)
	}
}
