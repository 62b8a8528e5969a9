package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/entities"
	"github.com/camunda/zeebe/clients/go/v8/pkg/worker"
	"github.com/camunda/zeebe/clients/go/v8/pkg/zbc"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/tools/bench"
)

// jobRun is one measurement of the job round trip over the Zeebe gateway:
// instances of bench.TasksXML (three sequential service tasks) worked by
// job workers of Zeebe's Go client (zbc) with streamed activation, each
// completing one job at a time, until every instance has completed its
// three jobs.
//
// At full load K instances wait on their first job before the clock starts
// and the workers go as fast as they can. At a fixed rate, instances are
// started by relays at a third of it, so the workers wait for jobs: the
// latency is the round trip's own.
type jobRun struct {
	round int
	// fastPath is whether the worker hands completions to its lanes at
	// once (SUTRA_TASK_FAST_PATH).
	fastPath bool
	// longPoll: the workers activate by ActivateJobs long polls, not streams.
	longPoll bool
	// rest: the workers activate and complete over /v2 (long polls), not
	// the gateway.
	rest bool
	// rate is the job rate offered (0: as fast as the workers go).
	rate     float64
	jobs     int
	jobsPerS float64
	// p50 and p99 are of the time from a CompleteJob's answer to the
	// activation of the instance's next job, as the worker sees it.
	p50, p99 time.Duration
	// activationP99 is sutra_job_activation_seconds's p99: a job's creation
	// to its lock.
	activationP99 time.Duration
	cpu           cpuUse
}

// measureJobs measures the job round trip as fast as the workers go, then
// at 100 jobs/s and at half the full run's rate, with the fast path on and
// then off; then at 100 jobs/s with long polls in place of streams, and
// what idle streams and long polls cost.
func (b *bencher) measureJobs(ctx context.Context) error {
	for _, fast := range []bool{true, false} {
		full, err := b.jobRun(ctx, fast, false, false, 0)
		if err != nil {
			return fmt.Errorf("jobs at full load (fast path %v): %w", fast, err)
		}
		runs := []jobRun{full}
		for _, rate := range []float64{100, full.jobsPerS / 2} {
			r, err := b.jobRun(ctx, fast, false, false, rate)
			if err != nil {
				return fmt.Errorf("jobs at %.0f/s (fast path %v): %w", rate, fast, err)
			}
			runs = append(runs, r)
		}
		for _, r := range runs {
			r.round = b.round
			fmt.Fprintf(os.Stderr, "  %s\n", r.row())
			b.jobRuns = append(b.jobRuns, r)
		}
	}
	r, err := b.jobRun(ctx, true, true, false, 100)
	if err != nil {
		return fmt.Errorf("jobs at 100/s by long polls: %w", err)
	}
	r.round = b.round
	fmt.Fprintf(os.Stderr, "  %s\n", r.row())
	b.jobRuns = append(b.jobRuns, r)
	for _, rate := range []float64{0, 100} {
		r, err := b.jobRun(ctx, true, true, true, rate)
		if err != nil {
			return fmt.Errorf("jobs over /v2 at %.0f/s: %w", rate, err)
		}
		r.round = b.round
		fmt.Fprintf(os.Stderr, "  %s\n", r.row())
		b.jobRuns = append(b.jobRuns, r)
	}
	idle, err := b.idleJobs(ctx)
	if err != nil {
		return fmt.Errorf("idle job streams and long polls: %w", err)
	}
	fmt.Fprintf(os.Stderr, "  %s\n", idle.row())
	b.idleRuns = append(b.idleRuns, idle)
	return nil
}

