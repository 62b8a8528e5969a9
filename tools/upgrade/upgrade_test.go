//go:build upgrade

package upgrade_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/internal/testkit"
)

// The targets of a rolling upgrade (issue 38).
const (
	maxBounceShare  = 0.01            // claim bounces / relays committed during the roll
	maxCommitGap    = 5 * time.Second // longest time without a relay committed during the roll
	ordersPerSecond = 15              // each: 3 relays, a timer, a task; 5 steps
	sideBySide      = 3 * time.Second // how long each new replica runs beside the old ones
	apiToken        = "upgrade-test-token"
)

// root is the repository's top directory.
const root = "../.."

// binaries are the builds the test rolls between.
type binaries struct {
	release     string // the previous release's name (RELEASES)
	old, new    string
	newContract string // new, with the test's contract migration (-tags upgradetest)
}

var (
	buildOnce sync.Once
	built     binaries
	buildErr  error
	buildDir  string // removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// build builds the previous release from its recorded commit, and the
// current tree with and without the test's contract step.
func build(t *testing.T) binaries {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = buildAll() })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func buildAll() (binaries, error) {
	release, commit, err := previousRelease()
	if err != nil {
		return binaries{}, err
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return binaries{}, fmt.Errorf("the commit of release %s (%s, recorded in RELEASES) is not in this clone: "+
			"fetch it (git fetch --unshallow, or git fetch origin %s) and run again: %v %s", release, commit, commit, err, out)
	}
	dir, err := os.MkdirTemp("", "sutra-upgrade-")
	if err != nil {
		return binaries{}, err
	}
	buildDir = dir
	b := binaries{release: release, old: filepath.Join(dir, "old"), new: filepath.Join(dir, "new"), newContract: filepath.Join(dir, "new-contract")}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return b, err
	}
	// The previous release's source, as committed (its console bundle is
	// not: it serves its console page without the bundle, which is fine).
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return b, fmt.Errorf("extracting %s at %s: %v %s", release, commit, err, out)
	}
	ldflags := func(version, revision string) string {
		return "-X github.com/sutra-run/worker/internal/buildinfo.version=" + version +
			" -X github.com/sutra-run/worker/internal/buildinfo.revision=" + revision
	}
	head, _ := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	for _, c := range []struct {
		dir, out string
		args     []string
	}{
		{src, b.old, []string{"-ldflags", ldflags(release, commit)}},
		{root, b.new, []string{"-ldflags", ldflags("upgrade-test", strings.TrimSpace(string(head)))}},
		{root, b.newContract, []string{"-tags", "upgradetest", "-ldflags", ldflags("upgrade-test", strings.TrimSpace(string(head)))}},
	} {
		// -trimpath: the previous release's packages that did not change
		// come from the build cache.
		cmd := exec.Command("go", append(append([]string{"build", "-trimpath"}, c.args...), "-o", c.out, "./cmd/worker")...)
		cmd.Dir = c.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("building %s: %v\n%s", c.out, err, out)
		}
	}
	return b, nil
}

// previousRelease reads the last release recorded in RELEASES.
func previousRelease() (release, commit string, err error) {
	f, err := os.Open(filepath.Join(root, "RELEASES"))
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && !strings.HasPrefix(fields[0], "#") {
			release, commit = fields[0], fields[1]
		}
	}
	if release == "" {
		return "", "", fmt.Errorf("RELEASES records no release")
	}
	return release, commit, sc.Err()
}

