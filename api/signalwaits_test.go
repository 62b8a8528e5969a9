package api_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
)

// GET /v1/instances/{id} lists the signals an instance waits for beside its
// other waits, and a broadcast that resumes it closes them.
func TestTheInstanceDetailListsItsSignalWaits(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	file, err := os.ReadFile("testdata/signal-wait.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	if status, p := b.do(t, "POST", "/definitions", file); status != http.StatusCreated {
		t.Fatalf("deploy: %d %v", status, p)
	}
	if status, p := b.do(t, "POST", "/instances", map[string]any{"definition": "signal-wait", "instance_id": "s-1"}); status != http.StatusCreated {
		t.Fatalf("start: %d %v", status, p)
	}
	_, inst := b.do(t, "GET", "/instances/s-1", nil)
	waits, _ := inst["waits"].(map[string]any)
	signals, _ := asList(waits["signals"])
	tasks, _ := asList(waits["tasks"])
	if len(signals) != 1 || signals[0]["element"] != "Alarm" || signals[0]["signal"] != "alarm" || signals[0]["token"] == "" ||
		len(tasks) != 1 || tasks[0]["element"] != "Work" || signals[0]["token"] != tasks[0]["token"] {
		t.Fatalf("waits = %v, want the boundary's signal alarm on Work's token beside Work's task", waits)
	}

	if status, p := b.do(t, "POST", "/signals", map[string]any{"name": "alarm"}); status != http.StatusOK || p["subscriptions"] != 1.0 {
		t.Fatalf("broadcast: %d %v", status, p)
	}
	testkit.Eventually(t, 30*time.Second, "s-1 stopped by the signal", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 's-1' AND status = 'completed'") == 1
	})
	_, inst = b.do(t, "GET", "/instances/s-1", nil)
	waits, _ = inst["waits"].(map[string]any)
	if signals, _ := asList(waits["signals"]); len(signals) != 0 {
		t.Errorf("signals after the broadcast: %v, want none", signals)
	}
}
