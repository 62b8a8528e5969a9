package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/tools/bench"
)

// outboxRun is one measurement of the outbox publisher: the worker running
// bench.PingOutXML, where every step writes one outbox message, which the
// publisher publishes to a durable queue bound to the outbox exchange.
type outboxRun struct {
	round int
	// load is the fraction of the full load's step rate offered (1: relays
	// published as fast as the broker confirms them); offered is that rate.
	load      float64
	offered   float64
	steps     int
	stepsPerS float64
	// published counts confirmed outbox messages; publishedPerS is them
	// over the time from the first relay to the last confirm.
	published     int
	publishedPerS float64
	// backlogQuarters is the largest backlog (unpublished rows) sampled in
	// each quarter of the time from the first relay to the last commit.
	backlogQuarters [4]int64
	// drain is the time from the last commit to an empty backlog.
	drain    time.Duration
	p50, p99 time.Duration
	// stepP99 is the p99 of the steps' claim → commit: a slow commit (a
	// slow WAL flush) is lag the publisher inherits.
	stepP99 time.Duration
	errors  float64
	cpu     cpuUse
}

// backlogSampleEvery is how often a run counts unpublished rows.
const backlogSampleEvery = 50 * time.Millisecond

// measureOutbox measures the worker with outbox-writing steps at full load,
// then at each fraction of the step rate that reached (-outbox-loads), each
// run about as long as the full one.
func (b *bencher) measureOutbox(ctx context.Context) error {
	var full float64
	for _, load := range b.o.outboxLoads {
		r, err := b.outboxRun(ctx, load, load*full, int(load*float64(b.o.relays)))
		if err != nil {
			return fmt.Errorf("outbox at %.0f%% load: %w", 100*load, err)
		}
		if load == 1 {
			full = r.stepsPerS
		}
		r.round = b.round
		fmt.Fprintf(os.Stderr, "  %s\n", r.row())
		b.outboxRuns = append(b.outboxRuns, r)
	}
	return nil
}

// outboxRun measures one load: n relays at rate a second (0: as fast as the
// broker confirms them).
func (b *bencher) outboxRun(ctx context.Context, load, rate float64, n int) (outboxRun, error) {
	r := outboxRun{load: load, offered: rate}
	env, err := b.env(ctx, "outbox", bench.PingOutXML)
	if err != nil {
		return r, err
	}
	defer env.Close()
	w, reg, stop, err := b.startWorker(ctx, env, b.o.outboxLanes, false)
	if err != nil {
		return r, err
	}
	defer stop()
	if err := waitReady(ctx, w, "outbox run"); err != nil {
		return r, err
	}
	db, err := pgxpool.New(ctx, env.Config.Database.URL)
	if err != nil {
		return r, err
	}
	defer db.Close()
	pub, err := loadgen.Dial(env.Config.Broker.URL, env.Config.RelayExchange)
	if err != nil {
		return r, err
	}
	defer pub.Close()
	committed := func() int64 { return int64(counter(reg, "sutra_relays_total", metrics.OutcomeCommitted)) }
	// Warm up (the pool's connections, the broker's channels, the plans) at
	// the run's rate, so that the lag measures the steady state.
	warm := env.Pings(2 * b.o.instances)
	for i := range warm {
		warm[i].ID = "warm-" + strconv.Itoa(i)
	}
	if err := pub.PublishAt(ctx, warm, rate); err != nil {
		return r, err
	}
	for committed() < int64(len(warm)) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := waitEmpty(ctx, db); err != nil {
		return r, err
	}
	lagBefore, stepBefore := histogram(reg, "sutra_outbox_lag_seconds"), histogram(reg, "sutra_step_duration_seconds")
	publishedBefore := total(reg, "sutra_outbox_published_total")

	relays := env.Pings(n)
	b.waitQuiet(ctx, "outbox")
	s := sampleBacklog(ctx, db)
	cpu := startCPU(b.dbName)
	published := make(chan error, 1)
	go func() { published <- pub.PublishAt(ctx, relays, rate) }()
	err = waitCommitted(ctx, int64(len(warm)+n), committed, published)
	lastCommit := time.Now()
	if err == nil {
		err = waitEmpty(ctx, db)
	}
	drained := time.Now()
	r.cpu = cpu.finish()
	samples := s.stop()
	if err != nil {
		return r, err
	}
	stats, err := loadgen.Measure(ctx, db, bench.PingPrefix)
	if err != nil {
		return r, err
	}
	if stats.Committed != n {
		return r, fmt.Errorf("%d relays in the inbox, %d published", stats.Committed, n)
	}
	r.steps, r.stepsPerS, r.drain = stats.Committed, stats.StepsPerS, drained.Sub(lastCommit)
	r.published = int(total(reg, "sutra_outbox_published_total") - publishedBefore)
	r.publishedPerS = float64(r.published) / drained.Sub(stats.First).Seconds()
	r.errors = total(reg, "sutra_outbox_publish_errors_total")
	r.backlogQuarters = quarters(samples, stats.First, lastCommit)
	lag := histogram(reg, "sutra_outbox_lag_seconds").minus(lagBefore)
	r.p50, r.p99 = lag.quantile(0.5), lag.quantile(0.99)
	r.stepP99 = histogram(reg, "sutra_step_duration_seconds").minus(stepBefore).quantile(0.99)
	if r.published < n {
		return r, fmt.Errorf("%d outbox messages published, %d steps wrote one", r.published, n)
	}
	return r, nil
}

// backlogSample is the number of unpublished rows at a time.
type backlogSample struct {
	at time.Time
	n  int64
}