// jobRun runs b.o.jobWorkers streaming job workers against a worker with
// b.o.jobLanes lanes and the fast path on or off; rate > 0 starts
// instances at rate/3 a second. rest: b.o.jobWorkers REST workers
// (restWorker) over /v2 in place of the Go client's.
func (b *bencher) jobRun(ctx context.Context, fastPath, longPoll, rest bool, rate float64) (jobRun, error) {
	r := jobRun{fastPath: fastPath, longPoll: longPoll, rest: rest, rate: rate}
	k := b.o.instances
	if rate > 0 {
		k = 0 // started by relays, at the rate
	}
	env, err := b.envOf(ctx, "jobs", bench.TasksXML, k)
	if err != nil {
		return r, err
	}
	defer env.Close()
	env.Config.Gateway.Addr = "127.0.0.1:0"
	env.Config.Tasks.FastPath = fastPath
	w, reg, stop, err := b.startWorker(ctx, env, b.o.jobLanes, false)
	if err != nil {
		return r, err
	}
	defer stop()
	if err := waitReady(ctx, w, "job run"); err != nil {
		return r, err
	}
	client, err := zbc.NewClient(&zbc.ClientConfig{GatewayAddress: w.GatewayAddr(), UsePlaintextConnection: true})
	if err != nil {
		return r, err
	}
	defer client.Close()
	var starts []loadgen.Relay
	if rate > 0 {
		starts = tasks3Starts(b.o.instances)
	}
	pub, err := loadgen.Dial(env.Config.Broker.URL, env.Config.RelayExchange)
	if err != nil {
		return r, err
	}
	defer pub.Close()
	b.waitQuiet(ctx, "jobs")
	stopProfile, err := b.profile(r.name())
	if err != nil {
		return r, err
	}
	cpu := startCPU(b.dbName)
	c := &jobClient{done: map[int64]time.Time{}, want: 3 * b.o.instances, all: make(chan struct{}), errs: make(chan error, 1)}
	began := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if rate > 0 {
		go func() {
			if err := pub.PublishAt(rctx, starts, rate/3); err != nil && rctx.Err() == nil {
				c.fail(err)
			}
		}()
	}
	if rest {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: b.o.jobWorkers}}
		var running sync.WaitGroup
		for i := range b.o.jobWorkers {
			running.Go(func() { restWorker(rctx, hc, w.APIAddr(), fmt.Sprintf("bench-%d", i), c) })
		}
		select {
		case <-c.all:
		case err = <-c.errs:
		case <-ctx.Done():
			err = ctx.Err()
		}
		cancel()
		running.Wait()
		r.cpu = cpu.finish()
		stopProfile()
		if err != nil {
			return r, err
		}
		return c.result(r, began, reg), nil
	}
	workers := make([]worker.JobWorker, b.o.jobWorkers)
	for i := range workers {
		// One job at a time each, pushed by its stream; its poll is the
		// client's fallback and answers at once.
		jw := client.NewJobWorker().JobType(bench.TaskTopic).Handler(c.handle).Name(fmt.Sprintf("bench-%d", i)).
			Timeout(time.Minute).Concurrency(1).MaxJobsActive(1)
		if longPoll {
			// One long poll at a time each, waiting up to 10 s (Zeebe's default).
			workers[i] = jw.RequestTimeout(10 * time.Second).Open()
		} else {
			workers[i] = jw.StreamEnabled(true).RequestTimeout(-time.Millisecond).Open()
		}
	}
	var err2 error
	select {
	case <-c.all:
	case err2 = <-c.errs:
	case <-ctx.Done():
		err2 = ctx.Err()
	}
	// A handler still returning when its worker closes blocks the close for
	// ever (zbc 8.4 hands its end to the worker's poller or streamer, which
	// the close stops): close once every handler has returned.
	c.handling.Wait()
	for _, jw := range workers {
		jw.Close()
		jw.AwaitClose()
	}
	r.cpu = cpu.finish()
	stopProfile()
	if err2 != nil {
		return r, err2
	}
	return c.result(r, began, reg), nil
}

// result fills r with what the workers measured since began.
func (c *jobClient) result(r jobRun, began time.Time, reg *prometheus.Registry) jobRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.jobs = c.completed
	r.jobsPerS = float64(c.completed) / c.last.Sub(began).Seconds()
	slices.Sort(c.latencies)
	r.p50, r.p99 = percentile(c.latencies, 0.5), percentile(c.latencies, 0.99)
	r.activationP99 = histogram(reg, "sutra_job_activation_seconds").quantile(0.99)
	return r
}

// jobClient is the job workers' shared state.
type jobClient struct {
	mu sync.Mutex
	// done is when each instance's latest job's completion was answered.
	done      map[int64]time.Time
	latencies []time.Duration
	completed int
	want      int
	last      time.Time
	all       chan struct{} // closed at want completions
	errs      chan error
	// handling counts the handlers running.
	handling sync.WaitGroup
}

func (c *jobClient) handle(jc worker.JobClient, job entities.Job) {
	c.handling.Add(1)
	defer c.handling.Done()
	c.activated(job.ProcessInstanceKey, time.Now())
	if _, err := jc.NewCompleteJobCommand().JobKey(job.Key).Send(context.Background()); err != nil {
		c.fail(err)
		return
	}
	c.completedNow(job.ProcessInstanceKey)
}

