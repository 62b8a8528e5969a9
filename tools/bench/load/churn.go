package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// churn is what a run's steps left behind: updates of instances rows (and
// how many were HOT: the new row version on the same page, no index entry
// written), dead row versions in the run's tables (what vacuum has to
// reclaim), the growth of the indexes of the claim's tables (instances and,
// once it exists, claims), and WAL written meanwhile. The WAL position is
// the server's: anything else writing meanwhile (another database's tests)
// is counted too, so it is an upper bound on a shared machine.
type churn struct {
	steps         int64 // steps whose updates and dead rows are counted (warm-up included)
	updates, hot  int64
	dead          int64 // every table of the run's schema
	deadInstances int64
	indexBytes    int64 // the indexes of instances and claims
	walBytes      int64 // over the timed relays only
	settledWithin time.Duration
}

// readChurn reads the run's tables' counters (the schema is the run's own).
func readChurn(ctx context.Context, db *pgxpool.Pool, schema string) (churn, error) {
	var c churn
	err := db.QueryRow(ctx, `
		SELECT COALESCE(sum(n_tup_upd) FILTER (WHERE relname = 'instances'), 0)::bigint,
		       COALESCE(sum(n_tup_hot_upd) FILTER (WHERE relname = 'instances'), 0)::bigint,
		       COALESCE(sum(n_dead_tup), 0)::bigint,
		       COALESCE(sum(n_dead_tup) FILTER (WHERE relname = 'instances'), 0)::bigint,
		       COALESCE(sum(pg_indexes_size(relid)) FILTER (WHERE relname IN ('instances', 'claims')), 0)::bigint
		  FROM pg_stat_user_tables WHERE schemaname = $1`, schema).Scan(&c.updates, &c.hot, &c.dead, &c.deadInstances, &c.indexBytes)
	return c, err
}

// walLSN is the server's current WAL position in bytes.
func walLSN(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&n)
	return n, err
}

// settledChurn is the churn since before of a run of steps steps whose
// worker has stopped: its backends report their counters as they exit, so
// it waits (5 s at most) until every step's instance update (its commit) is
// counted and the counters have stopped moving for half a second.
func settledChurn(ctx context.Context, db *pgxpool.Pool, schema string, before, timed churn, steps int64) (churn, error) {
	began := time.Now()
	var last churn
	var stableSince time.Time
	for {
		now, err := readChurn(ctx, db, schema)
		if err != nil {
			return timed, err
		}
		c := churn{steps: steps, updates: now.updates - before.updates, hot: now.hot - before.hot, dead: now.dead - before.dead,
			deadInstances: now.deadInstances - before.deadInstances, indexBytes: now.indexBytes - before.indexBytes,
			walBytes: timed.walBytes}
		if c != last || stableSince.IsZero() {
			last, stableSince = c, time.Now()
		}
		if c.updates >= steps && time.Since(stableSince) >= 500*time.Millisecond || time.Since(began) > 5*time.Second {
			c.settledWithin = time.Since(began)
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reportChurn prints each worker run's churn: HOT updates of instances,
// and dead rows, index growth and WAL scaled to a million steps (the bloat
// vacuum must keep up with; see README, "Operations").
func reportChurn(w io.Writer, all []result) {
	var runs []result
	for _, r := range best(all) {
		if (r.kind == "worker" || r.kind == "data") && r.churn.steps > 0 {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nTable churn of the worker runs (pg_stat_user_tables of the run's schema; WAL is the server's, so an upper bound on a shared machine;")
	fmt.Fprintln(w, "indexes: those of instances and claims, pg_indexes_size after the run less before).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | steps | instances updates / step | HOT | dead rows / 1M steps: all | instances | index growth / 1M steps | WAL / 1M steps |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range runs {
		c := r.churn
		hot := "—"
		if c.updates > 0 {
			hot = fmt.Sprintf("%.0f%%", 100*float64(c.hot)/float64(c.updates))
		}
		perM := func(n int64) float64 { return float64(n) / float64(c.steps) }
		fmt.Fprintf(w, "| %s | %d | %.2f | %s | %.2f M | %.2f M | %.0f MB | %.2f GB |\n", r.name(), c.steps, perM(c.updates), hot,
			perM(c.dead), perM(c.deadInstances), perM(c.indexBytes), // bytes a step: MB a million
			float64(c.walBytes)/float64(max(r.steps, 1))*1e6/1e9)
	}
}
