package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sutra-run/worker/tools/bench"
)

// measureLatency measures the worker (at the best lane count so far) and
// the baseline side by side at each fixed rate (-latency-loads, fractions of
// the baseline's own peak steps/s; of the worker's when the baseline is not
// measured): the latency of a step when nothing is queued behind it, which a
// run that drains a backlog cannot show. Each run is warmed up at its rate
// for about a second, then lasts -latency-time, with at least 1000 relays so
// that p999 is a measured value.
func (b *bencher) measureLatency(ctx context.Context) error {
	best := bestOf(b.results, "worker")
	peak := bestOf(b.results, "baseline").perSecond
	if peak == 0 {
		peak = best.perSecond
	}
	if len(b.o.latencyLoads) == 0 || best.perSecond == 0 || peak == 0 {
		return nil
	}
	for _, load := range b.o.latencyLoads {
		rate := load * peak
		s := workerSpec{lanes: best.conc, rate: rate, relays: max(int(rate*b.o.latencyTime.Seconds()), 1000), warm: max(int(rate), 2*best.conc)}
		if b.o.baseline {
			r, err := b.baselineRun(ctx, false, s)
			r.kind, r.load, r.rate = "fixed-baseline", load, rate
			if err := b.measure(r, err); err != nil {
				return fmt.Errorf("baseline at %.0f%% of %.0f steps/s: %w", 100*load, peak, err)
			}
		}
		r, err := b.workerRun(ctx, s)
		r.kind, r.load, r.rate = "fixed", load, rate
		if err := b.measure(r, err); err != nil {
			return fmt.Errorf("worker at %.0f%% of %.0f steps/s: %w", 100*load, peak, err)
		}
	}
	return nil
}

// measureData measures the best lane count so far on each data set of -data.
func (b *bencher) measureData(ctx context.Context) error {
	best := bestOf(b.results, "worker")
	if best.conc == 0 {
		return nil
	}
	for _, d := range b.o.data {
		r, err := b.workerRun(ctx, workerSpec{lanes: best.conc, data: d, relays: b.o.relays})
		r.kind = "data"
		if err := b.measure(r, err); err != nil {
			return fmt.Errorf("worker on %s data: %w", d, err)
		}
	}
	return nil
}

const latencyHeader = `| round | consumer | load | offered relays/s | steps | steps/s | p50 | p99 | p999 | CPU µs/step: all | client | broker | postgres |
|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|`

// reportLatency prints every fixed-rate run, and issue 28's target on each
// rate of each round: the worker's p99 at most the baseline's.
func reportLatency(w io.Writer, all []result, each time.Duration) {
	var runs []result
	for _, r := range all {
		if r.kind == "fixed" || r.kind == "fixed-baseline" {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nLatency at a fixed rate: the worker's fastest lane count and the baseline at the same offered rates, fractions of the baseline's peak steps/s, each about %v after a warm-up; publish → commit (the commit transaction's now() in the inbox).\n\n", each)
	fmt.Fprintln(w, latencyHeader)
	for _, r := range runs {
		per := func(d time.Duration) string {
			return fmt.Sprintf("%.0f", float64(d.Microseconds())/float64(max(r.steps, 1)))
		}
		who := fmt.Sprintf("worker, %d lane%s", r.conc, plural(r.conc))
		if r.kind == "fixed-baseline" {
			who = fmt.Sprintf("baseline, %d goroutines", r.conc)
		}
		fmt.Fprintf(w, "| %d | %s | %.0f%% | %.0f | %d | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", r.round+1, who, 100*r.load,
			r.rate, r.steps, r.perSecond,
			latency(r.p50), latency(r.p99), latency(r.p999), per(r.cpu.machine), per(r.cpu.client), per(r.cpu.broker), per(r.cpu.postgres))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | round | worker | baseline | met |")
	fmt.Fprintln(w, "|---|--:|--:|--:|---|")
	for _, r := range runs {
		if r.kind != "fixed" {
			continue
		}
		i := slices.IndexFunc(runs, func(o result) bool { return o.kind == "fixed-baseline" && o.round == r.round && o.load == r.load })
		if i < 0 {
			continue
		}
		met := "yes"
		if r.p99 > runs[i].p99 {
			met = "**no**"
		}
		fmt.Fprintf(w, "| p99 publish → commit at %.0f%% of the baseline's peak (%.0f relays/s) | %d | %s | %s | %s |\n", 100*r.load, r.rate, r.round+1,
			latency(r.p99), latency(runs[i].p99), met)
	}
}

// reportData prints the runs on grown tables against the same lane count on
// the small table (issue 10's target 4: within 15% on large; issue 28's:
// within 10% on 1m and 10m).
func reportData(w io.Writer, all []result) {
	rs := best(all)
	var runs []result
	for _, r := range rs {
		if r.kind == "data" {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nCost as the data grows: the same lane count on the K instances only and on seeded tables (bench.DataSets).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| data | lanes | steps/s | ÷ K instances only | wanted | met |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|---|")
	for _, r := range runs {
		small, ok := find(rs, "worker", r.conc, false)
		if !ok || small.perSecond == 0 {
			continue
		}
		ratio := r.perSecond / small.perSecond
		wanted, met := "—", "—"
		// Issue 10's target on large; issue 28's on 1m and 10m.
		if want, ok := map[string]float64{"large": 0.85, "1m": 0.9, "10m": 0.9}[r.data]; ok {
			wanted, met = fmt.Sprintf("≥ %.0f%%", 100*want), "yes"
			if ratio < want {
				met = "**no**"
			}
		}
		fmt.Fprintf(w, "| %s: %s | %d | %.0f (small: %.0f) | %.0f%% | %s | %s |\n", r.data, bench.DataSets[r.data], r.conc, r.perSecond, small.perSecond,
			100*ratio, wanted, met)
	}
}
