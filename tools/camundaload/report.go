package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// sample is the state of the run at one moment.
type sample struct {
	at time.Duration
	// roots and children started and completed so far, and active now.
	roots, rootsDone, rootsActive       int
	children, childDone, childrenActive int
	// other are instances that ended otherwise (terminated, cancelled) or
	// stopped in an incident.
	other int
	// jobs open, of which waiting for an activation.
	jobs, jobsWaiting int
	cpu               cpuUse
}

func takeSample(ctx context.Context, db *pgxpool.Pool, at time.Duration) (sample, error) {
	s := sample{at: at}
	err := db.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE definition_key = $1),
		count(*) FILTER (WHERE definition_key = $1 AND status = 'completed'),
		count(*) FILTER (WHERE definition_key = $1 AND status = 'active'),
		count(*) FILTER (WHERE definition_key = $2),
		count(*) FILTER (WHERE definition_key = $2 AND status = 'completed'),
		count(*) FILTER (WHERE definition_key = $2 AND status = 'active'),
		count(*) FILTER (WHERE status NOT IN ('active', 'completed'))
		FROM instances`, rootProcess, childProcess).
		Scan(&s.roots, &s.rootsDone, &s.rootsActive, &s.children, &s.childDone, &s.childrenActive, &s.other)
	if err != nil {
		return s, err
	}
	if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE locked_by IS NULL) FROM tasks`).Scan(&s.jobs, &s.jobsWaiting); err != nil {
		return s, err
	}
	var incidents int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM incidents WHERE resolved_at IS NULL`).Scan(&incidents); err == nil {
		s.other += incidents
	}
	return s, nil
}

func (s sample) row() string {
	return fmt.Sprintf("t=%4.0fs roots %5d started %5d done %4d active | children %6d started %6d done %5d active | jobs open %5d (waiting %5d) | other %d | worker %.2f cores, postgres %.2f, client %.2f, machine %.2f",
		s.at.Seconds(), s.roots, s.rootsDone, s.rootsActive, s.children, s.childDone, s.childrenActive, s.jobs, s.jobsWaiting, s.other,
		s.cpu.cores(s.cpu.worker), s.cpu.cores(s.cpu.postgres), s.cpu.cores(s.cpu.client), s.cpu.cores(s.cpu.machine))
}

// result is one run's figures.
type result struct {
	rate                  float64
	duration, wall        time.Duration
	samples               []sample
	client                clientLine
	clientErrors          []string
	cpu                   cpuUse
	loadBefore, loadAfter string
	worker                workerFigures
	// rootsIn and childrenIn are the instances started in the Starter's
	// window; the latencies are of those that completed.
	rootsIn, childrenIn      int
	rootLat, childLat        []time.Duration
	rootsDoneIn, childDoneIn int // completed within the window
}

// latencies reads the start-to-end time of every root and child started in
// [began, end), and how many of all completed within it.
func (r *result) latencies(ctx context.Context, db *pgxpool.Pool, began, end time.Time) error {
	rows, err := db.Query(ctx, `SELECT definition_key, status, created_at, updated_at FROM instances
		WHERE definition_key IN ($1, $2)`, rootProcess, childProcess)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, status string
		var created, updated time.Time
		if err := rows.Scan(&key, &status, &created, &updated); err != nil {
			return err
		}
		in := !created.Before(began) && created.Before(end)
		done := status == "completed"
		doneIn := done && !updated.Before(began) && updated.Before(end)
		if key == rootProcess {
			r.rootsIn += b2i(in)
			r.rootsDoneIn += b2i(doneIn)
			if in && done {
				r.rootLat = append(r.rootLat, updated.Sub(created))
			}
		} else {
			r.childrenIn += b2i(in)
			r.childDoneIn += b2i(doneIn)
			if in && done {
				r.childLat = append(r.childLat, updated.Sub(created))
			}
		}
	}
	slices.Sort(r.rootLat)
	slices.Sort(r.childLat)
	return rows.Err()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// percentile of sorted durations (0 when empty).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// backlogSlope is the least-squares slope, in roots a second, of the active
// roots over the second half of the Starter's window: near zero when the
// worker keeps up, the excess of the rate over the roots completed when it
// does not. (The children come and go in bursts of 50: their count says
// less.)
func backlogSlope(samples []sample, window time.Duration) float64 {
	var xs, ys []float64
	for _, s := range samples {
		if s.at >= window/2 && s.at <= window {
			xs = append(xs, s.at.Seconds())
			ys = append(ys, float64(s.rootsActive))
		}
	}
	n := float64(len(xs))
	if n < 3 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// flat reports whether a backlog slope is flat for a run at rate roots/s:
// active roots growing by less than 5% of the rate.
func flat(slope, rate float64) bool { return slope < 0.05*rate }

func (r result) print(w io.Writer) {
	secs := r.duration.Seconds()
	fmt.Fprintf(w, "\nCamunda's realistic benchmark at %g roots/s for %v (load average %s before, %s after):\n", r.rate, r.duration, r.loadBefore, r.loadAfter)
	fmt.Fprintf(w, "  roots/s started %.2f, completed %.2f (%.2f over the second half); PI/s started %.1f, completed %.1f (%.1f over the second half); jobs/s completed %.1f (p99 of CreateProcessInstance %d ms, PublishMessage %d ms, CompleteJob %d ms)\n",
		float64(r.rootsIn)/secs, float64(r.rootsDoneIn)/secs, r.secondHalf(rootsDone), float64(r.rootsIn+r.childrenIn)/secs,
		float64(r.rootsDoneIn+r.childDoneIn)/secs, r.secondHalf(allDone), float64(r.client.jobs())/r.wall.Seconds(), r.client.StartP99ms, r.client.PublishP99ms, r.client.CompleteP99ms)
	slope := r.slope()
	verdict := "flat"
	if !flat(slope, r.rate) {
		verdict = "GROWING"
	}
	fmt.Fprintf(w, "  backlog (active roots) over the second half: %+.3f roots/s: %s\n", slope, verdict)
	f := r.worker
	fmt.Fprintf(w, "  worker: %.0f steps (%.0f/s), step (claim to commit) mean %v p99 %v; lane wait mean %v p99 %v; claim bounces %.0f; job activation p99 %v; API calls refused busy %.0f\n",
		f.steps, f.steps/r.wall.Seconds(), ms(f.stepMean), f.stepP99, ms(f.laneWaitMean), f.laneWaitP99,
		f.bounces, f.activationP99, f.busy)
	fmt.Fprintf(w, "  roots: %d of %d completed, p50 %v p99 %v max %v\n", len(r.rootLat), r.rootsIn,
		ms(percentile(r.rootLat, 0.5)), ms(percentile(r.rootLat, 0.99)), ms(percentile(r.rootLat, 1)))
	fmt.Fprintf(w, "  children: %d of %d completed, p50 %v p99 %v max %v\n", len(r.childLat), r.childrenIn,
		ms(percentile(r.childLat, 0.5)), ms(percentile(r.childLat, 0.99)), ms(percentile(r.childLat, 1)))
	fmt.Fprintf(w, "  CPU (cores): worker %.2f, PostgreSQL %.2f, Node client %.2f, machine %.2f\n",
		r.cpu.cores(r.cpu.worker), r.cpu.cores(r.cpu.postgres), r.cpu.cores(r.cpu.client), r.cpu.cores(r.cpu.machine))
	if len(r.clientErrors) > 0 || r.client.Errors > 0 {
		fmt.Fprintf(w, "  client errors: %d (%s)\n", r.client.Errors, strings.Join(r.clientErrors, "; "))
	}
	fmt.Fprintln(w, "  backlog over time:")
	for _, s := range r.samples {
		fmt.Fprintf(w, "    %s\n", s.row())
	}
}

func (r result) slope() float64 { return backlogSlope(r.samples, r.duration) }

// secondHalf is the rate a second at which count grew over the second half
// of the Starter's window (the first includes the ramp of the first roots,
// which complete no sooner than their workers' 1.5 s of delays).
func (r result) secondHalf(count func(sample) int) float64 {
	var from, to *sample
	for i := range r.samples {
		s := &r.samples[i]
		if s.at >= r.duration/2 && from == nil {
			from = s
		}
		if s.at <= r.duration {
			to = s
		}
	}
	if from == nil || to == nil || to.at <= from.at {
		return 0
	}
	return float64(count(*to)-count(*from)) / (to.at - from.at).Seconds()
}

func rootsDone(s sample) int { return s.rootsDone }
func allDone(s sample) int   { return s.rootsDone + s.childDone }

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// summary prints one line per run and the target.
func summary(w io.Writer, rs []result) {
	fmt.Fprintln(w, "\nSummary (target: 2 roots/s held with a flat backlog, children p99 < 1 s, roots p99 < 3 s):")
	for _, r := range rs {
		secs := r.duration.Seconds()
		verdict := "flat"
		if !flat(r.slope(), r.rate) {
			verdict = "growing"
		}
		fmt.Fprintf(w, "  %g roots/s: started %.2f/s completed %.2f/s, PI/s %.1f, jobs/s %.1f, backlog %s, children p99 %v, roots p99 %v, worker %.2f cores\n",
			r.rate, float64(r.rootsIn)/secs, r.secondHalf(rootsDone), r.secondHalf(allDone),
			float64(r.client.jobs())/r.wall.Seconds(), verdict, ms(percentile(r.childLat, 0.99)), ms(percentile(r.rootLat, 0.99)),
			r.cpu.cores(r.cpu.worker))
	}
}
