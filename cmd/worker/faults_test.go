package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/zbc"

	"github.com/sutra-run/worker/internal/testkit"
)

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// process is a worker process a test may kill.
type process struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan error
}

// startProcess runs a worker with extra environment. At the end of the test
// a process still running is stopped with SIGTERM and must exit cleanly.
func startProcess(t *testing.T, env *testkit.Env, replica string, extra ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(binary, "run"), logs: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Env = append(environ(env, replica), extra...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-p.done:
				if err != nil {
					t.Errorf("replica %s exited with %v", replica, err)
				}
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
				t.Errorf("replica %s did not stop on SIGTERM", replica)
			}
		}
		if t.Failed() || strings.Contains(p.logs.String(), "DATA RACE") {
			t.Logf("replica %s logs:\n%s", replica, p.logs.String())
		}
		if strings.Contains(p.logs.String(), "DATA RACE") {
			t.Errorf("replica %s reported a data race", replica)
		}
	})
	return p
}

// kill ends the process with SIGKILL: no drain, no release, no ack.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

func TestKilledReplicaIsSweptItsLeaseTakenOverAndEveryRelayAppliedOnce(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Deploy(t, "../../examples/order.bpmn")
	pub := env.Publisher(t)
	const ttl = 2 * time.Second
	fast := []string{"SUTRA_CLAIM_TIMEOUT=2s", "SUTRA_STEP_TIMEOUT=1500ms", "SUTRA_SWEEP_INTERVAL=200ms", "SUTRA_LEASE_TTL=" + ttl.String()}
	// Replica a holds the payment steps of o-1, o-10…o-19 and o-100…o-199
	// open before their commits, one per lane at a time.
	a := startProcess(t, env, "replica-a", append(fast, "SUTRA_TEST_HOLD_STEP=paid-o-1")...)
	testkit.Eventually(t, 30*time.Second, "replica-a holds the sweeper lease", func() bool {
		return env.Int(t, "SELECT count(*) FROM leases WHERE holder = 'replica-a'") == 1
	})
	b := startProcess(t, env, "replica-b", fast...)

	const n = 200
	var starts, paid, shipped []testkit.Relay
	for i := range n {
		id := fmt.Sprintf("o-%d", i)
		starts = append(starts, testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": "order", "instance_id": id, "variables": map[string]any{"orderId": id}}})
		paid = append(paid, testkit.Relay{MessageID: "paid-" + id, Body: map[string]any{"instance_id": id, "message": "payment-received"}})
		shipped = append(shipped, testkit.Relay{MessageID: "shipped-" + id, Body: map[string]any{"message": "order-shipped", "correlation_key": id}})
	}
	pub.Publish(starts...)
	testkit.Eventually(t, 60*time.Second, "all started", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE version = 1") == n
	})
	pub.Publish(paid...)
	testkit.Eventually(t, 30*time.Second, "replica-a mid-step", func() bool {
		return strings.Count(a.logs.String(), "test hook: holding step") >= 2
	})
	killed := time.Now()
	a.kill(t)
	held := env.Int(t, "SELECT count(*) FROM claims WHERE owner LIKE 'replica-a/%'")

	testkit.Eventually(t, 30*time.Second, "replica-b takes the lease", func() bool {
		return env.Int(t, "SELECT count(*) FROM leases WHERE holder = 'replica-b'") == 1
	})
	// About one TTL after the death; the bound leaves room for a busy
	// machine (the lease's own timing is unit-tested in sweeper).
	took := time.Since(killed)
	if took > 2*ttl+2*time.Second {
		t.Errorf("lease taken over %s after its holder died, want within about one TTL (%s)", took, ttl)
	}
	t.Logf("replica-a killed holding %d claims; replica-b took the lease after %s", held, took)
	testkit.Eventually(t, 60*time.Second, "every payment applied", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE version = 2") == n
	})
	// Its relays bounced off the dead replica's claims until they were
	// stale (then the claim or the sweep, whichever came first, took over).
	if !strings.Contains(b.logs.String(), `"holder":"replica-a/lane/`) {
		t.Errorf("replica-b never bounced off replica-a's claims")
	}
	// The new lease holder sweeps: a claim left by the dead replica on an
	// instance nobody resumes is cleared and logged.
	if _, err := env.DB.Exec(testkit.Ctx(t), `INSERT INTO instances (id, definition_key, definition_version, status, version) VALUES ('idle', 'order', 1, 'active', 1);
		INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('idle', 'replica-a/lane/2', now() - interval '3 seconds')`); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "replica-b sweeps", func() bool {
		return strings.Contains(b.logs.String(), `"msg":"stale claim swept","replica":"replica-b","instance_id":"idle","owner":"replica-a/lane/2"`)
	})
	pub.Publish(shipped...)
	testkit.Eventually(t, 60*time.Second, "all completed", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE version = 3 AND status = 'completed' AND id LIKE 'o-%'") == n
	})
	if got := env.Int(t, "SELECT count(*) FROM inbox"); got != 3*n {
		t.Errorf("inbox has %d message ids, want %d (every relay applied once)", got, 3*n)
	}
	testkit.Eventually(t, 10*time.Second, "relay queue drained", func() bool { return pub.QueueDepth(env.Config.RelayQueue) == 0 })
	if got := pub.QueueDepth(env.Config.DeadQueue); got != 0 {
		t.Errorf("%d relays dead-lettered", got)
	}
	// Claims of the dead replica were taken over only once stale.
	env.AssertNoOverlap(t, true)
	env.AssertNoClaimsHeld(t)
}