// replica is one worker process.
type replica struct {
	id, bin       string
	httpAddr, api string
	cmd           *exec.Cmd
	logs          *syncBuffer
	done          chan error
	exited        bool         // stop returned
	bounces       atomic.Int64 // sutra_claim_bounces_total at the last scrape
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// environ points a worker at env; the API listens on api.
func environ(env *testkit.Env, id, httpAddr, api string, extra ...string) []string {
	c := env.Config
	return append(append(os.Environ(),
		"SUTRA_DATABASE_URL="+c.DatabaseURL, "SUTRA_AMQP_URL="+c.AMQPURL,
		"SUTRA_REPLICA_ID="+id, "SUTRA_LANES=4", "SUTRA_PREFETCH=64",
		"SUTRA_HTTP_ADDR="+httpAddr, "SUTRA_API_ADDR="+api, "SUTRA_GATEWAY_ADDR=127.0.0.1:0", "SUTRA_API_TOKEN="+apiToken,
		"SUTRA_RELAY_EXCHANGE="+c.RelayExchange, "SUTRA_RELAY_QUEUE="+c.RelayQueue,
		"SUTRA_DEAD_EXCHANGE="+c.DeadExchange, "SUTRA_DEAD_QUEUE="+c.DeadQueue, "SUTRA_OUTBOX_EXCHANGE="+c.OutboxExchange,
		"SUTRA_REQUEUE_BACKOFF=10ms", "SUTRA_REQUEUE_BACKOFF_MAX=200ms", "SUTRA_LOG_FORMAT=json",
		"SUTRA_SHUTDOWN_TIMEOUT=10s",
		// The contract step's retry runs every lease TTL.
		"SUTRA_LEASE_TTL=3s",
		// A task outcome goes through its relay alone: what crosses
		// releases is that relay. The fast path (the same replica's lanes)
		// races its own fallback relay, woken by the same commit, and
		// bounces off it in about 1% of outcomes whatever runs beside it.
		"SUTRA_TASK_FAST_PATH=false",
	), extra...)
}

// start runs bin as replica id (it migrates at start) and waits until it
// is ready.
func start(t *testing.T, env *testkit.Env, bin, id, httpAddr, api string) *replica {
	t.Helper()
	r := &replica{id: id, bin: bin, httpAddr: httpAddr, api: api, logs: &syncBuffer{}, done: make(chan error, 1)}
	r.cmd = exec.Command(bin, "run")
	r.cmd.Env = environ(env, id, httpAddr, api)
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if !r.exited {
			r.stop(t)
		}
		if t.Failed() {
			t.Logf("replica %s logs:\n%s", id, r.logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case err := <-r.done:
			t.Fatalf("replica %s exited before it was ready: %v\n%s", id, err, r.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not ready within a minute:\n%s", id, r.logs.String())
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.exited = true
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("replica %s exited with %v", r.id, err)
		}
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Errorf("replica %s did not stop on SIGTERM", r.id)
	}
}

// scrape reads the replica's claim bounces; a replica that is stopping no
// longer answers, and its last reading stands.
func (r *replica) scrape(ctx context.Context) {
	m, err := loadgen.Scrape(ctx, "http://"+r.httpAddr+"/metrics", "sutra_claim_bounces_total")
	if err != nil {
		return
	}
	var n float64
	for _, v := range m {
		n += v
	}
	r.bounces.Store(int64(n))
}

// load publishes orders and completes their tasks until stopped.
type load struct {
	env    *testkit.Env
	pub    *loadgen.Publisher
	orders atomic.Int64
	apis   func() []string // the task API addresses of the live replicas
	errs   chan error
}

func (l *load) publish(ctx context.Context) {
	tick := time.NewTicker(time.Second / 5)
	defer tick.Stop()
	perTick := max(ordersPerSecond/5, 1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var relays []loadgen.Relay
		first := l.orders.Load()
		for i := range int64(perTick) {
			id := fmt.Sprintf("o-%d", first+i)
			relays = append(relays,
				loadgen.Relay{ID: "start-" + id, Body: map[string]any{"start": "rollout", "instance_id": id, "variables": map[string]any{"orderId": id}}},
				loadgen.Relay{ID: "paid-" + id, Body: map[string]any{"message": "payment-received", "correlation_key": id, "ttl": "PT10M"}},
				loadgen.Relay{ID: "shipped-" + id, Body: map[string]any{"message": "order-shipped", "correlation_key": id, "ttl": "PT10M"}})
		}
		// Not cancelled with ctx: an order is counted once all its relays
		// are confirmed.
		if err := l.pub.Publish(context.WithoutCancel(ctx), relays); err != nil {
			l.errs <- fmt.Errorf("publishing: %w", err)
			return
		}
		l.orders.Add(int64(perTick))
	}
}

// work fetches and completes the pack tasks through any live replica's
// Camunda external-task API, as a worker behind a Service does.
func (l *load) work(ctx context.Context) {
	client := &http.Client{Timeout: 5 * time.Second}
	call := func(api, path string, body any, out any) error {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api+"/engine-rest/external-task"+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		if out != nil {
			return json.NewDecoder(resp.Body).Decode(out)
		}
		return nil
	}
	for n := 0; ctx.Err() == nil; n++ {
		apis := l.apis()
		if len(apis) == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		api := apis[n%len(apis)]
		var tasks []struct{ ID string }
		err := call(api, "/fetchAndLock", map[string]any{"workerId": "upgrade", "maxTasks": 50, "asyncResponseTimeout": 500,
			"topics": []map[string]any{{"topicName": "pack", "lockDuration": 5000}}}, &tasks)
		if err != nil {
			time.Sleep(50 * time.Millisecond) // the replica stops or restarts: the next one answers
			continue
		}
		for _, task := range tasks {
			// A completion lost with its replica is fetched again once
			// its lock expires.
			_ = call(api, "/"+task.ID+"/complete", map[string]any{"workerId": "upgrade"}, nil)
		}
	}
}

func TestRollingUpgradeUnderLoad(t *testing.T) {
	rollingUpgrade(t, false)
}

// The new build carries a contract step (store/testdata/upgradetest): it
// waits while an old replica runs, and is applied once the last has left.
func TestRollingUpgradeWithAContractStep(t *testing.T) {
	rollingUpgrade(t, true)
}

func rollingUpgrade(t *testing.T, contract bool) {
	bins := build(t)
	newBin := bins.new
	if contract {
		newBin = bins.newContract
	}
	env := testkit.NewUnmigrated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The database as the previous release left it.
	migrate := exec.Command(bins.old, "migrate")
	migrate.Env = environ(env, "migrate", "127.0.0.1:0", "")
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("%s migrate: %v\n%s", bins.release, err, out)
	}
	env.InstallAudit(t)
	env.Publisher(t) // declares the relay topology before the first relay
	deploy := exec.Command(bins.old, "deploy", "testdata/rollout.bpmn")
	deploy.Env = environ(env, "deploy", "127.0.0.1:0", "")
	if out, err := deploy.CombinedOutput(); err != nil {
		t.Fatalf("deploy: %v\n%s", err, out)
	}

	type slot struct{ httpAddr, api string }
	slots := make([]slot, 3)
	var mu sync.Mutex
	running := make([]*replica, 3)
	var all []*replica
	for i := range slots {
		slots[i] = slot{freeAddr(t), freeAddr(t)}
		running[i] = start(t, env, bins.old, fmt.Sprintf("old-%d", i), slots[i].httpAddr, slots[i].api)
		all = append(all, running[i])
	}

	pub, err := loadgen.Dial(env.Config.AMQPURL, env.Config.RelayExchange)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	l := &load{env: env, pub: pub, errs: make(chan error, 2), apis: func() []string {
		mu.Lock()
		defer mu.Unlock()
		var apis []string
		for _, r := range running {
			if r != nil {
				apis = append(apis, r.api)
			}
		}
		return apis
	}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); l.publish(loadCtx) }()
	go func() { defer wg.Done(); l.work(loadCtx) }()
	go func() { // the bounce counters, read until each replica stops answering
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			mu.Lock()
			rs := append([]*replica(nil), all...)
			mu.Unlock()
			for _, r := range rs {
				r.scrape(loadCtx)
			}
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	workTasks := func() { // after the load: tasks are still completed until every order closed
		wg.Add(1)
		go func() { defer wg.Done(); l.work(ctx) }()
	}
	defer func() { stopLoad(); cancel(); wg.Wait() }()

	// Warm up: the old replicas carry the load.
	testkit.Eventually(t, 60*time.Second, "orders completing on the previous release", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed'") > 10
	})
	if contract {
		// An operator's `worker migrate` while old replicas run: the
		// expand steps apply, the contract step refuses, exit status 2.
		cmd := exec.Command(newBin, "migrate")
		cmd.Env = environ(env, "migrate", "127.0.0.1:0", "")
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), fault.MigrateContractWaiting) ||
			!strings.Contains(string(out), "old-0") || !strings.Contains(string(out), "9000_upgrade_test_contract.sql") {
			t.Fatalf("worker migrate beside old replicas: exit %d (%v), want 2 with %s naming the step and the replicas:\n%s",
				code, err, fault.MigrateContractWaiting, out)
		}
	}
	var rollStart, rollEnd time.Time
	if err := env.DB.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&rollStart); err != nil {
		t.Fatal(err)
	}
	var bouncesBefore int64
	for _, r := range all {
		bouncesBefore += r.bounces.Load()
	}

	// The roll: each old replica stops (SIGTERM), then its new one starts
	// and migrates, and runs beside the others for a while.
	for i := range slots {
		if contract && applied(t, env, 9000) {
			t.Fatalf("the contract step was applied while old replicas ran (before old-%d stopped)", i)
		}
		old := running[i]
		mu.Lock()
		running[i] = nil
		mu.Unlock()
		var stopping time.Time // the old replica gives its registration up as it stops
		if err := env.DB.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&stopping); err != nil {
			t.Fatal(err)
		}
		old.stop(t)
		if contract && i == len(slots)-1 {
			// The last old replica has left, and no replica starts: the
			// new ones started without the contract step apply it on
			// their next try (every SUTRA_LEASE_TTL, 3 s here).
			testkit.Eventually(t, 30*time.Second, "the waiting replicas' retry applying the contract step", func() bool { return applied(t, env, 9000) })
			var at time.Time
			if err := env.DB.QueryRow(ctx, "SELECT applied_at FROM upgrade_test_contract").Scan(&at); err != nil {
				t.Fatal(err)
			}
			if at.Before(stopping) {
				t.Fatalf("the contract step was applied at %s, before the last old replica was stopped at %s", at, stopping)
			}
			t.Logf("contract step applied %s after the last old replica was told to stop", at.Sub(stopping).Round(time.Millisecond))
		}
		r := start(t, env, newBin, fmt.Sprintf("new-%d", i), slots[i].httpAddr, slots[i].api)
		mu.Lock()
		running[i] = r
		all = append(all, r)
		mu.Unlock()
		if contract && i < len(slots)-1 && !strings.Contains(r.logs.String(), fault.MigrateContractWaiting) {
			t.Errorf("new-%d started with old replicas running but did not log the contract step waiting:\n%s", i, r.logs.String())
		}
		time.Sleep(sideBySide) // side by side, under load: the interval is what is measured, not awaited
	}
	if err := env.DB.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&rollEnd); err != nil {
		t.Fatal(err)
	}
	stopLoad()
	workTasks()

	n := l.orders.Load()
	select {
	case err := <-l.errs:
		t.Fatal(err)
	default:
	}
	testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("all %d orders completed", n), func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed'") == n
	})
	if got := env.Int(t, "SELECT count(*) FROM instances"); got != n {
		t.Errorf("%d instances for %d orders", got, n)
	}
	// The inbox also holds the task outcomes' own relays.
	if got := env.Int(t, "SELECT count(*) FROM inbox WHERE message_id ~ '^(start|paid|shipped)-o-'"); got != 3*n {
		t.Errorf("inbox has %d of the relays published, want %d (each applied once)", got, 3*n)
	}
	// Closed exactly once: each version written once (the insert writes
	// 0; a buffered message may be taken in the step that subscribes, so
	// 3 or more steps), every step a fenced commit, no claim taken from a
	// live holder.
	if got := env.Int(t, `SELECT count(*) FROM (SELECT instance_id FROM claim_audit WHERE new_version > old_version
		GROUP BY instance_id HAVING count(*) <> count(DISTINCT new_version) OR count(*) <> max(new_version) + 1 OR max(new_version) < 3) x`); got != 0 {
		t.Errorf("%d orders did not take each of their steps once (through the timer and the task)", got)
	}
	env.AssertNoOverlap(t, false)
	pubCheck := env.Publisher(t)
	if got := pubCheck.QueueDepth(env.Config.DeadQueue); got != 0 {
		t.Errorf("%d relays dead-lettered", got)
	}
	stopAll := func() {
		for _, r := range running {
			r.stop(t)
		}
	}
	stopAll()
	env.AssertNoClaimsHeld(t)

	var bounces int64
	for _, r := range all {
		bounces += r.bounces.Load()
	}
	bounces -= bouncesBefore
	// Every relay committed: the published ones and the task outcomes' own.
	committed := env.Int(t, "SELECT count(*) FROM inbox WHERE received_at BETWEEN $1 AND $2", rollStart, rollEnd)
	var gap float64
	if err := env.DB.QueryRow(ctx, `
		SELECT COALESCE(max(extract(epoch FROM next - at)), 0)::float8 FROM (
			SELECT at, lead(at) OVER (ORDER BY at) AS next FROM (
				SELECT received_at AS at FROM inbox WHERE received_at BETWEEN $1 AND $2
				UNION ALL SELECT $1 UNION ALL SELECT $2) a) g`, rollStart, rollEnd).Scan(&gap); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s → current: %d orders, %d relays committed during the roll (%s), %d claim bounces (%.2f%%), longest gap without a commit %.2fs",
		bins.release, n, committed, rollEnd.Sub(rollStart).Round(time.Millisecond), bounces, 100*float64(bounces)/float64(max(committed, 1)), gap)
	if committed == 0 {
		t.Fatal("no relay committed during the roll")
	}
	if share := float64(bounces) / float64(committed); share >= maxBounceShare {
		t.Errorf("claim bounces %d are %.2f%% of the %d relays committed during the roll, want under %.0f%%", bounces, 100*share, committed, 100*maxBounceShare)
	}
	if time.Duration(gap*float64(time.Second)) > maxCommitGap {
		t.Errorf("%.2fs without a relay committed during the roll, want at most %s", gap, maxCommitGap)
	}
}

func applied(t *testing.T, env *testkit.Env, version int) bool {
	t.Helper()
	return env.Int(t, "SELECT count(*) FROM schema_migrations WHERE version = $1", version) == 1
}
