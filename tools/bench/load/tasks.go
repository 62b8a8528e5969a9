package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/tools/bench"
)

// taskRun is one measurement of the task round trip: instances of
// bench.TasksXML (three sequential tasks each) worked by concurrent workers
// over the external-task API (fetchAndLock with a long poll, then complete)
// until every instance has completed its three tasks.
//
// At full load K instances wait on their first task before the clock starts
// and the workers go as fast as they can: the rate is the throughput, and
// the latency is mostly queueing behind the other instances' tasks. At a
// fraction of that rate, or at a fixed rate, instances are started by relays
// at a third of it (three tasks each), so the workers wait for tasks rather
// than tasks for workers: the latency is the round trip's own.
//
// Every run is made with the fast path on (SUTRA_TASK_FAST_PATH, the
// default) and off, in the same round.
type taskRun struct {
	round    int
	fastPath bool
	// load is the fraction of the full run's task rate offered (1: as fast
	// as the workers go; 0: a fixed rate); offered is that rate.
	load    float64
	offered float64
	tasks   int
	// tasksPerS is tasks completed over the time from the first fetch to
	// the last 204.
	tasksPerS float64
	// p50 and p99 are of the time from a task's 204 to the lock of its
	// instance's next task by a worker: the step that creates the next task
	// (after the fast path's hand-off, or the outbox relay and the consumer)
	// and the long poll it wakes.
	p50, p99 time.Duration
	// The parts of the round trip, p99 each: the outcome's relay from its
	// commit to the broker's confirm, a resume's wait in its lane, a
	// step's claim → commit, and the next task from its creation to its lock.
	outboxP99, laneP99, stepP99, waitP99 time.Duration
	cpu                                  cpuUse
}

// measureTasks measures the task round trip with the fast path on, then
// off: as fast as the workers go, then at -task-loads fractions of that rate
// and at the -task-rates fixed rates.
func (b *bencher) measureTasks(ctx context.Context) error {
	for _, fast := range []bool{true, false} {
		var full float64
		for _, load := range b.o.taskLoads {
			r, err := b.taskRun(ctx, fast, load, load*full)
			if err != nil {
				return fmt.Errorf("tasks at %.0f%% load (fast path %v): %w", 100*load, fast, err)
			}
			if load == 1 {
				full = r.tasksPerS
			}
			b.addTaskRun(r)
		}
		for _, rate := range b.o.taskRates {
			r, err := b.taskRun(ctx, fast, 0, float64(rate))
			if err != nil {
				return fmt.Errorf("tasks at %d/s (fast path %v): %w", rate, fast, err)
			}
			b.addTaskRun(r)
		}
	}
	return nil
}

func (b *bencher) addTaskRun(r taskRun) {
	r.round = b.round
	fmt.Fprintf(os.Stderr, "  %s\n", r.row())
	b.taskRuns = append(b.taskRuns, r)
}

// taskRun runs b.o.taskWorkers workers against a worker with b.o.taskLanes
// lanes and the fast path on or off; rate > 0 spaces the completions to
// that many a second.
func (b *bencher) taskRun(ctx context.Context, fastPath bool, load, rate float64) (taskRun, error) {
	r := taskRun{fastPath: fastPath, load: load, offered: rate}
	k := b.o.instances
	if rate > 0 {
		k = 0 // started by relays, at the rate
	}
	env, err := b.envOf(ctx, "tasks", bench.TasksXML, k)
	if err != nil {
		return r, err
	}
	defer env.Close()
	env.Config.Tasks.FastPath = fastPath
	w, reg, stop, err := b.startWorker(ctx, env, b.o.taskLanes, false)
	if err != nil {
		return r, err
	}
	defer stop()
	if err := waitReady(ctx, w, "task run"); err != nil {
		return r, err
	}
	c := &taskClient{base: "http://" + w.APIAddr() + "/engine-rest/external-task", done: map[string]time.Time{}}
	want := 3 * b.o.instances
	var starts []loadgen.Relay
	if rate > 0 {
		starts = tasks3Starts(b.o.instances)
	}
	pub, err := loadgen.Dial(env.Config.Broker.URL, env.Config.RelayExchange)
	if err != nil {
		return r, err
	}
	defer pub.Close()
	b.waitQuiet(ctx, "tasks")
	stopProfile, err := b.profile(r.name())
	if err != nil {
		return r, err
	}
	cpu := startCPU(b.dbName)
	began := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, b.o.taskWorkers+1)
	if rate > 0 {
		go func() {
			if err := pub.PublishAt(rctx, starts, rate/3); err != nil && rctx.Err() == nil {
				errs <- err
				cancel()
			}
		}()
	}
	var wg sync.WaitGroup
	for i := range b.o.taskWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.work(rctx, fmt.Sprintf("bench-%d", i), want); err != nil && rctx.Err() == nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	r.cpu = cpu.finish()
	stopProfile()
	select {
	case err := <-errs:
		return r, err
	default:
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	r.tasks = c.completed
	r.tasksPerS = float64(c.completed) / c.last.Sub(began).Seconds()
	slices.Sort(c.latencies)
	r.p50, r.p99 = percentile(c.latencies, 0.5), percentile(c.latencies, 0.99)
	r.outboxP99 = histogram(reg, "sutra_outbox_lag_seconds").quantile(0.99)
	r.laneP99 = histogram(reg, "sutra_lane_wait_seconds").quantile(0.99)
	r.stepP99 = histogram(reg, "sutra_step_duration_seconds").quantile(0.99)
	r.waitP99 = histogram(reg, "sutra_task_wait_seconds").quantile(0.99)
	return r, nil
}

