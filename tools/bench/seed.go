package bench

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Data is how much data sits in a run's tables besides the K benchmark
// instances: what a worker finds after months of service. None of it is
// touched by a benchmark relay; it only makes every table, index and plan
// the size of production's.
type Data struct {
	// Instances are idle instances of the benchmark process; Timers of them
	// wait on armed timers (due far in the future) and Subscriptions others
	// on message subscriptions under other message names and keys than the
	// benchmark's. Tasks more wait on open pull tasks; Inbox relays are
	// applied history, and Outbox messages published history; History
	// rows of the step history (step 1 of each instance, then step 2, …).
	Instances, Timers, Subscriptions, Tasks, Inbox, Outbox, History int
	// Completed of the Instances (the last ones) have ended: history that
	// only the tables' and indexes' sizes feel.
	Completed int
	// VariableBytes pads every instance's variables, the benchmark's K
	// included, to about this many bytes of JSON.
	VariableBytes int
}

// DataSets are the sizes the benchmark knows by name (tools/bench/load -data).
var DataSets = map[string]Data{
	"small": {},
	// large is issue 10's table: a million instances, a tenth on timers and
	// a tenth on subscriptions.
	"large": {Instances: 1_000_000, Timers: 100_000, Subscriptions: 100_000, Tasks: 10_000, Inbox: 1_000_000, Outbox: 100_000,
		History: 2_000_000},
	"large-2k": {Instances: 1_000_000, Timers: 100_000, Subscriptions: 100_000, Tasks: 10_000, Inbox: 1_000_000, Outbox: 100_000,
		History: 2_000_000, VariableBytes: 2048},
	// 1m and 10m are issue 28's: 1% of the instances active (a quarter of
	// those on timers, a quarter on subscriptions, a twentieth on tasks, the
	// rest waiting on the benchmark's own message), the rest ended.
	"1m": {Instances: 1_000_000, Completed: 990_000, Timers: 2_500, Subscriptions: 2_500, Tasks: 500, Inbox: 1_000_000, Outbox: 100_000,
		History: 2_000_000},
	"10m": {Instances: 10_000_000, Completed: 9_900_000, Timers: 25_000, Subscriptions: 25_000, Tasks: 5_000, Inbox: 10_000_000, Outbox: 1_000_000,
		History: 10_000_000},
}

// String names d's size.
func (d Data) String() string {
	if d.Instances == 0 && d.VariableBytes == 0 {
		return "K instances only"
	}
	s := fmt.Sprintf("%d instances (%d on timers, %d on subscriptions, %d on tasks", d.Instances, d.Timers, d.Subscriptions, d.Tasks)
	if d.Completed > 0 {
		s += fmt.Sprintf(", %d ended", d.Completed)
	}
	s += fmt.Sprintf("), %d inbox rows, %d outbox rows, %d step history rows", d.Inbox, d.Outbox, d.History)
	if d.VariableBytes > 0 {
		s += fmt.Sprintf(", %d B of variables each", d.VariableBytes)
	}
	return s
}

// padding is n bytes of hex from a fixed pseudo-random sequence.
func padding(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, (n+1)/2)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(b)[:n]
}

// SeedID is the id of seeded instance i: never a benchmark instance's.
func SeedID(i int) string { return "seed-" + strconv.Itoa(i) }

