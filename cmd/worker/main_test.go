package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sutra-worker-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "worker")
	// The replicas run with the race detector too, and with the fault hooks
	// that only -tags sutratest compiles in (inert unless SUTRA_TEST_* is set).
	if out, err := exec.Command("go", "build", "-race", "-tags", "sutratest", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building worker: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// apiToken is the API token of the worker processes the tests start.
const apiToken = "cmd-worker-test-token"

// environ is the environment that points a worker process at env.
func environ(env *testkit.Env, replica string) []string {
	c := env.Config
	return append(os.Environ(),
		"SUTRA_DATABASE_URL="+c.DatabaseURL, "SUTRA_AMQP_URL="+c.AMQPURL,
		"SUTRA_REPLICA_ID="+replica, "SUTRA_LANES=4", "SUTRA_PREFETCH=64", "SUTRA_HTTP_ADDR=127.0.0.1:0", "SUTRA_API_ADDR=127.0.0.1:0", "SUTRA_GATEWAY_ADDR=127.0.0.1:0",
		"SUTRA_API_TOKEN="+apiToken,
		"SUTRA_RELAY_EXCHANGE="+c.RelayExchange, "SUTRA_RELAY_QUEUE="+c.RelayQueue,
		"SUTRA_DEAD_EXCHANGE="+c.DeadExchange, "SUTRA_DEAD_QUEUE="+c.DeadQueue,
		"SUTRA_REQUEUE_BACKOFF=10ms", "SUTRA_REQUEUE_BACKOFF_MAX=200ms", "SUTRA_LOG_FORMAT=json",
		// The race runtime sleeps a second at exit by default; the tests time exits.
		"GORACE=atexit_sleep_ms=0",
	)
}

// startReplica runs a worker process until the test ends, then stops it
// with SIGTERM and checks that it exited cleanly.
func startReplica(t *testing.T, env *testkit.Env, replica string) *exec.Cmd {
	t.Helper()
	return startReplicaWith(t, env, replica)
}

// startReplicaWith is startReplica with extra environment variables.
func startReplicaWith(t *testing.T, env *testkit.Env, replica string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, "run")
	cmd.Env = append(environ(env, replica), extra...)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("replica %s exited with %v", replica, err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("replica %s did not stop on SIGTERM", replica)
		}
		if t.Failed() || strings.Contains(logs.String(), "DATA RACE") {
			t.Logf("replica %s logs:\n%s", replica, logs.String())
		}
		if strings.Contains(logs.String(), "DATA RACE") {
			t.Errorf("replica %s reported a data race", replica)
		}
	})
	return cmd
}

// The load runs with batches off (one step per transaction) and on: the
// claim audit holds either way.
func TestTwoReplicasUnderLoadApplyEveryRelayOnceWithoutConcurrentSteps(t *testing.T) {
	t.Parallel()
	for _, batch := range []string{"1", "16"} {
		t.Run("SUTRA_BATCH_MAX="+batch, func(t *testing.T) {
			t.Parallel()
			twoReplicasUnderLoad(t, "SUTRA_BATCH_MAX="+batch)
		})
	}
}

func twoReplicasUnderLoad(t *testing.T, extra ...string) {
	env := testkit.New(t)
	env.Deploy(t, "../../examples/order.bpmn")
	pub := env.Publisher(t)
	startReplicaWith(t, env, "replica-a", extra...)
	startReplicaWith(t, env, "replica-b", extra...)

	const n = 200
	relay := func(id string, body map[string]any) testkit.Relay { return testkit.Relay{MessageID: id, Body: body} }
	var starts, paid, shipped []testkit.Relay
	for i := range n {
		id := fmt.Sprintf("o-%d", i)
		starts = append(starts, relay("start-"+id, map[string]any{"start": "order", "instance_id": id, "variables": map[string]any{"orderId": id}}))
		// Each message is published twice: the copies race on the two replicas.
		p := relay("paid-"+id, map[string]any{"instance_id": id, "message": "payment-received"})
		s := relay("shipped-"+id, map[string]any{"message": "order-shipped", "correlation_key": id})
		paid = append(paid, p, p)
		shipped = append(shipped, s, s)
	}
	pub.Publish(starts...)
	testkit.Eventually(t, 60*time.Second, "all started", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE version = 1") == n
	})
	pub.Publish(paid...)
	testkit.Eventually(t, 60*time.Second, "all paid", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE version = 2") == n
	})
	pub.Publish(shipped...)
	testkit.Eventually(t, 60*time.Second, "all completed", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE version = 3 AND status = 'completed'") == n
	})
	testkit.Eventually(t, 10*time.Second, "relay queue drained", func() bool { return pub.QueueDepth(env.Config.RelayQueue) == 0 })
	if got := env.Int(t, "SELECT count(*) FROM inbox"); got != 3*n {
		t.Errorf("inbox has %d message ids, want %d", got, 3*n)
	}
	if got := pub.QueueDepth(env.Config.DeadQueue); got != 0 {
		t.Errorf("%d relays dead-lettered", got)
	}
	// A commit is a version increment in the transaction that released its owner's claim.
	if got := env.Int(t, `SELECT count(*) FROM claim_audit v JOIN claim_audit r ON r.tx = v.tx AND r.instance_id = v.instance_id
		WHERE v.new_version = v.old_version + 1 AND r.new_owner IS NULL AND r.old_owner LIKE 'replica-b/%'`); got == 0 {
		t.Errorf("replica-b committed no step: the test did not exercise two replicas")
	}
	env.AssertNoOverlap(t, false)
	env.AssertNoClaimsHeld(t)
}

func TestDeployPrintsKeyAndVersionAndIsIdempotent(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	deploy := func(files ...string) string {
		cmd := exec.Command(binary, append([]string{"deploy"}, files...)...)
		cmd.Env = environ(env, "cli")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("deploy: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := deploy("../../examples/order.bpmn"); got != "order 1 deployed" {
		t.Errorf("first deploy printed %q", got)
	}
	if got := deploy("../../examples/order.bpmn"); got != "order 1 unchanged" {
		t.Errorf("second deploy printed %q", got)
	}
	// A DMN file is told from its content; each decision of the DRG gets
	// its version.
	if got := deploy("../../dmn/testdata/dinner.dmn", "../../examples/order.bpmn"); got != "dish 1 decision deployed\nbeverages 1 decision deployed\norder 1 unchanged" {
		t.Errorf("deploying a DMN file printed %q", got)
	}
}

func TestHelpListsEveryVariableWithItsDefault(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "help").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SUTRA_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/sutra", "SUTRA_AMQP_URL",
		"SUTRA_REPLICA_ID", "SUTRA_LANES", "SUTRA_PREFETCH", "SUTRA_HTTP_ADDR", ":9464", "SUTRA_CLAIM_TIMEOUT", "30s",
		"SUTRA_SHUTDOWN_TIMEOUT", "run", "migrate", "deploy"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("help does not mention %q:\n%s", want, out)
		}
	}
}

// worker version names the release, the commit and the schema version the
// replica registers (docs/operations.md, "Upgrading").
func TestVersionPrintsReleaseCommitAndSchema(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v\n%s", err, out)
	}
	for _, want := range []string{"release ", "commit ", fmt.Sprintf("schema %d\n", store.SchemaVersion())} {
		if !strings.Contains(string(out), want) {
			t.Errorf("version does not print %q:\n%s", want, out)
		}
	}
}