// tasks3Starts are the relays that start n instances of bench.TasksXML.
func tasks3Starts(n int) []loadgen.Relay {
	starts := make([]loadgen.Relay, n)
	for i := range starts {
		id := "start-" + strconv.Itoa(i)
		starts[i] = loadgen.Relay{ID: id, Body: map[string]any{"start": "tasks3", "instance_id": id}}
	}
	return starts
}

// taskClient is the workers' shared state.
type taskClient struct {
	base string
	mu   sync.Mutex
	// done is when each instance's latest task was answered 204.
	done      map[string]time.Time
	latencies []time.Duration
	completed int
	last      time.Time
}

// work fetches one task at a time, with a long poll, and completes it, until
// want tasks are completed in all.
func (c *taskClient) work(ctx context.Context, worker string, want int) error {
	fetch := map[string]any{"workerId": worker, "maxTasks": 1, "asyncResponseTimeout": 1000,
		"topics": []map[string]any{{"topicName": bench.TaskTopic, "lockDuration": 60000}}}
	for {
		c.mu.Lock()
		finished := c.completed >= want
		c.mu.Unlock()
		if finished {
			return nil
		}
		var tasks []struct {
			ID       string `json:"id"`
			Instance string `json:"processInstanceId"`
		}
		if err := c.post(ctx, "/fetchAndLock", fetch, http.StatusOK, &tasks); err != nil {
			return err
		}
		locked := time.Now()
		for _, t := range tasks {
			c.mu.Lock()
			if prev, ok := c.done[t.Instance]; ok {
				c.latencies = append(c.latencies, locked.Sub(prev))
			}
			c.mu.Unlock()
			if err := c.post(ctx, "/"+t.ID+"/complete", map[string]any{"workerId": worker}, http.StatusNoContent, nil); err != nil {
				return err
			}
			now := time.Now()
			c.mu.Lock()
			c.done[t.Instance], c.last = now, now
			c.completed++
			c.mu.Unlock()
		}
	}
}

func (c *taskClient) post(ctx context.Context, route string, body any, want int, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+route, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %s %s", route, resp.Status, answer)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}

// percentile of sorted durations (0 when there are none).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func (r taskRun) name() string {
	fp := "fast path off"
	if r.fastPath {
		fp = "fast path on"
	}
	switch r.load {
	case 1:
		return "tasks, " + fp + ", full"
	case 0:
		return fmt.Sprintf("tasks, %s, %.0f/s", fp, r.offered)
	}
	return fmt.Sprintf("tasks, %s, %.0f%% (%.0f/s)", fp, 100*r.load, r.offered)
}

func (r taskRun) row() string {
	ms := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	per := func(d time.Duration) int64 { return d.Microseconds() / int64(max(r.tasks, 1)) }
	return fmt.Sprintf("%-26s %6d tasks %8.0f tasks/s   complete → next lock p50 %-9v p99 %-9v (p99 of: outbox %v, lane wait %v, step %v, task wait %v)"+
		"   CPU µs/task: all %d, client %d, broker %d, postgres %d, foreign %d",
		r.name(), r.tasks, r.tasksPerS, ms(r.p50), ms(r.p99), ms(r.outboxP99), ms(r.laneP99), ms(r.stepP99), ms(r.waitP99),
		per(r.cpu.machine), per(r.cpu.client), per(r.cpu.broker), per(r.cpu.postgres), per(r.cpu.foreign))
}

// reportTasks prints the task runs of the round whose full run with the
// fast path was fastest, and the figures: tasks/s with the fast path
// against without it, and complete → next lock at the fixed rates and at
// half the peak, each way.
func reportTasks(w io.Writer, runs []taskRun, lanes int) {
	if len(runs) == 0 {
		return
	}
	bestRound, fastest := 0, 0.0
	for _, r := range runs {
		if r.fastPath && r.load == 1 && r.tasksPerS > fastest {
			bestRound, fastest = r.round, r.tasksPerS
		}
	}
	fmt.Fprintf(w, "\nTask round trip (%d lanes, 3 sequential service tasks per instance, fetchAndLock with a long poll + complete over HTTP):\n", lanes)
	full := map[bool]*taskRun{}
	for i, r := range runs {
		if r.round != bestRound {
			continue
		}
		fmt.Fprintf(w, "  %s\n", r.row())
		if r.load == 1 {
			full[r.fastPath] = &runs[i]
		}
	}
	if on, off := full[true], full[false]; on != nil && off != nil && off.tasksPerS > 0 {
		fmt.Fprintf(w, "  target: tasks/s with the fast path ≥ 2× without: %.0f / %.0f = %.2f×\n", on.tasksPerS, off.tasksPerS, on.tasksPerS/off.tasksPerS)
	}
	for _, r := range runs {
		if r.round == bestRound && r.load != 1 {
			fmt.Fprintf(w, "  complete → next lock, %s: p50 %v, p99 %v\n", r.name(), r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond))
		}
	}
}
