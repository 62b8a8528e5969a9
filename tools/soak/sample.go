package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sutra-run/worker/internal/loadgen"
)

// sample is one interval of the soak: what committed in it and the state of
// the tables and the worker at its end.
type sample struct {
	at        time.Time
	elapsed   time.Duration
	published int64 // relays published since the start
	commits   int64 // relays committed in the interval
	perSecond float64
	p50, p99  time.Duration
	p999      time.Duration
	walBytes  int64 // WAL written in the interval
	walPerS   float64
	tables    map[string]table
	rss       float64 // bytes
	goroutine float64
}

// table is one table of the run's schema at a sample.
type table struct {
	heap, indexes int64 // bytes, TOAST with the heap
	live, dead    int64
	autovacuums   int64
}

// size is the table's heap and indexes.
func (t table) size() int64 { return t.heap + t.indexes }

// tables are the tables the report shows, in its order.
var tables = []string{"instances", "subscriptions", "inbox", "outbox", "relay_attempts", "step_history"}

// sampler takes the samples.
type sampler struct {
	db      *pgxpool.Pool
	schema  string
	metrics string // the worker's /metrics URL
	prefix  string // message id prefix of the timed relays
	since   time.Time
	began   time.Time
	wal     int64
	samples []sample
	// read is how far the inbox has been read, and latencies what it held
	// since the last sample. The inbox is read every second (follow), a
	// second's rows at a time, so that the soak's own reading is a small
	// steady load: one query per interval over its every row was a burst
	// that showed up as a spike in the next interval's latency.
	read      time.Time
	latencies []time.Duration
	// rec, when set, hears each latency by the second it committed in.
	rec *recorder
}

func (s *sampler) start(ctx context.Context) error {
	var err error
	s.wal, err = walLSN(ctx, s.db)
	s.since, s.began = time.Now(), time.Now()
	s.read = s.since
	return err
}

// settle is how far behind the clock the inbox is read: an inbox row's
// received_at is its transaction's start, so a row stamped just before a
// read may commit just after it; no step transaction lasts this long.
const settle = 10 * time.Second

// follow reads the inbox rows committed since the last read, up to settle
// ago.
func (s *sampler) follow(ctx context.Context) error {
	return s.readUntil(ctx, time.Now().Add(-settle))
}

// readUntil adds the latency of each timed relay committed from s.read to
// until. The latency of a relay is its commit (the commit transaction's
// now() in its inbox row) minus its publish time (in its message id,
// loadgen.PublishedAt).
func (s *sampler) readUntil(ctx context.Context, until time.Time) error {
	if !until.After(s.read) {
		return nil
	}
	rows, err := s.db.Query(ctx, `
		SELECT message_id, received_at FROM inbox
		 WHERE received_at >= $2 AND received_at < $3 AND starts_with(message_id, $1)`, s.prefix, s.read, until)
	if err != nil {
		return fmt.Errorf("reading the inbox: %w", err)
	}
	var id string
	var committed time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &committed}, func() error {
		published, err := loadgen.PublishedAt(id)
		if err != nil {
			return err
		}
		s.latencies = append(s.latencies, committed.Sub(published))
		if s.rec != nil {
			s.rec.latency(committed, committed.Sub(published))
		}
		return nil
	}); err != nil {
		return fmt.Errorf("reading the inbox: %w", err)
	}
	s.read = until
	return nil
}

// percentile is the q-quantile of sorted, interpolated between the two
// nearest values as PostgreSQL's percentile_cont does; 0 when it is empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	lo := int(pos)
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + time.Duration((pos-float64(lo))*float64(sorted[lo+1]-sorted[lo]))
}

