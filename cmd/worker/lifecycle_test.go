package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testkit"
)

// stop sends SIGTERM and returns how long the process took to exit and how.
func (p *process) stop(t *testing.T) (time.Duration, error) {
	t.Helper()
	began := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		return time.Since(began), err
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatal("the worker did not exit within a minute of SIGTERM")
		return 0, nil
	}
}

// waitLog waits for a log line containing s.
func (p *process) waitLog(t *testing.T, s string) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "log line "+s, func() bool { return strings.Contains(p.logs.String(), s) })
}

func TestAStopIsBoundedByTheShutdownTimeoutEvenWithAStepHeldPastIt(t *testing.T) {
	t.Parallel()
	const timeout, slack = 2 * time.Second, 3 * time.Second
	tests := []struct {
		name  string
		stuck bool
		// bound is how long past SIGTERM the process may take to exit: the
		// deadline and what it allows, plus slack for a -race binary's exit
		// on a busy machine (the held step would hold it for an hour).
		bound time.Duration
	}{
		// A step waiting on something cancellable (the database, the broker)
		// is cancelled at the deadline and releases its claim on its way out.
		{"cancellable step", false, timeout + slack},
		// A step stuck where cancellation cannot reach it is abandoned: the
		// process exits all the same and the sweep clears the claim.
		{"stuck step", true, timeout + 2*startstop.Grace + slack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := testkit.New(t)
			env.Deploy(t, "../../examples/order.bpmn")
			pub := env.Publisher(t)
			p := startProcess(t, env, "held", "SUTRA_SHUTDOWN_TIMEOUT="+timeout.String(),
				"SUTRA_TEST_HOLD_STEP=paid-o-1", "SUTRA_TEST_HOLD_FOR=1h", fmt.Sprintf("SUTRA_TEST_HOLD_IGNORES_STOP=%v", tt.stuck))
			pub.Publish(testkit.Relay{MessageID: "start-o-1", Body: map[string]any{"start": "order", "instance_id": "o-1", "variables": map[string]any{"orderId": "o-1"}}})
			testkit.Eventually(t, 20*time.Second, "o-1 started", func() bool {
				return env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND version = 1") == 1
			})
			pub.Publish(testkit.Relay{MessageID: "paid-o-1", Body: map[string]any{"instance_id": "o-1", "message": "payment-received"}})
			p.waitLog(t, "test hook: holding step")
			took, err := p.stop(t)
			t.Logf("exited %s after SIGTERM (%v)", took, err)
			if took > tt.bound {
				t.Errorf("the worker took %s to exit, over the bound of %s", took, tt.bound)
			}
			if err != nil {
				t.Errorf("exit: %v", err)
			}
			held := env.Int(t, "SELECT count(*) FROM claims WHERE instance_id = 'o-1' AND owner LIKE 'held/lane/%'")
			switch {
			case !tt.stuck && held != 0:
				t.Errorf("the cancelled step left its claim held")
			case tt.stuck && held != 1:
				t.Errorf("the stuck step's claim is not left to the sweep (held = %d)", held)
			}
			if n := env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND version = 1"); n != 1 {
				t.Errorf("the held step committed")
			}
		})
	}
}

func TestASecondLiveProcessWithTheSameReplicaIDRefusesToStartAndACrashedOnesIDIsTakenOver(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Deploy(t, "../../examples/order.bpmn")
	pub := env.Publisher(t)
	ttl := "SUTRA_LEASE_TTL=2s"
	first := startProcess(t, env, "twin", ttl)
	first.waitLog(t, "worker started")

	second := startProcess(t, env, "twin", ttl)
	select {
	case err := <-second.done:
		if err == nil {
			t.Fatal("the second process with the same replica id exited cleanly")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second process with the same replica id did not refuse to start")
	}
	if !strings.Contains(second.logs.String(), fault.ReplicaIDInUse) {
		t.Errorf("the refusal does not carry %s:\n%s", fault.ReplicaIDInUse, second.logs.String())
	}

	// The first one keeps working, alone.
	pub.Publish(testkit.Relay{MessageID: "start-o-1", Body: map[string]any{"start": "order", "instance_id": "o-1", "variables": map[string]any{"orderId": "o-1"}}})
	testkit.Eventually(t, 20*time.Second, "o-1 started", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND version = 1") == 1
	})

	// After a crash, a restart under the same id takes it over once the dead
	// process's registration lapses.
	first.kill(t)
	third := startProcess(t, env, "twin", ttl)
	third.waitLog(t, "worker started")
	pub.Publish(testkit.Relay{MessageID: "paid-o-1", Body: map[string]any{"instance_id": "o-1", "message": "payment-received"}})
	testkit.Eventually(t, 30*time.Second, "o-1 paid by the restarted replica", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND version = 2") == 1
	})
}
