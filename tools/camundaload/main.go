// Command camundaload is `make bench-camunda`: Camunda's own realistic
// benchmark (camunda/camunda load-tests, values-realistic-benchmark.yaml)
// against the worker binary, driven from outside through its Zeebe gateway
// by Camunda 8's Node.js SDK (testdata/camunda8-js/load.mjs): the bank
// dispute process with its DMN and its 50 refunding children per root, the
// realistic payload, the Starter at a fixed rate of root instances a second
// and the benchmark's six job workers with their delays.
//
// Camunda's files are not in this repository: the program reads them from
// -files (SUTRA_CAMUNDA_LOAD_FILES, default ../shared/camunda-load-tests) and
// exits 2 when they are missing. For each rate of -rates it starts the
// worker (bin/worker) on a fresh schema, runs the Starter for -duration and
// the workers until every root started has ended or -drain has passed, and
// reports roots/s started and completed, process instances and jobs a
// second, the backlog over time, the roots' and the children's latency
// (start to end, as the database records them) and the CPU of the worker,
// PostgreSQL and the Node client, with the machine's load average (it may be
// shared). BENCHMARKS.md says how to read it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

type options struct {
	files, db, amqp, worker, node, script string
	rates                                 []float64
	duration, drain, sample               time.Duration
}

func main() {
	var o options
	var rates string
	flag.StringVar(&o.files, "files", envOr("SUTRA_CAMUNDA_LOAD_FILES", "../shared/camunda-load-tests"),
		"directory holding Camunda's realistic load-test files ("+strings.Join(Files, ", ")+"), flat or under bpmn/realistic/")
	flag.StringVar(&rates, "rates", "1,2", "root instances a second the Starter starts, one run each")
	flag.DurationVar(&o.duration, "duration", 2*time.Minute, "how long the Starter starts roots in each run")
	flag.DurationVar(&o.drain, "drain", time.Minute, "longest each run waits after the Starter stops for the roots started to end")
	flag.DurationVar(&o.sample, "sample", 5*time.Second, "interval of the backlog and CPU samples")
	flag.StringVar(&o.db, "db", envOr("SUTRA_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/sutra_camundaload"),
		"PostgreSQL URL of the benchmark database (created if missing; each run uses a fresh schema in it)")
	flag.StringVar(&o.amqp, "amqp", envOr("SUTRA_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), "RabbitMQ URL")
	flag.StringVar(&o.worker, "worker", "bin/worker", "the worker binary (make build)")
	flag.StringVar(&o.node, "node", "node", "the Node.js binary")
	flag.StringVar(&o.script, "script", "tools/camundaload/testdata/camunda8-js/load.mjs",
		"the Node.js client (its SDK installed by scripts/node-deps.sh)")
	flag.Parse()
	var err error
	o.rates, err = parseRates(rates)
	if err == nil {
		o.files, err = findFiles(o.files)
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err = run(ctx, o)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-camunda:", err)
		if errors.Is(err, errNoFiles) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("-rates %q: a list of positive roots/s", s)
		}
		out = append(out, r)
	}
	return out, nil
}

func run(ctx context.Context, o options) error {
	var results []result
	for _, rate := range o.rates {
		r, err := runRate(ctx, o, rate)
		if err != nil {
			return fmt.Errorf("at %g roots/s: %w", rate, err)
		}
		results = append(results, r)
		r.print(os.Stdout)
	}
	summary(os.Stdout, results)
	return nil
}