// sampler counts unpublished rows every backlogSampleEvery until stopped.
type sampler struct {
	stopOnce func()
	wg       sync.WaitGroup
	samples  []backlogSample
}

func sampleBacklog(ctx context.Context, db *pgxpool.Pool) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{stopOnce: cancel}
	s.wg.Go(func() {
		t := time.NewTicker(backlogSampleEvery)
		defer t.Stop()
		for {
			var n int64
			if err := db.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&n); err == nil {
				s.samples = append(s.samples, backlogSample{at: time.Now(), n: n})
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *sampler) stop() []backlogSample {
	s.stopOnce()
	s.wg.Wait()
	return s.samples
}

// waitEmpty waits until every outbox row is published.
func waitEmpty(ctx context.Context, db *pgxpool.Pool) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var n int64
		if err := db.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d outbox rows still unpublished a minute after the last commit", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// quarters is the largest sample in each quarter of [from, to].
func quarters(samples []backlogSample, from, to time.Time) [4]int64 {
	var q [4]int64
	span := to.Sub(from)
	for _, s := range samples {
		if s.at.Before(from) || s.at.After(to) || span <= 0 {
			continue
		}
		i := min(int(4*s.at.Sub(from)/span), 3)
		q[i] = max(q[i], s.n)
	}
	return q
}

// total sums every sample of a counter family.
func total(g prometheus.Gatherer, name string) float64 {
	families, err := g.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// buckets is a histogram's cumulative bucket counts by upper bound (the
// +Inf bucket left out) and its count of samples.
type buckets struct {
	upper []float64
	cum   []float64
	count float64
}

// histogram reads a histogram family's only series.
func histogram(g prometheus.Gatherer, name string) buckets {
	var h buckets
	families, err := g.Gather()
	if err != nil {
		return h
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		hist := f.GetMetric()[0].GetHistogram()
		h.count = float64(hist.GetSampleCount())
		for _, bk := range hist.GetBucket() {
			h.upper = append(h.upper, bk.GetUpperBound())
			h.cum = append(h.cum, float64(bk.GetCumulativeCount()))
		}
	}
	return h
}

// minus is what was observed since before (taken from the same histogram).
func (h buckets) minus(before buckets) buckets {
	out := buckets{upper: h.upper, cum: slices.Clone(h.cum), count: h.count - before.count}
	for i := range before.cum {
		out.cum[i] -= before.cum[i]
	}
	return out
}

// quantile estimates a quantile the way Prometheus's histogram_quantile
// does: linearly within the bucket that holds it.
func (h buckets) quantile(q float64) time.Duration {
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, upper := range h.upper {
		if cum := h.cum[i]; cum >= rank {
			frac := 0.0
			if cum > below {
				frac = (rank - below) / (cum - below)
			}
			return time.Duration((lower + frac*(upper-lower)) * float64(time.Second))
		}
		lower, below = upper, h.cum[i]
	}
	return time.Duration(lower * float64(time.Second)) // past the last bound: at least that
}

func (r outboxRun) name() string {
	if r.load == 1 {
		return "full"
	}
	return fmt.Sprintf("%.0f%% (%.0f relays/s)", 100*r.load, r.offered)
}

const outboxHeader = `| round | load | steps | steps/s | published/s | backlog max, by quarter of the run | drained after last commit | lag p50 | lag p99 | step p99 | publish errors | CPU µs/step: all | client | broker | postgres | foreign |
|--:|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|`

func (r outboxRun) row() string {
	q := r.backlogQuarters
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.0f", float64(d.Microseconds())/float64(max(r.steps, 1)))
	}
	return fmt.Sprintf("| %d | %s | %d | %.0f | %.0f | %d, %d, %d, %d | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s |", r.round+1, r.name(), r.steps, r.stepsPerS,
		r.publishedPerS, q[0], q[1], q[2], q[3], latency(r.drain), latency(r.p50), latency(r.p99), latency(r.stepP99), r.errors,
		per(r.cpu.machine), per(r.cpu.client), per(r.cpu.broker), per(r.cpu.postgres), per(r.cpu.foreign))
}

// reportOutbox prints every outbox run and how each load met the targets:
// published/s keeps up with steps/s (the backlog stays flat), and p99
// commit → confirm is at most 50 ms at half load.
func reportOutbox(w io.Writer, runs []outboxRun, lanes int) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nOutbox: bench/pingout.bpmn (every step writes one outbox message), %d lanes; lag is commit → confirm (sutra_outbox_lag_seconds).\n\n", lanes)
	fmt.Fprintln(w, outboxHeader)
	for _, r := range runs {
		fmt.Fprintln(w, r.row())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| load | published/s ÷ steps/s, largest backlog (each round) | lag p50 / p99 (each round) |")
	fmt.Fprintln(w, "|---|---|---|")
	var loads []float64
	for _, r := range runs {
		if !slices.Contains(loads, r.load) {
			loads = append(loads, r.load)
		}
	}
	for _, load := range loads {
		var keeps, lags []string
		name := ""
		for _, r := range runs {
			if r.load != load {
				continue
			}
			name = strings.Fields(r.name())[0]
			keeps = append(keeps, fmt.Sprintf("%.0f%%, %d", 100*r.publishedPerS/r.stepsPerS, maxOf(r.backlogQuarters)))
			lags = append(lags, latency(r.p50)+" / "+latency(r.p99))
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", name, strings.Join(keeps, "; "), strings.Join(lags, "; "))
	}
	fmt.Fprintln(w, "\nWanted: published/s keeps up with steps/s with the backlog flat; lag p99 ≤ 50 ms at 50% load.")
}

func maxOf(q [4]int64) int64 { return max(q[0], q[1], q[2], q[3]) }