// sample ends the interval since the last sample settle ago (now, when
// final: nothing is in flight then); a relay counts in the interval it
// committed in.
func (s *sampler) sample(ctx context.Context, published int64, final bool) error {
	now := time.Now()
	if !final {
		now = now.Add(-settle)
	}
	if err := s.readUntil(ctx, now); err != nil {
		return err
	}
	x := sample{at: now, elapsed: now.Sub(s.began), published: published, tables: map[string]table{}}
	slices.Sort(s.latencies)
	x.commits = int64(len(s.latencies))
	x.p50, x.p99, x.p999 = percentile(s.latencies, 0.5), percentile(s.latencies, 0.99), percentile(s.latencies, 0.999)
	s.latencies = s.latencies[:0]
	x.perSecond = float64(x.commits) / now.Sub(s.since).Seconds()
	wal, err := walLSN(ctx, s.db)
	if err != nil {
		return err
	}
	x.walBytes, x.walPerS = wal-s.wal, float64(wal-s.wal)/now.Sub(s.since).Seconds()
	// The partitions by day of the inbox and the step history (inbox_days_
	// YYYYMMDD) are summed under the names of their views.
	rows, err := s.db.Query(ctx, `
		SELECT regexp_replace(relname, '_days_[0-9]{8}$', ''), sum(pg_table_size(relid))::bigint, sum(pg_indexes_size(relid))::bigint,
		       sum(n_live_tup)::bigint, sum(n_dead_tup)::bigint, sum(autovacuum_count)::bigint
		  FROM pg_stat_user_tables WHERE schemaname = $1 GROUP BY 1`, s.schema)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var t table
		if err := rows.Scan(&name, &t.heap, &t.indexes, &t.live, &t.dead, &t.autovacuums); err != nil {
			return err
		}
		x.tables[name] = t
	}
	if err := rows.Err(); err != nil {
		return err
	}
	m, err := loadgen.Scrape(ctx, s.metrics, "process_resident_memory_bytes", "go_goroutines")
	if err != nil {
		return fmt.Errorf("scraping the worker: %w", err)
	}
	x.rss, x.goroutine = m["process_resident_memory_bytes{}"], m["go_goroutines{}"]
	s.samples = append(s.samples, x)
	s.since, s.wal = now, wal
	return nil
}

// drain waits until want relays are committed in all, or none commits for
// idle.
func (s *sampler) drain(ctx context.Context, want int64, idle time.Duration) error {
	for _, x := range s.samples {
		want -= x.commits
	}
	if err := waitCommitted(ctx, s.db, s.prefix, s.since, want, idle); err != nil {
		return fmt.Errorf("draining: %w", err)
	}
	return nil
}

// waitCommitted waits until want relays whose message ids start with prefix
// have committed since since, or none has for idle.
func waitCommitted(ctx context.Context, db *pgxpool.Pool, prefix string, since time.Time, want int64, idle time.Duration) error {
	last, lastChange := int64(-1), time.Now()
	for {
		var n int64
		if err := db.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE received_at >= $2 AND starts_with(message_id, $1)`,
			prefix, since).Scan(&n); err != nil {
			return err
		}
		switch {
		case n >= want:
			return nil
		case n != last:
			last, lastChange = n, time.Now()
		case time.Since(lastChange) > idle:
			return fmt.Errorf("%d of %d relays committed, none for %v", n, want, idle)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func walLSN(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&n)
	return n, err
}

// line is the sample as the progress line on stderr.
func (x sample) line() string {
	in := x.tables["instances"]
	return fmt.Sprintf("%6s  %6.0f commits/s  p50 %-8s p99 %-8s p999 %-8s  instances %s (%d dead)  inbox %s  history %s  WAL %s/s  RSS %s  %0.f goroutines",
		x.elapsed.Round(time.Second), x.perSecond, ms(x.p50), ms(x.p99), ms(x.p999), mb(in.size()), in.dead,
		mb(x.tables["inbox"].size()), mb(x.tables["step_history"].size()), mb(int64(x.walPerS)), mb(int64(x.rss)), x.goroutine)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
func mb(b int64) string         { return fmt.Sprintf("%.1fMB", float64(b)/(1<<20)) }
