package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/entities"
	"github.com/camunda/zeebe/clients/go/v8/pkg/zbc"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/tools/bench"
)

// idleStreams, idleLongPolls and idleRESTPolls are what idleJobs opens;
// idleTime is how long it measures them.
const (
	idleStreams   = 64
	idleLongPolls = 64
	idleRESTPolls = 64
	idleTime      = 10 * time.Second
)

// idleRun is what idle job streams and long polls cost: the machine's and
// PostgreSQL's CPU over idleTime with them open (cpu), and over idleTime
// before they opened (base): the worker's other loops and, on a shared
// machine, the server's shared processes working for other databases.
type idleRun struct {
	round     int
	cpu, base cpuUse
}

// idleJobs opens idleStreams job streams, idleLongPolls ActivateJobs long
// polls and idleRESTPolls /v2 activation long polls (a minute each, polled
// again as they end) of a type that no job has, on a worker with
// b.o.jobLanes lanes, and measures the CPU they cost over idleTime once all
// are open.
func (b *bencher) idleJobs(ctx context.Context) (idleRun, error) {
	var r idleRun
	env, err := b.envOf(ctx, "idle", bench.TasksXML, 0)
	if err != nil {
		return r, err
	}
	defer env.Close()
	env.Config.Gateway.Addr = "127.0.0.1:0"
	env.Config.API.Addr = "127.0.0.1:0"
	w, reg, stop, err := b.startWorker(ctx, env, b.o.jobLanes, false)
	if err != nil {
		return r, err
	}
	defer stop()
	if err := waitReady(ctx, w, "idle job run"); err != nil {
		return r, err
	}
	client, err := zbc.NewClient(&zbc.ClientConfig{GatewayAddress: w.GatewayAddr(), UsePlaintextConnection: true})
	if err != nil {
		return r, err
	}
	defer client.Close()
	b.waitQuiet(ctx, "idle jobs")
	if r.base, err = idleCPU(ctx, b.dbName); err != nil {
		return r, err
	}
	octx, cancel := context.WithCancel(ctx)
	var open sync.WaitGroup
	defer func() { cancel(); open.Wait() }()
	const typ = "bench-idle"
	for i := range idleStreams {
		open.Go(func() {
			jobs := make(chan entities.Job, 1)
			_ = client.NewStreamJobsCommand().JobType(typ).Consumer(jobs).WorkerName(fmt.Sprintf("idle-stream-%d", i)).
				Timeout(time.Minute).Send(octx) // ends with octx
		})
	}
	for i := range idleLongPolls {
		open.Go(func() {
			for octx.Err() == nil {
				// The client asks for a long poll as long as its context lasts.
				pctx, cancel := context.WithTimeout(octx, time.Minute)
				_, _ = client.NewActivateJobsCommand().JobType(typ).MaxJobsToActivate(1).WorkerName(fmt.Sprintf("idle-poll-%d", i)).
					Timeout(time.Minute).Send(pctx)
				cancel()
			}
		})
	}
	hc := &http.Client{}
	for i := range idleRESTPolls {
		open.Go(func() {
			for octx.Err() == nil {
				if _, err := restPost(octx, hc, w.APIAddr(), "/v2/jobs/activation", map[string]any{"type": typ,
					"worker": fmt.Sprintf("idle-rest-%d", i), "timeout": 60000, "maxJobsToActivate": 1, "requestTimeout": 60000}); err != nil {
					select { // a refused poll is not asked again at once
					case <-time.After(time.Second):
					case <-octx.Done():
					}
				}
			}
		})
	}
	for gauge(reg, "sutra_gateway_streams_open") < idleStreams+idleLongPolls || gauge(reg, "sutra_rest_long_polls") < idleRESTPolls {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	b.waitQuiet(ctx, "idle jobs")
	r.cpu, err = idleCPU(ctx, b.dbName)
	r.round = b.round
	return r, err
}

// idleCPU measures the CPU used over idleTime.
func idleCPU(ctx context.Context, db string) (cpuUse, error) {
	cpu := startCPU(db)
	select {
	case <-time.After(idleTime):
	case <-ctx.Done():
		return cpuUse{}, ctx.Err()
	}
	return cpu.finish(), nil
}

// share is d over idleTime in percent of a core.
func share(d time.Duration) float64 { return 100 * d.Seconds() / idleTime.Seconds() }

// postgresShare is what opening the streams and long polls added to
// PostgreSQL's CPU, in percent of a core.
func (r idleRun) postgresShare() float64 { return share(r.cpu.postgres - r.base.postgres) }

func (r idleRun) row() string {
	return fmt.Sprintf("idle, %d streams + %d long polls + %d /v2 long polls over %v: postgres %.2f%% of a core (%.2f%% before they opened), worker process %.2f%% (%.2f%%), all %.0f%% (%.0f%%)",
		idleStreams, idleLongPolls, idleRESTPolls, idleTime, share(r.cpu.postgres), share(r.base.postgres), share(r.cpu.client), share(r.base.client),
		share(r.cpu.machine), share(r.base.machine))
}

// gauge reads a gauge family's only series.
func gauge(g prometheus.Gatherer, name string) float64 {
	families, err := g.Gather()
	if err != nil {
		return 0
	}
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// fastestSteps is each round's fastest relay steps/s of the worker.
func fastestSteps(results []result) map[int]float64 {
	out := map[int]float64{}
	for _, r := range results {
		if r.kind == "worker" && !r.syncClaims && r.data == "" && r.perSecond > out[r.round] {
			out[r.round] = r.perSecond
		}
	}
	return out
}
