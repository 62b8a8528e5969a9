package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// second is one second of the soak, written as a line of seconds.jsonl, so
// that a stall shows beside what the server and the worker were doing in
// it. Latency is by the second a relay committed in (its inbox row), the
// rest by the second it was sampled in.
type second struct {
	At      time.Time `json:"at"`
	Elapsed float64   `json:"elapsed_s"`
	// Timed relays committed in the second, and their publish → commit
	// latency.
	Commits int     `json:"commits"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
	// WorkerCommits are the relays the worker committed
	// (sutra_relays_total{outcome="committed"}); Transactions the commits of
	// the database (pg_stat_database.xact_commit: every client's).
	WorkerCommits float64 `json:"worker_commits"`
	Transactions  int64   `json:"transactions"`
	// Waits counts, over the second's samples of pg_stat_activity (every
	// sampleEvery), the backends of the database and the server's own
	// processes by what they waited on ("CPU": active, waiting on nothing;
	// a background process's are named with its type). Idle sessions and
	// the background processes' idle loops (wait type Activity) are left
	// out.
	Waits   map[string]int `json:"waits,omitempty"`
	Samples int            `json:"wait_samples"`
	// Checkpoints that completed in the second and the buffers they wrote
	// (pg_stat_bgwriter; pg_stat_checkpointer from PostgreSQL 17).
	Checkpoints       int64 `json:"checkpoints"`
	CheckpointBuffers int64 `json:"checkpoint_buffers"`
	// Autovacuums of the run's tables that ended in the second
	// (autovacuum_count), and the most autovacuum workers sampled at once.
	Autovacuums       int64 `json:"autovacuums"`
	AutovacuumWorkers int   `json:"autovacuum_workers"`
	// The worker's GC cycles and their stop-the-world pauses
	// (go_gc_duration_seconds), and its lane waits: resumes taken from a
	// lane's inbox and how long they waited there (sutra_lane_wait_seconds;
	// the p99 is the upper bound of its bucket).
	GCs          float64 `json:"gc_cycles"`
	GCPause      float64 `json:"gc_pause_ms"`
	LaneWaits    float64 `json:"lane_waits"`
	LaneWaitMean float64 `json:"lane_wait_mean_ms"`
	LaneWaitP99  float64 `json:"lane_wait_p99_ms"`
	latencies    []time.Duration
}

// sampleEvery is how often pg_stat_activity is sampled.
const sampleEvery = 100 * time.Millisecond

// recorder records the seconds of the soak and writes each once it is
// complete: once the inbox has been read past it.
type recorder struct {
	db      *pgxpool.Pool
	schema  string
	metrics string
	began   time.Time
	w       io.Writer
	// counters reads the server's cumulative counters, for its version.
	counters string

	mu       sync.Mutex
	seconds  map[int64]*second
	written  int64 // seconds before this one are written
	counted  int64 // the latest second the counters were read for
	all      []second
	last     counts
	haveLast bool

	stop chan struct{}
	done chan error
}

// counts are the cumulative counters read each second.
type counts struct {
	xacts, checkpoints, buffers, autovacuums int64
	committed, gcs, gcPause                  float64
	laneWaits, laneWaitSum                   float64
	laneBuckets                              []bucket
}

type bucket struct {
	le    float64
	count float64
}

func newRecorder(ctx context.Context, db *pgxpool.Pool, schema, metrics string, w io.Writer) (*recorder, error) {
	var version int
	if err := db.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return nil, err
	}
	checkpoints := "SELECT checkpoints_timed + checkpoints_req, buffers_checkpoint FROM pg_stat_bgwriter"
	if version >= 170000 {
		checkpoints = "SELECT num_timed + num_requested, buffers_written FROM pg_stat_checkpointer"
	}
	return &recorder{
		db: db, schema: schema, metrics: metrics, w: w, began: time.Now(),
		counters: `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()), c.*,
		       (SELECT coalesce(sum(autovacuum_count), 0) FROM pg_stat_user_tables WHERE schemaname = $1)
		  FROM (` + checkpoints + `) c`,
		seconds: map[int64]*second{}, stop: make(chan struct{}), done: make(chan error, 1),
	}, nil
}

// start samples until end; an error ends the sampling and is end's.
func (r *recorder) start(ctx context.Context) {
	go func() { r.done <- r.run(ctx) }()
}

func (r *recorder) run(ctx context.Context) error {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	nextCounters := time.Now().Truncate(time.Second).Add(time.Second)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.stop:
			return nil
		case now := <-tick.C:
			if err := r.sampleWaits(ctx, now); err != nil {
				return err
			}
			if !now.Before(nextCounters) {
				nextCounters = now.Truncate(time.Second).Add(time.Second)
				if err := r.readCounters(ctx, now); err != nil {
					return err
				}
			}
		}
	}
}

// end stops the sampling and returns its error.
func (r *recorder) end() error {
	close(r.stop)
	return <-r.done
}

// at is the second of t, created on first use; mu is held.
func (r *recorder) at(t time.Time) *second {
	k := t.Unix()
	s, ok := r.seconds[k]
	if !ok {
		s = &second{At: time.Unix(k, 0).UTC(), Elapsed: float64(k) - float64(r.began.Unix()), Waits: map[string]int{}}
		r.seconds[k] = s
	}
	return s
}

// latency records a timed relay that committed at t.
func (r *recorder) latency(t time.Time, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.Unix() < r.written {
		return // written already (a relay read late): the second stands as written
	}
	s := r.at(t)
	s.latencies = append(s.latencies, d)
}

func (r *recorder) sampleWaits(ctx context.Context, now time.Time) error {
	rows, err := r.db.Query(ctx, `
		SELECT CASE WHEN wait_event IS NULL THEN 'CPU' ELSE wait_event_type || ':' || wait_event END
		       || CASE WHEN backend_type = 'client backend' THEN '' ELSE ' (' || backend_type || ')' END,
		       backend_type = 'autovacuum worker'
		  FROM pg_stat_activity
		 WHERE pid <> pg_backend_pid() AND (datname = current_database() OR datname IS NULL)
		   AND (state = 'active' OR backend_type <> 'client backend') AND wait_event_type IS DISTINCT FROM 'Activity'`)
	if err != nil {
		return fmt.Errorf("sampling pg_stat_activity: %w", err)
	}
	waits, workers := map[string]int{}, 0
	var wait string
	var autovacuum bool
	if _, err := pgx.ForEachRow(rows, []any{&wait, &autovacuum}, func() error {
		waits[wait]++
		if autovacuum {
			workers++
		}
		return nil
	}); err != nil {
		return fmt.Errorf("sampling pg_stat_activity: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.at(now)
	s.Samples++
	for k, n := range waits {
		s.Waits[k] += n
	}
	s.AutovacuumWorkers = max(s.AutovacuumWorkers, workers)
	return nil
}

// readCounters reads the cumulative counters at now and gives the second
// that just ended what they grew by since the last read.
func (r *recorder) readCounters(ctx context.Context, now time.Time) error {
	var c counts
	if err := r.db.QueryRow(ctx, r.counters, r.schema).Scan(&c.xacts, &c.checkpoints, &c.buffers, &c.autovacuums); err != nil {
		return fmt.Errorf("reading the server's counters: %w", err)
	}
	if err := r.scrape(ctx, &c); err != nil {
		return fmt.Errorf("scraping the worker: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.haveLast {
		p := r.last
		s := r.at(now.Add(-time.Second / 2))
		r.counted = max(r.counted, s.At.Unix())
		s.Transactions, s.Checkpoints, s.CheckpointBuffers, s.Autovacuums = c.xacts-p.xacts, c.checkpoints-p.checkpoints, c.buffers-p.buffers, c.autovacuums-p.autovacuums
		s.WorkerCommits, s.GCs = c.committed-p.committed, c.gcs-p.gcs
		s.GCPause = 1000 * (c.gcPause - p.gcPause)
		s.LaneWaits = c.laneWaits - p.laneWaits
		if s.LaneWaits > 0 {
			s.LaneWaitMean = 1000 * (c.laneWaitSum - p.laneWaitSum) / s.LaneWaits
			s.LaneWaitP99 = 1000 * bucketQuantile(p.laneBuckets, c.laneBuckets, 0.99)
		}
	}
	r.last, r.haveLast = c, true
	return nil
}

// scrape reads the worker's counters from its /metrics.
func (r *recorder) scrape(ctx context.Context, c *counts) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.metrics, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return err
	}
	for _, m := range families["sutra_relays_total"].GetMetric() {
		if label(m, "outcome") == "committed" {
			c.committed += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["go_gc_duration_seconds"].GetMetric() {
		c.gcs, c.gcPause = float64(m.GetSummary().GetSampleCount()), m.GetSummary().GetSampleSum()
	}
	for _, m := range families["sutra_lane_wait_seconds"].GetMetric() {
		h := m.GetHistogram()
		c.laneWaits, c.laneWaitSum = float64(h.GetSampleCount()), h.GetSampleSum()
		for _, b := range h.GetBucket() {
			c.laneBuckets = append(c.laneBuckets, bucket{le: b.GetUpperBound(), count: float64(b.GetCumulativeCount())})
		}
		c.laneBuckets = append(c.laneBuckets, bucket{le: math.Inf(1), count: c.laneWaits})
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// bucketQuantile is the q-quantile of what a cumulative histogram gained
// from before to after, as the upper bound of the bucket it falls in (the
// largest finite bound when it falls past them); 0 when it gained nothing.
func bucketQuantile(before, after []bucket, q float64) float64 {
	if len(after) == 0 {
		return 0
	}
	gained := func(i int) float64 {
		if i < len(before) {
			return after[i].count - before[i].count
		}
		return after[i].count
	}
	total := gained(len(after) - 1)
	if total <= 0 {
		return 0
	}
	for i, b := range after {
		if gained(i) >= q*total {
			if math.IsInf(b.le, 1) && i > 0 {
				return after[i-1].le
			}
			return b.le
		}
	}
	return after[len(after)-1].le
}

// flush writes, in order, every second before until up to the latest whose
// counters were read (all of them when final).
func (r *recorder) flush(until time.Time, final bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []int64
	for k := range r.seconds {
		if final || (k < until.Unix() && k <= r.counted) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	enc := json.NewEncoder(r.w)
	for _, k := range keys {
		s := r.seconds[k]
		delete(r.seconds, k)
		s.finish()
		if err := enc.Encode(s); err != nil {
			return err
		}
		r.all = append(r.all, *s)
		r.written = max(r.written, k+1)
	}
	return nil
}

// finish computes the second's latency figures.
func (s *second) finish() {
	slices.Sort(s.latencies)
	s.Commits = len(s.latencies)
	s.P50, s.P99 = msf(percentile(s.latencies, 0.5)), msf(percentile(s.latencies, 0.99))
	if n := len(s.latencies); n > 0 {
		s.Max = msf(s.latencies[n-1])
	}
	s.latencies = nil
}

// topWaits are the n wait events sampled most often in the second, as
// "event×count".
func (s second) topWaits(n int) string {
	type w struct {
		name  string
		count int
	}
	var ws []w
	for k, c := range s.Waits {
		ws = append(ws, w{k, c})
	}
	slices.SortFunc(ws, func(a, b w) int { return cmp.Or(cmp.Compare(b.count, a.count), strings.Compare(a.name, b.name)) })
	var out []string
	for i := 0; i < len(ws) && i < n; i++ {
		out = append(out, fmt.Sprintf("%s×%d", ws[i].name, ws[i].count))
	}
	return strings.Join(out, ", ")
}

// worstSeconds are the n seconds with the highest p99, worst first.
func worstSeconds(all []second, n int) []second {
	out := slices.Clone(all)
	slices.SortStableFunc(out, func(a, b second) int { return cmp.Compare(b.P99, a.P99) })
	return out[:min(n, len(out))]
}
