// Command demo runs the main job end to end on local services, in a
// database, queues and ports of its own (so a worker you already run is
// neither used nor disturbed): it migrates, deploys four example processes,
// starts two worker replicas (bin/worker), and
//
//   - drives 3000 orders (examples/order.bpmn, examples/order-fulfilment.bpmn)
//     to completion with relays, some published twice;
//   - runs 20 approvals (examples/approval.bpmn) and 20 shipping-and-invoicing
//     orders (examples/shipping-invoicing.bpmn) with a small task worker
//     speaking the Camunda external-task protocol, which answers the service
//     tasks and plays the carrier and the payment provider;
//   - receives the messages the processes send through the outbox.
//
// It prints a summary and ends with one line, "demo OK: …" or
// "demo FAILED: …" (exit 1). It watches its replicas: one that exits, or
// another process answering on its port, fails the demo at once. On success
// it removes its database, exchanges, queues and logs; on failure it keeps
// the logs and says where. Run it with `make demo`.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/internal/loadgen"
)

const (
	binary   = "bin/worker"
	orders   = 3000 // instances of the order processes
	requests = 20   // approvals
	shipped  = 20   // shipping-and-invoicing orders
	token    = "demo-token"
	// adminToken opens the replicas' admin API (/v1), for sutractl while
	// the demo runs; the task worker carries token, which /v1 refuses.
	adminToken = "demo-admin-token"
)

