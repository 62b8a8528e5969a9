// Command demo runs the main job end to end on local services: it migrates,
// deploys examples/order.bpmn and examples/order-fulfilment.bpmn, starts two
// worker replicas (bin/worker), drives a few thousand orders to completion
// with relays, and prints a summary. Run it with `make demo`.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sutra-run/worker/internal/loadgen"
)

const (
	binary    = "bin/worker"
	instances = 3000
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dbURL := env("SUTRA_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/sutra")
	amqpURL := env("SUTRA_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	exchange := env("SUTRA_RELAY_EXCHANGE", "sutra.relays")

	for _, args := range [][]string{{"migrate"}, {"deploy", "examples/order.bpmn"}, {"deploy", "examples/order-fulfilment.bpmn"}} {
		out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
		fmt.Printf("$ worker %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			return fmt.Errorf("worker %s: %w", args[0], err)
		}
	}

	replicas := []*replica{{name: "demo-a", addr: "127.0.0.1:9464", api: "127.0.0.1:8080"}, {name: "demo-b", addr: "127.0.0.1:9465", api: "127.0.0.1:8081"}}
	for _, r := range replicas {
		if err := r.start(); err != nil {
			return err
		}
		defer r.stop()
	}
	for _, r := range replicas {
		if err := r.waitReady(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("two replicas ready (metrics at http://%s/metrics and http://%s/metrics)\n", replicas[0].addr, replicas[1].addr)

	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	pub, err := loadgen.Dial(amqpURL, exchange)
	if err != nil {
		return err
	}
	defer pub.Close()

	run := fmt.Sprintf("demo%d", time.Now().Unix())
	id := func(i int) string { return fmt.Sprintf("%s-order-%d", run, i) }
	// order.bpmn and order-fulfilment.bpmn wait for the same three relays; the
	// latter also publishes a payment request and arms a payment timeout and
	// a shipment timer, which the messages cancel in their commits.
	definition := func(i int) string {
		if i%4 == 3 {
			return "order-fulfilment"
		}
		return "order"
	}
	total := func(i int) int { return 10 + i%90 }
	waves := []struct {
		name    string
		version int
		relay   func(i int) []loadgen.Relay
	}{
		{"start (every 4th an order-fulfilment)", 1, func(i int) []loadgen.Relay {
			return []loadgen.Relay{{ID: run + "-start-" + fmt.Sprint(i), Body: map[string]any{
				"start": definition(i), "instance_id": id(i), "variables": map[string]any{"orderId": id(i), "total": total(i)}}}}
		}},
		{"payment-received (by instance id; every 20th published twice)", 2, func(i int) []loadgen.Relay {
			r := loadgen.Relay{ID: run + "-paid-" + fmt.Sprint(i), Body: map[string]any{
				"instance_id": id(i), "message": "payment-received", "variables": map[string]any{"amount": total(i)}}}
			if i%20 == 0 {
				r.Copies = 1
			}
			return []loadgen.Relay{r}
		}},
		{"order-shipped (by correlation key)", 3, func(i int) []loadgen.Relay {
			return []loadgen.Relay{{ID: run + "-shipped-" + fmt.Sprint(i), Body: map[string]any{
				"message": "order-shipped", "correlation_key": id(i)}}}
		}},
	}
	for _, w := range waves {
		var relays []loadgen.Relay
		published := 0
		for i := range instances {
			for _, r := range w.relay(i) {
				relays = append(relays, r)
				published += 1 + r.Copies
			}
		}
		began := time.Now()
		if err := pub.Publish(ctx, relays); err != nil {
			return err
		}
		if err := waitVersion(ctx, db, run, w.version); err != nil {
			return err
		}
		fmt.Printf("wave %-62s %5d relays in %v\n", w.name, published, time.Since(began).Round(time.Millisecond))
	}

	var completed int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM instances WHERE starts_with(id, $1) AND status = 'completed'", run).Scan(&completed); err != nil {
		return err
	}
	stats, err := loadgen.Measure(ctx, db, run)
	if err != nil {
		return err
	}
	totals := map[string]float64{}
	for _, r := range replicas {
		m, err := loadgen.Scrape(ctx, "http://"+r.addr+"/metrics", "sutra_relays_total", "sutra_claim_bounces_total")
		if err != nil {
			return err
		}
		for k, v := range m {
			totals[k] += v
		}
	}
	fmt.Printf("\nSummary (run %s)\n", run)
	var requests, armed int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox WHERE starts_with(instance_id, $1)),
		(SELECT count(*) FROM timers WHERE starts_with(instance_id, $1))`, run).Scan(&requests, &armed); err != nil {
		return err
	}
	fmt.Printf("  instances completed      %d of %d\n", completed, instances)
	fmt.Printf("  payment requests queued  %d in the outbox; timers left armed %d\n", requests, armed)
	for _, o := range []string{"committed", "duplicate", "requeued", "dead_lettered"} {
		fmt.Printf("  relays %-17s %.0f\n", o, totals["sutra_relays_total{outcome="+o+"}"])
	}
	var bounceKeys []string
	for k := range totals {
		if strings.HasPrefix(k, "sutra_claim_bounces_total") {
			bounceKeys = append(bounceKeys, k)
		}
	}
	sort.Strings(bounceKeys)
	for _, k := range bounceKeys {
		fmt.Printf("  claim bounces %-10s %.0f\n", strings.TrimSuffix(strings.TrimPrefix(k, "sutra_claim_bounces_total{path="), "}"), totals[k])
	}
	fmt.Printf("  steps/s                  %.0f (%d steps, publish of the first to commit of the last)\n", stats.StepsPerS, stats.Committed)
	fmt.Printf("  publish→commit latency   p50 %v  p99 %v\n", stats.P50.Round(time.Microsecond), stats.P99.Round(time.Microsecond))
	if completed != instances {
		return fmt.Errorf("only %d of %d instances completed", completed, instances)
	}
	return nil
}

// waitVersion waits until every instance of the run reached version v.
func waitVersion(ctx context.Context, db *pgxpool.Pool, run string, v int) error {
	for {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM instances WHERE starts_with(id, $1) AND version >= $2", run, v).Scan(&n); err != nil {
			return err
		}
		if n == instances {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d instances at version %d: %d there: %w", instances, v, n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replica is a worker process.
type replica struct {
	name, addr, api string
	cmd             *exec.Cmd
	log             *os.File
}

func (r *replica) start() error {
	log, err := os.CreateTemp("", "sutra-"+r.name+"-*.log")
	if err != nil {
		return err
	}
	r.log = log
	r.cmd = exec.Command(binary, "run")
	r.cmd.Env = append(os.Environ(), "SUTRA_REPLICA_ID="+r.name, "SUTRA_HTTP_ADDR="+r.addr, "SUTRA_API_ADDR="+r.api, "SUTRA_MIGRATE=false")
	r.cmd.Stdout, r.cmd.Stderr = log, log
	fmt.Printf("starting replica %s (logs: %s)\n", r.name, log.Name())
	return r.cmd.Start()
}

func (r *replica) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("replica %s not ready after 30s; see %s", r.name, r.log.Name())
}

func (r *replica) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
	r.log.Close()
}
