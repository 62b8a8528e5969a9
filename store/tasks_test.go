package store_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sutra-run/worker/store"
)

func TestFetchAndLockTakesTasksAcrossTopicsInOrderAndOnlyOpenOnesOfTheAskedDefinitions(t *testing.T) {
	env, ctx, st := open(t)
	for _, sql := range []string{
		`INSERT INTO deployed_files (checksum, xml) VALUES ('x', ''); INSERT INTO definitions (key, version, checksum) VALUES ('p', 1, 'x'), ('q', 1, 'x')`,
		`INSERT INTO instances (id, definition_key, definition_version, status, version) VALUES
			('a1', 'p', 1, 'active', 1), ('a2', 'p', 1, 'active', 1), ('a3', 'p', 1, 'active', 1),
			('a4', 'p', 1, 'active', 1), ('a5', 'p', 1, 'active', 1), ('b1', 'q', 1, 'active', 1), ('b2', 'q', 1, 'active', 1)`,
		// In id order: a1 ship, b1 bill (priority 5), a2 ship (priority 9),
		// a3 bill, b2 ship, then a4's held by another worker and a5's kept
		// back by a retry timeout.
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries, priority) VALUES
			('a1', 't', 'e', 'ship', 3, 0), ('b1', 't', 'e', 'bill', 3, 5), ('a2', 't', 'e', 'ship', 3, 9),
			('a3', 't', 'e', 'bill', 3, 0), ('b2', 't', 'e', 'ship', 3, 0)`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries, locked_by, lock_expires_at)
			VALUES ('a4', 't', 'e', 'ship', 3, 'other', now() + interval '1 hour')`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries, not_before)
			VALUES ('a5', 't', 'e', 'ship', 3, now() + interval '1 hour')`,
	} {
		if _, err := env.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	both := []store.TopicLock{{Topic: "ship", LockDuration: time.Minute}, {Topic: "bill", LockDuration: time.Minute}}
	fetch := func(topics []store.TopicLock, max int, byPriority bool) []string {
		t.Helper()
		got, err := st.FetchAndLock(ctx, "w", topics, max, byPriority)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, task := range got {
			ids = append(ids, task.InstanceID)
		}
		// Each fetch starts from nothing locked to w.
		if _, err := env.DB.Exec(ctx, `UPDATE tasks SET locked_by = NULL, lock_expires_at = NULL WHERE locked_by = 'w'`); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	for _, tt := range []struct {
		name       string
		topics     []store.TopicLock
		max        int
		byPriority bool
		want       []string
	}{
		{"oldest first across topics", both, 3, false, []string{"a1", "b1", "a2"}},
		{"highest priority first across topics", both, 2, true, []string{"a2", "b1"}},
		{"then oldest", both, 4, true, []string{"a2", "b1", "a1", "a3"}},
		{"every open task and no other", both, 10, false, []string{"a1", "b1", "a2", "a3", "b2"}},
		{"of the asked definitions only", []store.TopicLock{{Topic: "ship", LockDuration: time.Minute, DefinitionKeys: []string{"q"}}}, 10, false, []string{"b2"}},
		{"one topic", []store.TopicLock{{Topic: "bill", LockDuration: time.Minute}}, 10, true, []string{"b1", "a3"}},
	} {
		if got := fetch(tt.topics, tt.max, tt.byPriority); !slices.Equal(got, tt.want) {
			t.Errorf("%s: locked the tasks of %v, want %v", tt.name, got, tt.want)
		}
	}

	// The long polls' look counts what each of these asks would lock, up to
	// its limit, in one statement.
	asks := []store.TopicLock{{Topic: "ship"}, {Topic: "ship"}, {Topic: "ship", DefinitionKeys: []string{"q"}},
		{Topic: "ship", DefinitionKeys: []string{"nope"}}, {Topic: "bill", DefinitionKeys: []string{"p", "q"}}, {Topic: "none"}}
	counts, err := st.CountFetchable(ctx, asks, []int{10, 2, 10, 10, 10, 10})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{3, 2, 1, 0, 2, 0}; !slices.Equal(counts, want) {
		t.Errorf("counted %v tasks to fetch, want %v", counts, want)
	}
}

// A recorded outcome returns the relay it queued, and the step that applies
// that relay marks its outbox row published, so that it is never sent,
// unless a publisher leased it first: then the row is the publisher's.
func TestAStepApplyingAnOutcomesRelayMarksItsOutboxRowPublishedUnlessLeased(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	for _, sql := range []string{
		`INSERT INTO deployed_files (checksum, xml) VALUES ('x', ''); INSERT INTO definitions (key, version, checksum) VALUES ('p', 1, 'x')`,
		`INSERT INTO instances (id, definition_key, definition_version, status, version) VALUES ('a', 'p', 1, 'active', 1), ('b', 'p', 1, 'active', 1)`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries) VALUES ('a', 't', 'e', 'ship', 3), ('b', 't', 'e', 'ship', 3)`,
	} {
		if _, err := env.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	locked, err := st.FetchAndLock(ctx, "w", []store.TopicLock{{Topic: "ship", LockDuration: time.Minute}}, 2, false)
	if err != nil || len(locked) != 2 {
		t.Fatalf("locked %v, %v", locked, err)
	}
	var relays []store.RelayOut
	for _, task := range locked {
		rec, err := st.RecordOutcome(ctx, store.TaskReport{TaskID: task.ID, Worker: "w", Kind: store.TaskCompleted})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("task:%d:1", task.ID); rec.Topic != "ship" || rec.Relay.ID != want || rec.Relay.InstanceID != task.InstanceID ||
			rec.Relay.RoutingKey != "task" || !bytes.Contains(rec.Relay.Body, []byte(`"outcome" : "completed"`)) {
			t.Fatalf("recorded %+v (body %s), want topic ship and relay %s of %s", rec, rec.Relay.Body, want, task.InstanceID)
		}
		relays = append(relays, rec.Relay)
	}
	// The publisher leases the first row only (commit order).
	if rows, err := st.LeaseOutbox(ctx, "pub", 1, time.Minute); err != nil || len(rows) != 1 || rows[0].ID != relays[0].ID {
		t.Fatalf("leased %v, %v; want %s", rows, err, relays[0].ID)
	}
	for _, r := range relays {
		inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: r.InstanceID, Owner: "r/lane/0", Timeout: time.Minute, InboxID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteStep(ctx, store.StepWrites{InstanceID: inst.ID, Owner: "r/lane/0", Version: inst.Version, State: inst.State,
			InboxID: r.ID, FromOutbox: true}); err != nil {
			t.Fatal(err)
		}
	}
	if n := env.Int(t, "SELECT count(*) FROM outbox WHERE id = $1 AND published_at IS NULL AND locked_by = 'pub'", relays[0].ID); n != 1 {
		t.Error("the step took the leased row from its publisher")
	}
	if n := env.Int(t, "SELECT count(*) FROM outbox WHERE id = $1 AND published_at IS NOT NULL AND locked_by IS NULL", relays[1].ID); n != 1 {
		t.Error("the row no publisher held is not marked published by the step that applied it")
	}
	if rows, err := st.LeaseOutbox(ctx, "pub2", 10, time.Minute); err != nil || len(rows) != 0 {
		t.Errorf("leased %v, %v after the steps; want nothing", rows, err)
	}
}
