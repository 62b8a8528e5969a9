package main

import (
	"fmt"
	"io"
	"time"
)

// report is what a soak writes at its end.
type report struct {
	config config
	// rate is the offered relays a second; capacity the drain rate measured
	// before the offer (0: not measured).
	rate, capacity float64
	samples        []sample // the last is the drain after the offer stopped
	seconds        []second // every second, in order
	elapsed        time.Duration
	data           string
	offered        int
	// drained is how long the last relays took to commit once the offer
	// stopped: about a step's latency when the worker kept up, the backlog's
	// drain when it did not.
	drained time.Duration
}

// full are the samples of whole intervals while relays were offered.
func (r report) full() []sample { return r.samples[:len(r.samples)-1] }

func (r report) writeTSV(w io.Writer) error {
	fmt.Fprint(w, "elapsed_s\tpublished\tcommits\tcommits_per_s\tp50_ms\tp99_ms\tp999_ms\twal_bytes_per_s\trss_bytes\tgoroutines")
	for _, t := range tables {
		fmt.Fprintf(w, "\t%[1]s_heap_bytes\t%[1]s_index_bytes\t%[1]s_dead\t%[1]s_autovacuums", t)
	}
	fmt.Fprintln(w)
	for _, x := range r.samples {
		fmt.Fprintf(w, "%.0f\t%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f", x.elapsed.Seconds(), x.published, x.commits, x.perSecond,
			msf(x.p50), msf(x.p99), msf(x.p999), x.walPerS, x.rss, x.goroutine)
		for _, t := range tables {
			v := x.tables[t]
			fmt.Fprintf(w, "\t%d\t%d\t%d\t%d", v.heap, v.indexes, v.dead, v.autovacuums)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// target is one of issue 28's targets, checked on the samples.
type target struct {
	name, measured, wanted string
	met                    bool
}

// targets checks the run: p99 of every interval after the first (the
// warm-up) at most MaxP99; the last interval's p99 within MaxDrift of the
// second's; every table and the worker's RSS at the end within MaxGrow of
// the half-way interval (or 1 MB more, for tables too small for a ratio to
// mean anything); and the offered rate kept up with (the drain after the
// offer stopped is short).
func (r report) targets() []target {
	c, full := r.config, r.full()
	var out []target
	if len(full) < 4 {
		return []target{{name: "enough intervals to judge (4)", measured: fmt.Sprint(len(full)), wanted: "≥ 4", met: false}}
	}
	worst := full[1]
	for _, x := range full[1:] {
		if x.p99 > worst.p99 {
			worst = x
		}
	}
	out = append(out, target{name: "p99 publish → commit, worst interval after the first", measured: fmt.Sprintf("%s (at %v)", ms(worst.p99), worst.elapsed.Round(time.Second)),
		wanted: "≤ " + ms(c.MaxP99), met: worst.p99 <= c.MaxP99})
	second, last, half := full[1], full[len(full)-1], full[len(full)/2]
	drift := float64(last.p99) / float64(max(second.p99, time.Microsecond))
	out = append(out, target{name: "p99 flat: last interval ÷ second", measured: fmt.Sprintf("%.2f× (%s ÷ %s)", drift, ms(last.p99), ms(second.p99)),
		wanted: fmt.Sprintf("≤ %.2f×", c.MaxDrift), met: drift <= c.MaxDrift})
	for _, t := range tables {
		a, b := half.tables[t], last.tables[t]
		sa, sb := a.size(), b.size()
		out = append(out, target{name: "size of " + t + " (heap and indexes): end ÷ half-way", measured: fmt.Sprintf("%.2f× (%s → %s)", float64(sb)/float64(max(sa, 1)), mb(sa), mb(sb)),
			wanted: fmt.Sprintf("≤ %.2f× or +1MB", c.MaxGrow), met: float64(sb) <= c.MaxGrow*float64(sa) || sb <= sa+1<<20})
	}
	out = append(out, target{name: "worker RSS: end ÷ half-way", measured: fmt.Sprintf("%.2f× (%s → %s)", last.rss/max(half.rss, 1), mb(int64(half.rss)), mb(int64(last.rss))),
		wanted: fmt.Sprintf("≤ %.2f×", c.MaxGrow), met: last.rss <= c.MaxGrow*half.rss})
	out = append(out, target{name: "drain once the offer stopped (the backlog left)", measured: r.drained.Round(10 * time.Millisecond).String(),
		wanted: "≤ 2s", met: r.drained <= 2*time.Second})
	return out
}

// writeMarkdown writes the report and returns how many targets it missed.
func (r report) writeMarkdown(w io.Writer) (int, error) {
	c := r.config
	fmt.Fprintf(w, "# Soak: %.0f relays/s for %v\n\n", r.rate, c.Duration)
	if r.capacity > 0 {
		fmt.Fprintf(w, "The offered rate is **%.0f%% of the drain rate** measured first on this machine: the worker drained a backlog of %d relays at %.0f relays/s "+
			"(published as fast as the broker confirms them, first publish to last commit, as `make bench` measures it; SOAK_RATE=%v).\n\n",
			100*r.rate/r.capacity, c.CapacityRelays, r.capacity, c.Rate)
	}
	fmt.Fprintf(w, "The worker binary (`%s`) at its defaults but SUTRA_INBOX_RETENTION=%v and SUTRA_STEP_HISTORY_RETENTION=%v, %d instances of the looping ping process, %s, autovacuum on; %d relays offered, %v in all with the drain. "+
		"Latency is publish → commit (the commit transaction's now() in the relay's inbox row), by the interval the relay committed in.\n\n",
		c.Worker, c.InboxRetention, c.HistoryRetention, c.Instances, r.data, r.offered, r.elapsed.Round(time.Second))
	fmt.Fprintln(w, "| at | commits/s | p50 | p99 | p999 | WAL/s | instances | dead | inbox | outbox | history | RSS | goroutines |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for i, x := range r.samples {
		at := x.elapsed.Round(time.Second).String()
		if i == len(r.samples)-1 {
			at += " (drain)"
		}
		in := x.tables["instances"]
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %.0f |\n", at, x.perSecond, ms(x.p50), ms(x.p99), ms(x.p999),
			mb(int64(x.walPerS)), mb(in.size()), in.dead, mb(x.tables["inbox"].size()),
			mb(x.tables["outbox"].size()), mb(x.tables["step_history"].size()), mb(int64(x.rss)), x.goroutine)
	}
	fmt.Fprintln(w, "\n| target | measured | wanted | met |")
	fmt.Fprintln(w, "|---|--:|--:|---|")
	missed := 0
	for _, t := range r.targets() {
		met := "yes"
		if !t.met {
			met, missed = "**no**", missed+1
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.name, t.measured, t.wanted, met)
	}
	if worst := worstSeconds(r.seconds, 5); len(worst) > 0 {
		fmt.Fprintln(w, "\nThe seconds of the highest p99 (seconds.jsonl has every second):")
		fmt.Fprintln(w, "\n| at | commits | p50 | p99 | transactions | waits sampled most (of 10 a second) | checkpoints | autovacuums | GC pause | lane wait p99 |")
		fmt.Fprintln(w, "|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|")
		for _, x := range worst {
			fmt.Fprintf(w, "| %.0fs | %d | %.1fms | %.1fms | %d | %s | %d | %d (%d running) | %.2fms in %.0f | %.1fms |\n", x.Elapsed, x.Commits, x.P50, x.P99, x.Transactions,
				x.topWaits(4), x.Checkpoints, x.Autovacuums, x.AutovacuumWorkers, x.GCPause, x.GCs, x.LaneWaitP99)
		}
	}
	fmt.Fprintln(w, "\nThe plot (soak.png) shows p99 and the instances table's size by interval; samples.tsv has every figure.")
	return missed, nil
}