func main() {
	began := time.Now()
	d, err := newDemo()
	if err == nil {
		err = d.run()
		err = d.finish(err)
	}
	if err != nil {
		fmt.Printf("\ndemo FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("\ndemo OK: %d orders, %d approvals and %d shipping orders completed on two replicas; %d outbox messages received; %v\n",
		orders, requests, shipped, d.outbox.total(), time.Since(began).Round(100*time.Millisecond))
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// demo is one run: its names, its replicas and what it received.
type demo struct {
	ctx      context.Context
	cancel   context.CancelFunc
	runID    string // prefix of this run's instance and message ids
	logs     string // directory of the replicas' logs
	dbName   string
	dbURL    string // the demo's own database
	adminURL string // the server's postgres database, to create and drop it
	amqpURL  string
	names    map[string]string // SUTRA_* exchange and queue variables → the demo's names
	replicas []*replica
	db       *pgxpool.Pool
	pub      *loadgen.Publisher
	pubMu    sync.Mutex
	outbox   *outboxListener
}

func newDemo() (*demo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	d := &demo{ctx: ctx, cancel: cancel, runID: fmt.Sprintf("demo%d", time.Now().Unix())}
	base, err := url.Parse(env("SUTRA_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/sutra"))
	if err != nil {
		return nil, fmt.Errorf("SUTRA_DATABASE_URL: %w", err)
	}
	// Per-process names: two demos at once do not share a database or a queue.
	suffix := fmt.Sprint(os.Getpid())
	d.dbName = "sutra_demo_" + suffix
	base.Path = "/" + d.dbName
	d.dbURL = base.String()
	base.Path = "/postgres"
	d.adminURL = base.String()
	d.amqpURL = env("SUTRA_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	prefix := "sutra-demo-" + suffix
	d.names = map[string]string{
		"SUTRA_RELAY_EXCHANGE":  prefix + ".relays",
		"SUTRA_RELAY_QUEUE":     prefix + ".relays",
		"SUTRA_DEAD_EXCHANGE":   prefix + ".dead",
		"SUTRA_DEAD_QUEUE":      prefix + ".dead",
		"SUTRA_OUTBOX_EXCHANGE": prefix + ".outbox",
	}
	if d.logs, err = os.MkdirTemp("", "sutra-demo-*"); err != nil {
		return nil, err
	}
	return d, nil
}

// workerEnv is the environment every worker command of the demo runs with.
func (d *demo) workerEnv() []string {
	e := []string{"SUTRA_DATABASE_URL=" + d.dbURL, "SUTRA_AMQP_URL=" + d.amqpURL, "SUTRA_API_TOKEN=" + token,
		"SUTRA_ADMIN_TOKEN=" + adminToken}
	for k, v := range d.names {
		e = append(e, k+"="+v)
	}
	return e
}

func (d *demo) worker(args ...string) error {
	cmd := exec.CommandContext(d.ctx, binary, args...)
	cmd.Env = append(os.Environ(), d.workerEnv()...)
	out, err := cmd.CombinedOutput()
	fmt.Printf("$ worker %s\n%s", strings.Join(args, " "), indent(string(out)))
	if err != nil {
		return fmt.Errorf("worker %s: %w", args[0], err)
	}
	return nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

func (d *demo) run() error {
	fmt.Printf("demo: database %s, exchanges and queues %s.*, logs in %s\n", d.dbName, strings.TrimSuffix(d.names["SUTRA_RELAY_QUEUE"], ".relays"), d.logs)
	if err := d.worker("migrate"); err != nil {
		return err
	}
	if err := d.worker("deploy", "examples/order.bpmn", "examples/order-fulfilment.bpmn", "examples/approval.bpmn", "examples/shipping-invoicing.bpmn"); err != nil {
		return err
	}
	for _, id := range []string{"demo-a", "demo-b"} {
		r, err := startReplica(binary, d.logs, fmt.Sprintf("%s-%d", id, os.Getpid()), d.workerEnv())
		if err != nil {
			return err
		}
		d.replicas = append(d.replicas, r)
	}
	for _, r := range d.replicas {
		if err := r.waitReady(d.ctx); err != nil {
			return err
		}
	}
	fmt.Printf("replicas %s (metrics http://%s, API http://%s) and %s (metrics http://%s, API http://%s) ready\n",
		d.replicas[0].id, d.replicas[0].addr, d.replicas[0].api, d.replicas[1].id, d.replicas[1].addr, d.replicas[1].api)

	var err error
	if d.db, err = pgxpool.New(d.ctx, d.dbURL); err != nil {
		return err
	}
	if d.pub, err = loadgen.Dial(d.amqpURL, d.names["SUTRA_RELAY_EXCHANGE"]); err != nil {
		return err
	}
	// Bound before any step runs: the outbox publishes mandatory, and a
	// message no queue takes waits in the outbox.
	if d.outbox, err = listenOutbox(d.amqpURL, d.names["SUTRA_OUTBOX_EXCHANGE"]); err != nil {
		return err
	}
	if err := d.orders(); err != nil {
		return err
	}
	if err := d.tasks(); err != nil {
		return err
	}
	return d.summary()
}

// orders drives the order processes with three waves of relays.
func (d *demo) orders() error {
	id := func(i int) string { return fmt.Sprintf("%s-order-%d", d.runID, i) }
	// order.bpmn and order-fulfilment.bpmn wait for the same two relays; the
	// latter also sends a payment request through the outbox and arms a
	// payment timeout and a shipment timer, which the messages cancel in
	// their commits.
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
		relay   func(i int) loadgen.Relay
	}{
		{"start (every 4th an order-fulfilment)", 1, func(i int) loadgen.Relay {
			return loadgen.Relay{ID: d.runID + "-start-" + fmt.Sprint(i), Body: map[string]any{
				"start": definition(i), "instance_id": id(i), "variables": map[string]any{"orderId": id(i), "total": total(i)}}}
		}},
		{"payment-received (by instance id; every 20th published twice)", 2, func(i int) loadgen.Relay {
			r := loadgen.Relay{ID: d.runID + "-paid-" + fmt.Sprint(i), Body: map[string]any{
				"instance_id": id(i), "message": "payment-received", "variables": map[string]any{"amount": total(i)}}}
			if i%20 == 0 {
				r.Copies = 1
			}
			return r
		}},
		{"order-shipped (by correlation key)", 3, func(i int) loadgen.Relay {
			return loadgen.Relay{ID: d.runID + "-shipped-" + fmt.Sprint(i), Body: map[string]any{
				"message": "order-shipped", "correlation_key": id(i)}}
		}},
	}
	fmt.Printf("\n%d orders, three waves of relays:\n", orders)
	for _, w := range waves {
		var relays []loadgen.Relay
		published := 0
		for i := range orders {
			r := w.relay(i)
			relays = append(relays, r)
			published += 1 + r.Copies
		}
		began := time.Now()
		if err := d.publish(relays...); err != nil {
			return err
		}
		err := d.waitFor(fmt.Sprintf("every order at version %d", w.version), func() (bool, string, error) {
			n, err := d.count("SELECT count(*) FROM instances WHERE starts_with(id, $1) AND version >= $2", d.runID+"-order-", w.version)
			return n == orders, fmt.Sprintf("%d of %d there", n, orders), err
		})
		if err != nil {
			return err
		}
		fmt.Printf("  wave %-62s %5d relays in %v\n", w.name, published, time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// tasks runs the approvals and the shipping orders with a task worker.
func (d *demo) tasks() error {
	var starts []loadgen.Relay
	for i := range requests {
		id := fmt.Sprintf("%s-request-%d", d.runID, i)
		starts = append(starts, loadgen.Relay{ID: id, Body: map[string]any{"start": "approval", "instance_id": id,
			"variables": map[string]any{"requestId": id, "request": map[string]any{"amount": 100 * (i + 1)}}}})
	}
	for i := range shipped {
		id := fmt.Sprintf("%s-shipping-%d", d.runID, i)
		starts = append(starts, loadgen.Relay{ID: id, Body: map[string]any{"start": "shipping-invoicing", "instance_id": id,
			"variables": map[string]any{"orderId": id, "total": 25 * (i + 1)}}})
	}
	// The carrier and the payment provider answer with relays keyed by the
	// order and the invoice; a ttl buffers one that arrives before the
	// instance waits for it.
	relay := func(name, key string) error {
		return d.publish(loadgen.Relay{ID: d.runID + "-" + name + "-" + key, Body: map[string]any{
			"message": name, "correlation_key": key, "ttl": "PT10M"}})
	}
	var rejected atomic.Int32
	w := &taskWorker{base: "http://" + d.replicas[1].api, token: token, id: "demo-task-worker", handlers: map[string]taskHandler{
		"review-request": func(_ context.Context, t task) (outcome, error) {
			var amount float64
			if err := t.variable("amount", &amount); err != nil {
				return outcome{}, err
			}
			return outcome{variables: map[string]any{"approved": amount <= 1000, "comment": fmt.Sprintf("%.0f reviewed by the demo", amount)}}, nil
		},
		"ship-goods": func(_ context.Context, t task) (outcome, error) {
			var order string
			if err := t.variable("orderId", &order); err != nil {
				return outcome{}, err
			}
			return outcome{}, relay("delivered", order)
		},
		"create-invoice": func(_ context.Context, t task) (outcome, error) {
			var order string
			if err := t.variable("orderId", &order); err != nil {
				return outcome{}, err
			}
			var i int
			if _, err := fmt.Sscanf(order[strings.LastIndex(order, "-")+1:], "%d", &i); err != nil {
				return outcome{}, fmt.Errorf("order id %q: %w", order, err)
			}
			if i%5 == 0 { // every 5th invoice is rejected, and billing fixed
				rejected.Add(1)
				return outcome{bpmnError: "INVOICE_REJECTED"}, nil
			}
			invoice := "inv-" + order
			return outcome{variables: map[string]any{"invoiceId": invoice}}, relay("invoice-paid", invoice)
		},
		"manager-review": func(context.Context, task) (outcome, error) {
			return outcome{variables: map[string]any{"approved": false}}, nil
		},
		"fix-billing": func(context.Context, task) (outcome, error) { return outcome{}, nil },
	}}
	ctx, stop := context.WithCancel(d.ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.run(ctx) }()
	defer func() { stop(); <-workerDone }()

	fmt.Printf("\n%d approvals and %d shipping orders, with a task worker on %s's API:\n", requests, shipped, d.replicas[1].id)
	began := time.Now()
	if err := d.publish(starts...); err != nil {
		return err
	}
	err := d.waitFor("the approvals and shipping orders to complete", func() (bool, string, error) {
		select {
		case err := <-workerDone:
			workerDone <- err
			return false, "", fmt.Errorf("the task worker stopped: %v", err)
		default:
		}
		n, err := d.count("SELECT count(*) FROM instances WHERE starts_with(id, $1) AND status = 'completed' AND (id LIKE '%-request-%' OR id LIKE '%-shipping-%')", d.runID)
		return n == requests+shipped, fmt.Sprintf("%d of %d completed", n, requests+shipped), err
	})
	if err != nil {
		return err
	}
	fmt.Printf("  %d tasks answered (%d invoices rejected with a BPMN error, then fixed) in %v\n", w.done.Load(), rejected.Load(), time.Since(began).Round(time.Millisecond))
	want := map[string]int{"payment-requested": orders / 4, "request-approved": 10, "request-rejected": 10, "order-closed": shipped}
	return d.waitFor("the outbox messages", func() (bool, string, error) {
		got := d.outbox.counts()
		for name, n := range want {
			if got[name] < n {
				return false, fmt.Sprintf("%d of %d %s", got[name], n, name), nil
			}
		}
		return true, "", nil
	})
}

func (d *demo) summary() error {
	stats, err := loadgen.Measure(d.ctx, d.db, d.runID+"-")
	if err != nil {
		return err
	}
	totals := map[string]float64{}
	for _, r := range d.replicas {
		m, err := loadgen.Scrape(d.ctx, "http://"+r.addr+"/metrics", "sutra_relays_total", "sutra_claim_bounces_total", "sutra_tasks_completed_total")
		if err != nil {
			return err
		}
		for k, v := range m {
			totals[k] += v
		}
	}
	fmt.Printf("\nOutbox messages received (exchange %s, routing key = message name):\n", d.names["SUTRA_OUTBOX_EXCHANGE"])
	counts, samples := d.outbox.counts(), d.outbox.samples()
	var names []string
	for name := range counts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Printf("  %-18s %5d   e.g. %s\n", name, counts[name], samples[name])
	}
	fmt.Printf("\nSummary (run %s)\n", d.runID)
	for _, o := range []string{"committed", "duplicate", "requeued", "stale", "dead_lettered"} {
		fmt.Printf("  relays %-17s %.0f\n", o, totals["sutra_relays_total{outcome="+o+"}"])
	}
	outcomes := map[string]float64{}
	for k, v := range totals {
		if rest, ok := strings.CutPrefix(k, "sutra_tasks_completed_total{outcome="); ok {
			outcomes[rest[:strings.Index(rest, ",")]] += v
		}
	}
	fmt.Printf("  task outcomes            completed %.0f, bpmn_error %.0f, failed %.0f\n", outcomes["completed"], outcomes["bpmn_error"], outcomes["failed"])
	var keys []string
	for k := range totals {
		if strings.HasPrefix(k, "sutra_claim_bounces_total") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  claim bounces %-10s %.0f\n", strings.TrimSuffix(strings.TrimPrefix(k, "sutra_claim_bounces_total{path="), "}"), totals[k])
	}
	fmt.Printf("  steps/s                  %.0f (%d relay steps, publish of the first to commit of the last)\n", stats.StepsPerS, stats.Committed)
	fmt.Printf("  publish→commit latency   p50 %v  p99 %v\n", stats.P50.Round(time.Microsecond), stats.P99.Round(time.Microsecond))
	if dead := totals["sutra_relays_total{outcome=dead_lettered}"]; dead > 0 {
		return fmt.Errorf("%.0f relays were dead-lettered; see the logs in %s", dead, d.logs)
	}
	return nil
}

// publish publishes relays on the demo's relay exchange and waits for the
// broker's confirms.
func (d *demo) publish(relays ...loadgen.Relay) error {
	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	return d.pub.Publish(d.ctx, relays)
}

func (d *demo) count(query string, args ...any) (int, error) {
	var n int
	err := d.db.QueryRow(d.ctx, query, args...).Scan(&n)
	return n, err
}

// waitFor polls done until it reports true, failing at once when a replica
// exits, and after a minute without it.
func (d *demo) waitFor(what string, done func() (bool, string, error)) error {
	deadline := time.Now().Add(time.Minute)
	for {
		for _, r := range d.replicas {
			if err := r.alive(); err != nil {
				return err
			}
		}
		ok, state, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited a minute for %s: %s; see the logs in %s", what, state, d.logs)
		}
		select {
		case <-d.ctx.Done():
			return fmt.Errorf("waiting for %s: %s: %w", what, state, d.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// finish stops the replicas and removes what the demo created. After a
// failure it keeps the logs, and says where.
func (d *demo) finish(failure error) error {
	defer d.cancel()
	if d.pub != nil {
		d.pub.Close()
	}
	if d.outbox != nil {
		d.outbox.close()
	}
	if d.db != nil {
		d.db.Close()
	}
	for _, r := range d.replicas {
		if err := r.stop(40 * time.Second); err != nil && failure == nil {
			failure = err
		}
	}
	if failure != nil {
		fmt.Printf("\nlogs kept in %s\n", d.logs)
	} else if err := os.RemoveAll(d.logs); err != nil {
		return err
	}
	if err := d.dropNames(); err != nil && failure == nil {
		return err
	}
	return failure
}

// dropNames deletes the demo's queues, exchanges and database.
func (d *demo) dropNames() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err := amqp.Dial(d.amqpURL); err == nil {
		if ch, err := conn.Channel(); err == nil {
			for _, q := range []string{"SUTRA_RELAY_QUEUE", "SUTRA_DEAD_QUEUE"} {
				_, _ = ch.QueueDelete(d.names[q], false, false, false)
			}
			for _, x := range []string{"SUTRA_RELAY_EXCHANGE", "SUTRA_DEAD_EXCHANGE", "SUTRA_OUTBOX_EXCHANGE"} {
				_ = ch.ExchangeDelete(d.names[x], false, false)
			}
		}
		conn.Close()
	}
	db, err := pgxpool.New(ctx, d.adminURL)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(ctx, "DROP DATABASE IF EXISTS "+d.dbName+" WITH (FORCE)")
	return err
}

// outboxListener consumes everything the outbox exchange publishes, on a
// queue of its own (exclusive: the broker deletes it with the connection).
type outboxListener struct {
	conn *amqp.Connection
	mu   sync.Mutex
	n    map[string]int
	eg   map[string]string
	ids  map[string]bool // message ids seen: the outbox is at least once
}

func listenOutbox(amqpURL, exchange string) (*outboxListener, error) {
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil)
	}
	var q amqp.Queue
	if err == nil {
		q, err = ch.QueueDeclare("", false, true, true, false, nil)
	}
	if err == nil {
		err = ch.QueueBind(q.Name, "#", exchange, false, nil)
	}
	var deliveries <-chan amqp.Delivery
	if err == nil {
		deliveries, err = ch.Consume(q.Name, "", true, true, false, false, nil)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("listening on %s: %w", exchange, err)
	}
	l := &outboxListener{conn: conn, n: map[string]int{}, eg: map[string]string{}, ids: map[string]bool{}}
	go func() {
		for m := range deliveries {
			l.mu.Lock()
			if !l.ids[m.MessageId] {
				l.ids[m.MessageId] = true
				l.n[m.RoutingKey]++
				if _, ok := l.eg[m.RoutingKey]; !ok {
					l.eg[m.RoutingKey] = compact(m.Body)
				}
			}
			l.mu.Unlock()
		}
	}()
	return l, nil
}

func compact(body []byte) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return string(body)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (l *outboxListener) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.n))
	for k, v := range l.n {
		out[k] = v
	}
	return out
}

func (l *outboxListener) samples() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.eg))
	for k, v := range l.eg {
		out[k] = v
	}
	return out
}

func (l *outboxListener) total() int {
	n := 0
	for _, c := range l.counts() {
		n += c
	}
	return n
}

func (l *outboxListener) close() { l.conn.Close() }
