package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// dbToday is the database's day (UTC), the day a step's rows go into.
func dbToday(t *testing.T, env *testkit.Env) time.Time {
	t.Helper()
	var d time.Time
	if err := env.DB.QueryRow(testkit.Ctx(t), "SELECT (now() AT TIME ZONE 'UTC')::date").Scan(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// partitionDays lists the days table t has a partition of, oldest first.
func partitionDays(t *testing.T, env *testkit.Env, table string) []string {
	t.Helper()
	rows, err := env.DB.Query(testkit.Ctx(t), `SELECT right(c.relname, 8) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	days, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return days
}

func daysFrom(from time.Time, n int) []string {
	var days []string
	for i := range n {
		days = append(days, from.AddDate(0, 0, i).Format("20060102"))
	}
	return days
}

// The sweeper's clock says which days are past the retention, the
// database's which are live: today's (steps write into it) and yesterday's
// (sutra_inbox_day looks there) are never dropped, nor the days ahead,
// whatever the clock says.
func TestPartitionsAreCreatedAheadAndDroppedPastTheRetentionNeverALiveOne(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	today := dbToday(t, env)
	for _, table := range []store.DayTable{store.InboxDays, store.StepHistoryDays} {
		t.Run(table.Name, func(t *testing.T) {
			// A sweeper whose clock is ten days behind creates from its day
			// less the retention to the database's today and three ahead.
			if _, err := st.EnsurePartitions(ctx, table, today.AddDate(0, 0, -10), 72*time.Hour, 3); err != nil {
				t.Fatal(err)
			}
			if got, want := partitionDays(t, env, table.Name), daysFrom(today.AddDate(0, 0, -13), 17); !slices.Equal(got, want) {
				t.Fatalf("partitions %v, want %v", got, want)
			}
			if n, err := st.EnsurePartitions(ctx, table, today.AddDate(0, 0, -10), 72*time.Hour, 3); err != nil || n != 0 {
				t.Fatalf("ensuring again created %d (%v), want none", n, err)
			}
			// At noon of today, 72h back is noon three days ago: the days that
			// ended by then go, that day itself stays.
			noon := today.Add(12 * time.Hour)
			dropped, err := st.DropPartitions(ctx, table, noon, 72*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if want := daysFrom(today.AddDate(0, 0, -13), 10); len(dropped) != len(want) {
				t.Fatalf("dropped %v, want the days %v", dropped, want)
			}
			if got, want := partitionDays(t, env, table.Name), daysFrom(today.AddDate(0, 0, -3), 7); !slices.Equal(got, want) {
				t.Fatalf("after the drop partitions %v, want %v", got, want)
			}
			// A clock a month ahead would drop everything: today's and
			// yesterday's stay, and the days ahead.
			if _, err := st.DropPartitions(ctx, table, today.AddDate(0, 1, 0), 72*time.Hour); err != nil {
				t.Fatal(err)
			}
			if got, want := partitionDays(t, env, table.Name), daysFrom(today.AddDate(0, 0, -1), 5); !slices.Equal(got, want) {
				t.Fatalf("with a clock a month ahead partitions %v, want %v", got, want)
			}
		})
	}
	// The steps still write.
	if err := st.Forward(ctx, "after-drop", "o-1", nil); err != nil {
		t.Fatal(err)
	}
}

// A drop interrupted between the detach and the drop (or within DETACH
// ... CONCURRENTLY) is finished by the next.
func TestAnInterruptedDropIsFinishedByTheNext(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	today := dbToday(t, env)
	if _, err := st.EnsurePartitions(ctx, store.InboxDays, today.AddDate(0, 0, -5), 24*time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	old := "inbox_days_" + today.AddDate(0, 0, -6).Format("20060102")
	if _, err := env.DB.Exec(ctx, "ALTER TABLE inbox_days DETACH PARTITION "+old); err != nil {
		t.Fatal(err)
	}
	dropped, err := st.DropPartitions(ctx, store.InboxDays, today.Add(12*time.Hour), 72*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(dropped, old) {
		t.Fatalf("dropped %v, want the detached %s among them", dropped, old)
	}
	if n := env.Int(t, "SELECT count(*) FROM pg_class WHERE relname = $1", old); n != 0 {
		t.Errorf("%s is still there", old)
	}
}

// The inbox's unique key is (message_id, day): a copy of a relay that
// committed just before midnight, after this step's claim read the inbox,
// is in yesterday's partition. The step's inbox row goes there too and
// fails on its key: the step is a duplicate, not applied twice.
func TestACopyCommittedBeforeMidnightMakesTheStepADuplicateAfterIt(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b"}
	env, st, proc := batchEnv(t, ids...)
	ctx := testkit.Ctx(t)
	cs := claimPaid(t, st, proc, "r/lane/1", ids)
	yesterday := dbToday(t, env).AddDate(0, 0, -1)
	if _, err := env.DB.Exec(ctx, "INSERT INTO inbox_days (message_id, instance_id, day) VALUES ('pay-a', 'o-a', $1)", yesterday); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteStep(ctx, cs[0]); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("the step after the copy of yesterday: %v, want ErrDuplicate", err)
	}
	if v := env.Int(t, "SELECT version FROM instances WHERE id = 'o-a'"); v != 1 {
		t.Errorf("o-a at version %d, want 1: the relay was applied twice", v)
	}
	// A copy of the same day fails on today's key.
	if _, err := env.DB.Exec(ctx, "INSERT INTO inbox_days (message_id, instance_id) VALUES ('pay-b', 'o-b')"); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteStep(ctx, cs[1]); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("the step after the copy of today: %v, want ErrDuplicate", err)
	}
	// Forward has no claim: its insert tells a copy of any live day.
	if _, err := st.EnsurePartitions(ctx, store.InboxDays, time.Now(), 7*24*time.Hour, 3); err != nil {
		t.Fatal(err)
	}
	for i, ago := range []int{1, 6} {
		id := fmt.Sprintf("fwd-%d", i)
		if _, err := env.DB.Exec(ctx, "INSERT INTO inbox_days (message_id, instance_id, day) VALUES ($1, 'o-a', $2)", id, yesterday.AddDate(0, 0, 1-ago)); err != nil {
			t.Fatal(err)
		}
		if err := st.Forward(ctx, id, "o-a", []store.RelayOut{{ID: id + "/out", InstanceID: "o-b", RoutingKey: "k", Body: []byte(`{}`)}}); !errors.Is(err, store.ErrDuplicate) {
			t.Fatalf("forwarding a copy of %d days ago: %v, want ErrDuplicate", ago, err)
		}
	}
	if n := env.Int(t, "SELECT count(*) FROM outbox WHERE id LIKE 'fwd-%'"); n != 0 {
		t.Errorf("%d relays of duplicates forwarded", n)
	}
}

// A copy of a relay recorded days ago, in any live partition, is refused
// by the claim.
func TestTheClaimRefusesACopyRecordedInAnyLivePartition(t *testing.T) {
	t.Parallel()
	env, st, _ := batchEnv(t, "o-a")
	ctx := testkit.Ctx(t)
	today := dbToday(t, env)
	if _, err := st.EnsurePartitions(ctx, store.InboxDays, today, 7*24*time.Hour, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "INSERT INTO inbox_days (message_id, instance_id, day) VALUES ('pay-a', 'o-a', $1)", today.AddDate(0, 0, -6)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, store.ClaimRequest{InstanceID: "o-a", Owner: "r/lane/1", Timeout: time.Minute, InboxID: "pay-a"}); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("claim of a relay applied six days ago = %v, want ErrDuplicate", err)
	}
}

// migrationFiles names the migration files by version.
func migrationFiles(t *testing.T) map[int]string {
	t.Helper()
	paths, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	files := map[int]string{}
	for _, p := range paths {
		var v int
		if _, err := fmt.Sscanf(filepath.Base(p), "%d_", &v); err != nil {
			t.Fatal(err)
		}
		files[v] = filepath.Base(p)
	}
	return files
}

func isConstraint(err error, name string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == name
}

// migratedThrough gives a schema migrated by the files up to version last,
// as a replica of that time left it.
func migratedThrough(t *testing.T, last int) (*testkit.Env, context.Context, *store.Store) {
	t.Helper()
	env, ctx, st := open(t)
	recreate(t, ctx, env)
	files := map[int]string{}
	for v, f := range migrationFiles(t) {
		if v <= last {
			files[v] = f
		}
	}
	applyAs(t, ctx, env.DB, files)
	return env, ctx, st
}

// The rows of before the partitioning move over in batches while a replica
// of before (through the views) and one of now keep writing: none is lost
// or doubled, a copy of a moved relay is still refused, and the contract
// step finds nothing left to move.
func TestRowsOfBeforeThePartitioningMoveOverWhileWritesContinue(t *testing.T) {
	t.Parallel()
	env, ctx, st := migratedThrough(t, 33)
	const old = 3000
	for _, q := range []string{`INSERT INTO inbox (message_id, instance_id, received_at)
		SELECT 'old-' || g, 'x', now() - (g % 96) * interval '1 hour' FROM generate_series(1, $1::int) g`,
		`INSERT INTO step_history (instance_id, version, committed_at, cause, owner)
		SELECT 'x-' || g, 1, now() - (g % 96) * interval '1 hour', 'relay', 'r' FROM generate_series(1, $1::int) g`} {
		if _, err := env.DB.Exec(ctx, q, old); err != nil {
			t.Fatal(err)
		}
	}
	body, err := os.ReadFile(filepath.Join("migrations", migrationFiles(t)[34]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, string(body)); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES (34)"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, table := range []store.DayTable{store.InboxDays, store.StepHistoryDays} {
		if _, err := st.EnsurePartitions(ctx, table, now, 7*24*time.Hour, 3); err != nil {
			t.Fatal(err)
		}
	}
	// The writers: v0.1.0's statements through the views, and this
	// release's (Forward), until the move is over.
	done := make(chan struct{})
	var wg sync.WaitGroup
	var written [2]int
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				id := fmt.Sprintf("new-%d-%d", w, i)
				var err error
				if w == 0 {
					_, err = env.DB.Exec(ctx, `INSERT INTO inbox (message_id, instance_id) SELECT * FROM unnest($1::text[], $2::text[])`, []string{id}, []string{"y"})
					if err == nil {
						_, err = env.DB.Exec(ctx, `INSERT INTO step_history (instance_id, version, cause, detail, owner, message_id, bounces, passed, passed_cut)
							VALUES ($1, 1, 'relay', '', 'old', $1, NULL, NULL, false)`, id)
					}
				} else {
					err = st.Forward(ctx, id, "y", nil)
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				written[w]++
			}
		}()
	}
	moved := map[string]int64{}
	for _, table := range []store.DayTable{store.InboxDays, store.StepHistoryDays} {
		for {
			taken, discarded, err := st.MoveBeforeDays(ctx, table, now, 7*24*time.Hour, 250)
			if err != nil {
				t.Fatal(err)
			}
			if discarded != 0 {
				t.Errorf("%s: %d rows within the retention discarded", table.Name, discarded)
			}
			moved[table.Name] += taken
			if taken < 250 {
				break
			}
		}
	}
	close(done)
	wg.Wait()
	if moved["inbox_days"] != old || moved["step_history_days"] != old {
		t.Errorf("moved %v, want %d of each", moved, old)
	}
	for _, q := range []struct {
		sql  string
		want int
	}{
		{"SELECT count(*) FROM inbox_before_days", 0},
		{"SELECT count(*) FROM step_history_before_days", 0},
		{"SELECT count(DISTINCT message_id) FROM inbox WHERE message_id LIKE 'old-%'", old},
		{"SELECT count(*) FROM inbox WHERE message_id LIKE 'old-%'", old},
		{"SELECT count(*) FROM step_history WHERE instance_id LIKE 'x-%'", old},
		{"SELECT count(*) FROM inbox WHERE message_id LIKE 'new-0-%'", written[0]},
		{"SELECT count(*) FROM step_history WHERE message_id LIKE 'new-0-%'", written[0]},
		{"SELECT count(*) FROM inbox WHERE message_id LIKE 'new-1-%'", written[1]},
	} {
		if n := env.Int(t, q.sql); n != int64(q.want) {
			t.Errorf("%s = %d, want %d", q.sql, n, q.want)
		}
	}
	// A copy of a moved relay is still refused, by either release.
	if applied, err := st.Applied(ctx, "old-95"); err != nil || !applied {
		t.Errorf("a moved relay applied: %v, %v; want true", applied, err)
	}
	if _, err := st.Claim(ctx, store.ClaimRequest{InstanceID: "x", Owner: "r/lane/1", Timeout: time.Minute, InboxID: "old-95"}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("claim of a moved relay = %v, want ErrDuplicate", err)
	}
	if _, err := env.DB.Exec(ctx, "INSERT INTO inbox (message_id, instance_id) VALUES ('new-0-0', 'y')"); !isConstraint(err, "inbox_pkey") {
		t.Errorf("a copy through the view = %v, want a unique violation of inbox_pkey (v0.1.0's duplicate)", err)
	}
	// The contract step: no replica is registered, so it applies.
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if n := env.Int(t, "SELECT count(*) FROM inbox WHERE message_id LIKE 'old-%'"); n != old {
		t.Errorf("after the contract step %d old ids, want %d", n, old)
	}
	if n := env.Int(t, "SELECT count(*) FROM pg_class WHERE relname IN ('inbox_before_days', 'step_history_before_days')"); n != 0 {
		t.Errorf("the tables of before are still there after the contract step")
	}
	if taken, _, err := st.MoveBeforeDays(ctx, store.InboxDays, now, 7*24*time.Hour, 250); err != nil || taken != 0 {
		t.Errorf("moving after the contract step: %d, %v; want nothing", taken, err)
	}
}