// A replica that answered a task's completion 204 and then died (kill -9)
// mid-step loses nothing: the completion was recorded, with its relay, before
// the answer; another replica applies it once. With the fast path on, the
// step held is the fast path's: its resume entered the lane's inbox before
// the 204, the outbox relay only once published and consumed, and a lane
// takes its inbox in order. With it off, it is the relay's.
// The same holds for a Zeebe job completed through the gateway: CompleteJob
// answered, then the replica killed before the step committed.
func TestACompletionAnswered204IsAppliedOnceByAnotherReplicaAfterAKill(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"engine-rest", "zeebe"} {
		for _, on := range []string{"true", "false"} {
			t.Run(protocol+"/SUTRA_TASK_FAST_PATH="+on, func(t *testing.T) {
				t.Parallel()
				completionKilledMidStep(t, protocol, "SUTRA_TASK_FAST_PATH="+on)
			})
		}
	}
}

func completionKilledMidStep(t *testing.T, protocol, fastPath string) {
	env := testkit.New(t)
	env.Deploy(t, "../../api/testdata/tasks.bpmn")
	pub := env.Publisher(t)
	fast := []string{"SUTRA_CLAIM_TIMEOUT=2s", "SUTRA_STEP_TIMEOUT=1500ms", "SUTRA_SWEEP_INTERVAL=200ms", "SUTRA_LEASE_TTL=2s", fastPath}
	api, gateway := freeAddr(t), freeAddr(t)
	// Replica a holds every step of a task outcome open before its commit.
	a := startProcess(t, env, "replica-a", append(fast, "SUTRA_API_ADDR="+api, "SUTRA_GATEWAY_ADDR="+gateway, "SUTRA_TEST_HOLD_STEP=task:")...)
	pub.Publish(testkit.Relay{MessageID: "start-i-1", Body: map[string]any{"start": "tasks", "instance_id": "i-1",
		"variables": map[string]any{"topic": "ship", "timeout": "PT1H"}}})
	testkit.Eventually(t, 30*time.Second, "the task", func() bool { return env.Int(t, "SELECT count(*) FROM tasks") == 1 })

	if protocol == "zeebe" {
		completeJob(t, gateway, "ship", map[string]any{"tracking": "TR-1"})
	} else {
		var tasks []struct{ ID string }
		post(t, "http://"+api+"/engine-rest/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
			"topics": []map[string]any{{"topicName": "ship", "lockDuration": 60000}}}, http.StatusOK, &tasks)
		if len(tasks) != 1 {
			t.Fatalf("fetched %d tasks", len(tasks))
		}
		post(t, "http://"+api+"/engine-rest/external-task/"+tasks[0].ID+"/complete", map[string]any{"workerId": "w",
			"variables": map[string]any{"tracking": map[string]any{"value": "TR-1", "type": "String"}}}, http.StatusNoContent, nil)
	}
	testkit.Eventually(t, 30*time.Second, "replica-a mid-step on the completion", func() bool {
		return strings.Contains(a.logs.String(), "test hook: holding step")
	})
	a.kill(t)

	startProcess(t, env, "replica-b", fast...)
	testkit.Eventually(t, 60*time.Second, "the completion applied", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE id = 'i-1' AND status = 'completed'") == 1
	})
	if v := env.Int(t, "SELECT version FROM instances WHERE id = 'i-1'"); v != 2 {
		t.Errorf("version %d: the completion must step the instance once", v)
	}
	if n := env.Int(t, "SELECT count(*) FROM inbox WHERE instance_id = 'i-1'"); n != 2 {
		t.Errorf("inbox has %d ids of i-1, want the start and the completion", n)
	}
	if n := env.Int(t, "SELECT count(*) FROM instances WHERE id = 'i-1' AND variables->>'tracking' = 'TR-1'"); n != 1 {
		t.Error("the completion's variables were lost")
	}
	env.AssertNoOverlap(t, true)
	env.AssertNoClaimsHeld(t)
}

// completeJob activates the one job of typ through the Zeebe gateway at
// addr with Zeebe's Go client and completes it with vars: it returns once
// CompleteJob answered.
func completeJob(t *testing.T, addr, typ string, vars map[string]any) {
	t.Helper()
	zb, err := zbc.NewClient(&zbc.ClientConfig{GatewayAddress: addr, UsePlaintextConnection: true, CredentialsProvider: bearer(apiToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer zb.Close()
	ctx := testkit.Ctx(t)
	jobs, err := zb.NewActivateJobsCommand().JobType(typ).MaxJobsToActivate(1).WorkerName("w").Timeout(time.Minute).Send(ctx)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("activated %d jobs: %v", len(jobs), err)
	}
	cmd, err := zb.NewCompleteJobCommand().JobKey(jobs[0].Key).VariablesFromMap(vars)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.Send(ctx); err != nil {
		t.Fatalf("completing job %d: %v", jobs[0].Key, err)
	}
}

// bearer is a static token for Zeebe's Go client, which fetches tokens
// only by OAuth.
type bearer string

func (b bearer) ApplyCredentials(_ context.Context, headers map[string]string) error {
	headers["Authorization"] = "Bearer " + string(b)
	return nil
}

func (bearer) ShouldRetryRequest(context.Context, error) bool { return false }

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// post sends body as JSON and decodes the answer into out, failing the test
// on another status than want.
func post(t *testing.T, url string, body any, want int, out any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, answer, want)
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			t.Fatalf("POST %s: %v in %s", url, err, answer)
		}
	}
}