// activated records that instance's next job was activated at: the time
// since its previous job's completion was answered.
func (c *jobClient) activated(instance int64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.done[instance]; ok {
		c.latencies = append(c.latencies, at.Sub(prev))
	}
}

// completedNow records that a job of instance's completion was answered.
func (c *jobClient) completedNow(instance int64) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done[instance], c.last = now, now
	c.completed++
	if c.completed == c.want {
		close(c.all)
	}
}

func (c *jobClient) fail(err error) {
	select {
	case c.errs <- err:
	default:
	}
}

func (r jobRun) name() string {
	path := "fast path"
	if !r.fastPath {
		path = "no fast path"
	}
	if r.rest {
		path += ", /v2"
	} else if r.longPoll {
		path += ", long polls"
	}
	if r.rate == 0 {
		return "jobs, " + path + ", full"
	}
	return fmt.Sprintf("jobs, %s, %.0f/s", path, r.rate)
}

func (r jobRun) row() string {
	ms := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	per := func(d time.Duration) int64 { return d.Microseconds() / int64(max(r.jobs, 1)) }
	return fmt.Sprintf("%-26s %6d jobs %8.0f jobs/s   complete → next activation p50 %-9v p99 %-9v (activation p99 %v)"+
		"   CPU µs/job: all %d, client %d, broker %d, postgres %d, foreign %d",
		r.name(), r.jobs, r.jobsPerS, ms(r.p50), ms(r.p99), ms(r.activationP99),
		per(r.cpu.machine), per(r.cpu.client), per(r.cpu.broker), per(r.cpu.postgres), per(r.cpu.foreign))
}

// reportJobs prints the job runs of the round with the fastest full run,
// and the targets at 100 jobs/s.
func reportJobs(w io.Writer, runs []jobRun, idle []idleRun, steps map[int]float64, lanes, workers int) {
	if len(runs) == 0 {
		return
	}
	bestRound, fastest := 0, 0.0
	for _, r := range runs {
		if r.fastPath && r.rate == 0 && !r.rest && r.jobsPerS > fastest {
			bestRound, fastest = r.round, r.jobsPerS
		}
	}
	fmt.Fprintf(w, "\nJob round trip (%d lanes, %d Go client job workers with streamed activation, 3 sequential service tasks per instance):\n", lanes, workers)
	without := 0.0
	var full, at100, restFull jobRun
	for _, r := range runs {
		if r.round != bestRound {
			continue
		}
		fmt.Fprintf(w, "  %s\n", r.row())
		if r.rate == 100 && r.fastPath {
			fmt.Fprintf(w, "  target: at 100 jobs/s p50 ≤ 5 ms, p99 ≤ 50 ms: %v, %v\n", r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond))
		}
		switch {
		case r.rest && r.rate == 0:
			restFull = r
		case r.rest:
		case r.rate == 0 && !r.fastPath:
			without = r.jobsPerS
		case r.rate == 0:
			full = r
		case r.rate == 100 && r.fastPath && !r.longPoll:
			at100 = r
		}
	}
	if without > 0 {
		fmt.Fprintf(w, "  target: jobs/s with the fast path ≥ 2× without it: %.2f×\n", fastest/without)
	}
	if restFull.jobs > 0 {
		fmt.Fprintf(w, "  target: /v2 jobs/s at full load ≥ 90%% of the gRPC stream's: %.0f%% (%.0f / %.0f)\n", 100*restFull.jobsPerS/fastest, restFull.jobsPerS, fastest)
	}
	if s := steps[bestRound]; s > 0 {
		fmt.Fprintf(w, "  target: jobs/s at full load ≥ 25%% of relay steps/s in the same round: %.0f%% (%.0f / %.0f)\n", 100*fastest/s, fastest, s)
	}
	if full.jobs > 0 && at100.jobs > 0 {
		// Other programs' CPU (foreign) left out: the machine is shared.
		per := func(r jobRun) float64 {
			return float64((r.cpu.machine - r.cpu.foreign).Microseconds()) / float64(r.jobs)
		}
		fmt.Fprintf(w, "  target: CPU a job (all but foreign) at 100 jobs/s ≤ 2× at full load: %.2f× (%.0f / %.0f µs)\n", per(at100)/per(full), per(at100), per(full))
	}
	for _, r := range idle {
		if r.round == bestRound {
			fmt.Fprintf(w, "  %s\n  target: idle streams and long polls add ≤ 2%% of a core to PostgreSQL: %.2f%%\n", r.row(), r.postgresShare())
		}
	}
}
