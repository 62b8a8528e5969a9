package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sutra-run/worker/tools/bench"
)

// The process ids of Camunda's files.
const (
	rootProcess  = "bankDisputeHandling"
	childProcess = "refundingProcess"
	// token is the operator's: the Starter deploys and starts, which a job
	// worker's token may not; Camunda's load tester has one credential too.
	token = "camundaload-admin"
)

// clientLine is one line of the Node client's output: its counters since it
// began, or an error, or the news that it deployed.
type clientLine struct {
	T           float64 `json:"t"`
	Started     int     `json:"started"`
	StartErrors int     `json:"startErrors"`
	StartP99ms  int     `json:"startP99ms"`
	// PublishP99ms and CompleteP99ms are of the PublishMessage and
	// CompleteJob calls of the workers, answers included.
	PublishP99ms  int            `json:"publishP99ms"`
	CompleteP99ms int            `json:"completeP99ms"`
	Jobs          map[string]int `json:"jobs"`
	Published     int            `json:"published"`
	Errors        int            `json:"errors"`
	Error         string         `json:"error"`
	Deployed      bool           `json:"deployed"`
}

func (l clientLine) jobs() int {
	n := 0
	for _, c := range l.Jobs {
		n += c
	}
	return n
}

// runRate is one run: a worker on a fresh schema, the client at rate roots/s
// for o.duration, then the drain.
func runRate(ctx context.Context, o options, rate float64) (result, error) {
	res := result{rate: rate, duration: o.duration}
	if err := createDatabase(ctx, o.db); err != nil {
		return res, err
	}
	env, err := bench.NewEnv(ctx, o.db, o.amqp, "camunda", 0, bench.ProcessXML)
	if err != nil {
		return res, err
	}
	defer env.Close()
	if err := env.DeclareQueues(); err != nil {
		return res, err
	}
	w, err := startWorker(ctx, o, env)
	if err != nil {
		return res, err
	}
	defer w.Stop()
	db, err := pgxpool.New(ctx, env.Config.Database.URL)
	if err != nil {
		return res, err
	}
	defer db.Close()

	res.loadBefore = loadAverage()
	c, err := startClient(ctx, o, w.gatewayAddr, rate)
	if err != nil {
		return res, err
	}
	defer c.stop()
	if err := c.waitDeployed(ctx); err != nil {
		return res, err
	}
	began := time.Now()
	metricsBefore, err := scrape(w.HTTPAddr)
	if err != nil {
		return res, err
	}
	cpu := newCPU(db, w.Pid(), c.pid())
	if err := cpu.sample(ctx); err != nil {
		return res, err
	}
	end := began.Add(o.duration)
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
	var atEnd clientLine
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-w.Exited():
			return res, fmt.Errorf("the worker exited: %v", w.Err())
		case <-c.exited:
			return res, fmt.Errorf("the client exited early: %v (its first errors: %v)", c.err, c.errors())
		case now := <-tick.C:
			s, err := takeSample(ctx, db, now.Sub(began))
			if err != nil {
				return res, err
			}
			if err := cpu.sample(ctx); err != nil {
				return res, err
			}
			s.cpu = cpu.interval()
			res.samples = append(res.samples, s)
			fmt.Fprintf(os.Stderr, "  %g roots/s %s\n", rate, s.row())
			if now.Before(end) {
				continue
			}
			if atEnd.T == 0 {
				// The Starter's window is over: its counters and the CPU
				// so far are the run's rates.
				atEnd = c.last()
				res.cpu = cpu.total()
				res.wall = now.Sub(began)
				after, err := scrape(w.HTTPAddr)
				if err != nil {
					return res, err
				}
				res.worker = figures(metricsBefore, after)
			}
			if s.rootsActive == 0 || now.After(end.Add(o.drain)) {
				done = true
			}
		}
	}
	res.client = atEnd
	res.loadAfter = loadAverage()
	res.clientErrors = c.errors()
	if err := res.latencies(ctx, db, began, end); err != nil {
		return res, err
	}
	return res, nil
}

