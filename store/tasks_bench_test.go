package store_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/store"
)

// BenchmarkFetchAndLock measures one fetchAndLock of one task (maxTasks 1)
// with 256 instances each waiting on a task of the topic and the 16 oldest
// locked by other workers, as in make bench's task round trip; after each
// fetch the task is replaced by a new one, as its step would.
//
//	go test -run '^$' -bench FetchAndLock -benchtime 5000x ./store
func BenchmarkFetchAndLock(b *testing.B) {
	for _, byPriority := range []bool{false, true} {
		name := "oldest"
		if byPriority {
			name = "priority"
		}
		b.Run(name, func(b *testing.B) {
			env, ctx, st := open(b)
			for _, sql := range []string{
				`INSERT INTO deployed_files (checksum, xml) VALUES ('x', ''); INSERT INTO definitions (key, version, checksum) VALUES ('p', 1, 'x')`,
				`INSERT INTO instances (id, definition_key, definition_version, status, version)
					SELECT 'i-' || g, 'p', 1, 'active', 1 FROM generate_series(1, 256) g`,
				`INSERT INTO tasks (instance_id, token_id, element_id, type, retries)
					SELECT 'i-' || g, 't', 'work', 'work', 3 FROM generate_series(1, 256) g`,
				`UPDATE tasks SET locked_by = 'busy', lock_expires_at = now() + interval '1 hour'
					WHERE id IN (SELECT id FROM tasks ORDER BY id LIMIT 16)`,
				`ANALYZE tasks, instances`,
			} {
				if _, err := env.DB.Exec(ctx, sql); err != nil {
					b.Fatal(err)
				}
			}
			topics := []store.TopicLock{{Topic: "work", LockDuration: time.Minute}}
			b.ResetTimer()
			for range b.N {
				got, err := st.FetchAndLock(ctx, "w", topics, 1, byPriority)
				if err != nil || len(got) != 1 {
					b.Fatalf("locked %v, %v", got, err)
				}
				b.StopTimer()
				if _, err := env.DB.Exec(ctx, `WITH d AS (DELETE FROM tasks WHERE id = $1 RETURNING instance_id)
					INSERT INTO tasks (instance_id, token_id, element_id, type, retries) SELECT instance_id, 't', 'work', 'work', 3 FROM d`, got[0].ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRecordOutcome measures one complete of a locked task (the
// outcome and its relay's outbox row, one durable transaction), with b.N
// tasks locked beforehand.
//
//	go test -run '^$' -bench RecordOutcome -benchtime 3000x ./store
func BenchmarkRecordOutcome(b *testing.B) {
	env, ctx, st := open(b)
	for _, sql := range []string{
		`INSERT INTO deployed_files (checksum, xml) VALUES ('x', ''); INSERT INTO definitions (key, version, checksum) VALUES ('p', 1, 'x')`,
		`INSERT INTO instances (id, definition_key, definition_version, status, version)
			SELECT 'i-' || g, 'p', 1, 'active', 1 FROM generate_series(1, 256) g`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries, locked_by, lock_expires_at)
			SELECT 'i-' || (g % 256), 't-' || g, 'work', 'work', 3, 'w', now() + interval '1 hour' FROM generate_series(1, ` + strconv.Itoa(b.N) + `) g`,
		`ANALYZE tasks, instances`,
	} {
		if _, err := env.DB.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	rows, _ := env.DB.Query(ctx, `SELECT id FROM tasks ORDER BY id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		b.Fatal(err)
	}
	pg := postgresCPU(b)
	b.ResetTimer()
	for i, id := range ids {
		if _, err := st.RecordOutcome(ctx, store.TaskReport{TaskID: id, Worker: "w", Kind: store.TaskCompleted,
			Variables: map[string]any{"n": i}}); err != nil {
			b.Fatal(err)
		}
	}
	reportPostgresCPU(b, pg)
}