// Seed fills the env's schema with d using COPY, then vacuums and analyzes
// every table, as autovacuum keeps a long-running database's, and
// checkpoints. Nothing here is timed.
// The seeded instances are of the deployed benchmark process at version 1.
func (e *Env) Seed(ctx context.Context, d Data) error {
	conn, err := pgx.Connect(ctx, e.Config.Database.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// Seeding is not what is measured: skip the WAL flush of each COPY.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return err
	}
	pad := ""
	if d.VariableBytes > 0 {
		// Hex of pseudo-random bytes: PostgreSQL cannot compress it to
		// nothing as it would a run of one letter, so the row carries (or
		// TOASTs) its full weight, as real variables make it.
		pad = padding(d.VariableBytes)
		// The benchmark's own instances carry the same weight.
		if _, err := conn.Exec(ctx, `UPDATE instances SET variables = variables || jsonb_build_object('pad', $1::text)`, pad); err != nil {
			return fmt.Errorf("padding the benchmark instances: %w", err)
		}
	}
	now := time.Now()
	far := now.AddDate(100, 0, 0)
	vars := map[string]any{}
	if pad != "" {
		vars["pad"] = pad
	}
	copies := []struct {
		table string
		cols  []string
		n     int
		row   func(i int) []any
	}{
		{"instances", []string{"id", "definition_key", "definition_version", "status", "variables", "tokens", "version", "created_at", "updated_at"},
			d.Instances, func(i int) []any {
				wait := "message"
				switch {
				case i < d.Timers:
					wait = "timer"
				case i < d.Timers+d.Subscriptions:
				case i < d.Timers+d.Subscriptions+d.Tasks:
					wait = "task"
				}
				if i >= d.Instances-d.Completed {
					return []any{SeedID(i), ProcessKey, 1, "completed", vars, json.RawMessage(`{"tokens":[],"seq":1}`), 2, now, now}
				}
				tokens := json.RawMessage(`{"tokens":[{"id":"t1","el":"` + CatchElement + `","flow":"` + LoopFlow + `","wait":"` + wait + `"}],"seq":1}`)
				return []any{SeedID(i), ProcessKey, 1, "active", vars, tokens, 1, now, now}
			}},
		{"timers", []string{"instance_id", "token_id", "element_id", "due_at"},
			d.Timers, func(i int) []any {
				return []any{SeedID(i), "t1", "Timer", far.Add(time.Duration(i) * time.Second)}
			}},
		{"subscriptions", []string{"instance_id", "token_id", "element_id", "message_name", "correlation_key", "created_at"},
			d.Subscriptions, func(i int) []any {
				j := d.Timers + i
				return []any{SeedID(j), "t1", CatchElement, "other-" + strconv.Itoa(i%1000), "key-" + strconv.Itoa(j), now}
			}},
		{"tasks", []string{"instance_id", "token_id", "element_id", "type", "retries"},
			d.Tasks, func(i int) []any {
				return []any{SeedID(d.Timers + d.Subscriptions + i), "t1", "Task", "other-" + strconv.Itoa(i%100), 3}
			}},
		// The inbox and the step history are partitioned by day (UTC): the
		// seeded rows are of the last minutes, within the partitions the
		// migration created.
		{"inbox_days", []string{"message_id", "instance_id", "received_at", "day"},
			d.Inbox, func(i int) []any {
				at := now.Add(-time.Duration(d.Inbox-i) * time.Millisecond)
				day := at.UTC().Truncate(24 * time.Hour)
				return []any{"seed-start-" + strconv.Itoa(i), SeedID(i % max(d.Instances, 1)), at, day}
			}},
		{"step_history_days", []string{"instance_id", "version", "committed_at", "cause", "detail", "owner", "message_id"},
			d.History, func(i int) []any {
				n := max(d.Instances, 1)
				at := now.Add(-time.Duration(d.History-i) * time.Millisecond)
				return []any{SeedID(i % n), int64(i/n + 1), at, "relay", "message other", "seed/lane/0", "seed-history-" + strconv.Itoa(i)}
			}},
		{"outbox", []string{"id", "instance_id", "message_name", "created_at", "published_at"},
			d.Outbox, func(i int) []any {
				at := now.Add(-time.Duration(d.Outbox-i) * time.Millisecond)
				return []any{"seed-" + strconv.Itoa(i), SeedID(i % max(d.Instances, 1)), "other", at, at}
			}},
	}
	for _, c := range copies {
		if c.n == 0 {
			continue
		}
		i := 0
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i == c.n {
				return nil, nil
			}
			i++
			return c.row(i - 1), nil
		})
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, src); err != nil {
			return fmt.Errorf("seeding %s: %w", c.table, err)
		}
	}
	// Only this schema's tables: other runs may share the database. VACUUM
	// too, as autovacuum would have done to tables this old (it is off on
	// the benchmark machine): without it the run's first reads of each seeded
	// page set its hint bits, writes the run would be charged for. And the
	// checkpoint writes the seed's pages out before the clock starts, not
	// during the run.
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) instances, timers, subscriptions, tasks, inbox, outbox, buffered_messages, step_history"); err != nil {
		return fmt.Errorf("vacuuming the seeded tables: %w", err)
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("writing the seeded tables out (CHECKPOINT needs a superuser or pg_checkpoint): %w", err)
	}
	return nil
}