// createDatabase creates the database of url when it does not exist.
func createDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil || exists {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// worker is the worker binary running as a child process, with its
// gateway's address.
type worker struct {
	*bench.Process
	gatewayAddr string
}

// startWorker starts the binary at its defaults but for what points it at
// the run's schema and broker names, free ports and a token for the
// gateway; and waits until it is ready.
func startWorker(ctx context.Context, o options, env *bench.Env) (*worker, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := bench.FreeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	httpAddr, apiAddr, gatewayAddr := addrs[0], addrs[1], addrs[2]
	cfg := env.Config
	p, err := bench.StartProcess(ctx, o.worker, append(workerEnviron(),
		"SUTRA_DATABASE_URL="+cfg.Database.URL, "SUTRA_AMQP_URL="+cfg.Broker.URL, "SUTRA_REPLICA_ID=camundaload",
		"SUTRA_HTTP_ADDR="+httpAddr, "SUTRA_API_ADDR="+apiAddr, "SUTRA_API_TOKEN=camundaload-tasks", "SUTRA_ADMIN_TOKEN="+token, "SUTRA_GATEWAY_ADDR="+gatewayAddr,
		"SUTRA_RELAY_EXCHANGE="+cfg.RelayExchange, "SUTRA_RELAY_QUEUE="+cfg.RelayQueue,
		"SUTRA_DEAD_EXCHANGE="+cfg.DeadExchange, "SUTRA_DEAD_QUEUE="+cfg.DeadQueue,
		"SUTRA_OUTBOX_EXCHANGE="+cfg.OutboxExchange, "SUTRA_LOG_LEVEL=warn"), httpAddr)
	if err != nil {
		return nil, err
	}
	return &worker{Process: p, gatewayAddr: gatewayAddr}, nil
}

// workerEnviron is this process's environment but for this program's own
// SUTRA_CAMUNDA_LOAD_FILES, which the worker would warn of as unknown.
func workerEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUTRA_CAMUNDA_LOAD_FILES=") {
			env = append(env, kv)
		}
	}
	return env
}

// client is the Node client running as a child process.
type client struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	err      error
	deployed chan struct{}
	mu       sync.Mutex
	latest   clientLine
	errs     []string
	once     sync.Once
}

func (c *client) pid() int { return c.cmd.Process.Pid }

// startClient starts load.mjs against the gateway at addr; it starts rate
// roots a second for o.duration and runs its workers until stopped.
func startClient(ctx context.Context, o options, addr string, rate float64) (*client, error) {
	if _, err := os.Stat(o.script); err != nil {
		return nil, fmt.Errorf("the Node client: %w", err)
	}
	cmd := exec.Command(o.node, o.script)
	cmd.Env = append(os.Environ(), "ZEEBE_GRPC_ADDRESS=grpc://"+addr, "CAMUNDA_AUTH_STRATEGY=BEARER",
		"CAMUNDA_OAUTH_TOKEN="+token, "CAMUNDA_LOG_LEVEL=error", "CAMUNDA_LOAD_FILES="+o.files,
		"RATE="+strconv.FormatFloat(rate, 'f', -1, 64), "DURATION="+strconv.Itoa(int(o.duration.Seconds())),
		// The client's own bound; the run stops it sooner.
		"DRAIN="+strconv.Itoa(int((o.drain+time.Minute).Seconds())))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s %s (node): %w", o.node, o.script, err)
	}
	c := &client{cmd: cmd, exited: make(chan struct{}), deployed: make(chan struct{})}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l clientLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				fmt.Fprintf(os.Stderr, "client: %s\n", sc.Bytes())
				continue
			}
			c.mu.Lock()
			switch {
			case l.Error != "":
				c.errs = append(c.errs, l.Error)
				fmt.Fprintf(os.Stderr, "client error: %s\n", l.Error)
			case l.Deployed:
				close(c.deployed)
			default:
				c.latest = l
			}
			c.mu.Unlock()
		}
	}()
	go func() {
		<-lines
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *client) waitDeployed(ctx context.Context) error {
	select {
	case <-c.deployed:
		return nil
	case <-c.exited:
		return fmt.Errorf("the client exited before it deployed: %v (%v)", c.err, c.errors())
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return errors.New("the client did not deploy within a minute")
	}
}

func (c *client) last() clientLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest
}

func (c *client) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// stop stops the client (SIGTERM: it closes its workers) and waits for it.
func (c *client) stop() {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
}
