package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/entities"
	"github.com/camunda/zeebe/clients/go/v8/pkg/zbc"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/tools/bench"
)

// idleStreams and idleLongPolls are what idleJobs opens; idleTime is how
// long it measures them.
const (
	idleStreams   = 64
	idleLongPolls = 64
	idleTime      = 10 * time.Second
)

// idleRun is what idle job streams and long polls cost: the machine's and
// PostgreSQL's CPU over idleTime.
type idleRun struct {
	round int
	cpu   cpuUse
}

// idleJobs opens idleStreams job streams and idleLongPolls ActivateJobs
// long polls (a minute each, polled again as they end) of a type that no
// job has, on a worker with b.o.jobLanes lanes, and measures the CPU they
// cost over idleTime once all are open.
func (b *bencher) idleJobs(ctx context.Context) (idleRun, error) {
	var r idleRun
	env, err := b.envOf(ctx, "idle", bench.TasksXML, 0)
	if err != nil {
		return r, err
	}
	defer env.Close()
	env.Config.Gateway.Addr = "127.0.0.1:0"
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
	for gauge(reg, "sutra_gateway_streams_open") < idleStreams+idleLongPolls {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	b.waitQuiet(ctx, "idle jobs")
	cpu := startCPU(b.dbName)
	select {
	case <-time.After(idleTime):
	case <-ctx.Done():
		return r, ctx.Err()
	}
	r.cpu = cpu.finish()
	r.round = b.round
	return r, nil
}

// postgresShare is PostgreSQL's CPU over the run in percent of a core.
func (r idleRun) postgresShare() float64 { return 100 * r.cpu.postgres.Seconds() / idleTime.Seconds() }

func (r idleRun) row() string {
	return fmt.Sprintf("idle, %d streams + %d long polls over %v: CPU all %.2f%% of a core, postgres %.2f%%, client %.2f%%",
		idleStreams, idleLongPolls, idleTime, 100*r.cpu.machine.Seconds()/idleTime.Seconds(), r.postgresShare(),
		100*r.cpu.client.Seconds()/idleTime.Seconds())
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
