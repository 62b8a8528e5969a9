package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

func (r result) name() string {
	var s string
	switch r.kind {
	case "worker":
		s = fmt.Sprintf("worker, %d lane%s", r.conc, plural(r.conc))
	case "baseline":
		s = fmt.Sprintf("baseline, %d goroutines", r.conc)
	case "fixed":
		s = fmt.Sprintf("worker, %d lane%s, fixed %.0f%% load", r.conc, plural(r.conc), 100*r.load)
	case "fixed-baseline":
		s = fmt.Sprintf("baseline, %d goroutines, fixed %.0f%% load", r.conc, 100*r.load)
	case "data":
		s = fmt.Sprintf("worker, %d lane%s, %s data", r.conc, plural(r.conc), r.data)
	case "batch":
		s = fmt.Sprintf("batch pgbench (N = %d), %d client%s", r.batch, r.conc, plural(r.conc))
	case "floor":
		s = fmt.Sprintf("broker floor: ack only, prefetch %d", r.conc)
	default:
		s = fmt.Sprintf("pgbench, %d client%s", r.conc, plural(r.conc))
	}
	if r.syncClaims {
		s += ", sync claims"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

const header = `| run | steps | steps/s | p50 | p99 | requeued | CPU µs/step: all | client | broker | postgres | kernel | foreign |
|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|`

func (r result) row() string {
	p50, p99 := "—", "—"
	if r.kind == "worker" || r.kind == "baseline" || r.kind == "fixed" || r.kind == "fixed-baseline" || r.kind == "data" {
		p50, p99 = latency(r.p50), latency(r.p99)
	}
	per := func(d time.Duration) string {
		if r.steps == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", float64(d.Microseconds())/float64(r.steps))
	}
	name := r.name()
	if r.disturbed() {
		name += " (disturbed)"
	}
	return fmt.Sprintf("| %s | %d | %.0f | %s | %s | %d | %s | %s | %s | %s | %s | %s |", name, r.steps, r.perSecond, p50, p99, r.requeued,
		per(r.cpu.machine), per(r.cpu.client), per(r.cpu.broker), per(r.cpu.postgres), per(r.cpu.kernel()), per(r.cpu.foreign))
}

// disturbed tells a run during which other programs took more than a tenth
// of the machine's CPU time: its figures understate what this machine does.
func (r result) disturbed() bool { return r.cpu.foreign*10 > r.cpu.machine }

func latency(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.0f ms", float64(d.Milliseconds()))
}

// bestOf is the fastest run of a kind with asynchronous claims.
func bestOf(rs []result, kind string) result {
	var best result
	for _, r := range rs {
		if r.kind == kind && !r.syncClaims && r.perSecond > best.perSecond {
			best = r
		}
	}
	return best
}

// find is the run of a kind at a concurrency, if measured.
func find(rs []result, kind string, conc int, syncClaims bool) (result, bool) {
	for _, r := range rs {
		if r.kind == kind && r.conc == conc && r.syncClaims == syncClaims {
			return r, true
		}
	}
	return result{}, false
}

// report prints the table of the fastest runs, the targets of the issue (on
// those runs and within each round, since the rounds of a shared machine
// differ), and what synchronous claims cost.
func report(w io.Writer, all []result, rounds int) {
	// The fixed-rate and data runs have tables of their own.
	all = slices.DeleteFunc(slices.Clone(all), func(r result) bool { return r.kind == "fixed" || r.kind == "fixed-baseline" || r.kind == "data" })
	rs := best(all)
	if rounds > 1 {
		fmt.Fprintf(w, "Fastest of %d rounds of each configuration.\n\n", rounds)
	}
	fmt.Fprintln(w, header)
	for _, r := range rs {
		fmt.Fprintln(w, r.row())
	}
	perRound := make([][]target, rounds)
	for i := range perRound {
		perRound[i] = targets(slices.DeleteFunc(slices.Clone(all), func(r result) bool { return r.round != i }))
	}
	if ts := targets(rs); len(ts) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| target | measured | each round | wanted | met |")
		fmt.Fprintln(w, "|---|--:|--:|--:|---|")
		for i, t := range ts {
			var each []string
			met := 0
			for _, round := range perRound {
				if i >= len(round) {
					continue
				}
				each = append(each, fmt.Sprintf("%.0f%%", 100*round[i].ratio))
				if round[i].ratio >= round[i].want {
					met++
				}
			}
			fmt.Fprintf(w, "| %s | %.0f%% | %s | ≥ %.0f%% | %s |\n", t.what, 100*t.ratio, strings.Join(each, ", "), 100*t.want,
				metIn(met, rounds, t.ratio >= t.want))
		}
	}
	reportFloor(w, rs)
	var pairs [][2]result
	for _, r := range rs {
		if async, ok := find(rs, r.kind, r.conc, false); ok && r.syncClaims {
			pairs = append(pairs, [2]result{async, r})
		}
	}
	if len(pairs) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| synchronous_commit of claims and releases | on (SyncClaims) | off (default) | off gains | each round |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	for _, p := range pairs {
		async, sync := p[0], p[1]
		var each []string
		for i := range rounds {
			round := slices.DeleteFunc(slices.Clone(all), func(r result) bool { return r.round != i })
			a, aok := find(round, async.kind, async.conc, false)
			s, sok := find(round, sync.kind, sync.conc, true)
			if aok && sok {
				each = append(each, gain(a, s))
			}
		}
		fmt.Fprintf(w, "| %s | %.0f steps/s | %.0f steps/s | %s | %s |\n", async.name(), sync.perSecond, async.perSecond,
			gain(async, sync), strings.Join(each, ", "))
	}
}

// gain is how much faster async is than sync.
func gain(async, sync result) string {
	return fmt.Sprintf("%+.0f%%", 100*(async.perSecond/sync.perSecond-1))
}

// lowestLanes is the worker run with the fewest lanes.
func lowestLanes(rs []result) (result, bool) {
	var low result
	found := false
	for _, r := range rs {
		if r.kind == "worker" && !r.syncClaims && (!found || r.conc < low.conc) {
			low, found = r, true
		}
	}
	return low, found
}

// batchCeilingShare is issue 10's target 2: the share of the batch
// ceiling's rate the fastest lane count reaches.
const batchCeilingShare = 0.7

// target is one of the targets, measured on a set of runs.
type target struct {
	what        string
	ratio, want float64
}

// targets measures the targets on rs: the fastest lane count against
// the ceiling and the baseline, and the slowest lane count against the
// fewest lanes. A target whose runs are missing is left out.
func targets(rs []result) []target {
	var ts []target
	best, ceiling, base := bestOf(rs, "worker"), bestOf(rs, "pgbench"), bestOf(rs, "baseline")
	if best.perSecond > 0 && ceiling.perSecond > 0 {
		ts = append(ts, target{fmt.Sprintf("fastest lane count (%d) / pgbench ceiling (%d clients)", best.conc, ceiling.conc),
			best.perSecond / ceiling.perSecond, 1.5}) // issue 10: pass the one-step-per-transaction ceiling by half
	}
	if batch := bestOf(rs, "batch"); best.perSecond > 0 && batch.perSecond > 0 {
		ts = append(ts, target{fmt.Sprintf("fastest lane count (%d) / batch ceiling (N = %d, %d clients)", best.conc, batch.batch, batch.conc),
			best.perSecond / batch.perSecond, batchCeilingShare})
	}
	if best.perSecond > 0 && base.perSecond > 0 {
		ts = append(ts, target{fmt.Sprintf("fastest lane count (%d) / baseline", best.conc), best.perSecond / base.perSecond, 0.8})
	}
	if first, ok := lowestLanes(rs); ok {
		worst := first
		for _, r := range rs {
			if r.kind == "worker" && !r.syncClaims && r.perSecond < worst.perSecond {
				worst = r
			}
		}
		ts = append(ts, target{fmt.Sprintf("slowest lane count (%d) / %d lane%s", worst.conc, first.conc, plural(first.conc)),
			worst.perSecond / first.perSecond, 1})
	}
	return ts
}

// metIn says whether a target was met by the table's runs and in how many
// rounds.
func metIn(rounds, of int, table bool) string {
	s := "yes"
	if !table {
		s = "**no**"
	}
	if of > 1 {
		s += fmt.Sprintf(" (%d of %d rounds)", rounds, of)
	}
	return s
}

// reportFloor prints how the fastest lane count's step spent its CPU
// against what 70% of the batch ceiling allows (stepBudget).
func reportFloor(w io.Writer, rs []result) {
	floor, best, batch := bestOf(rs, "floor"), bestOf(rs, "worker"), bestOf(rs, "batch")
	b, ok := stepBudget(floor, best, batch)
	if !ok {
		return
	}
	fmt.Fprintf(w, "\nA step's CPU against 70%% of the batch ceiling: it may cost %.0f µs; the fastest lane count's cost %.0f: "+
		"broker %.0f, load generator %.0f (the broker floor's client), PostgreSQL %.0f, the worker's process %.0f, kernel and others %.0f. "+
		"With the broker, the load generator and PostgreSQL as they were, the worker's process may cost %.0f µs a step. "+
		"(The worker kept %.2f cores busy, the batch ceiling %.2f.)\n",
		b.allowed, b.broker+b.load+b.postgres+b.own+b.kernel, b.broker, b.load, b.postgres, b.own, b.kernel,
		b.allowed-b.broker-b.load-b.postgres-b.kernel, b.cores, b.batchCores)
}
