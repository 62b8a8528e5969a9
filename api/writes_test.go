package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
)

// Writes that must not explode: what one step writes stays proportional to
// what it changes.

func TestAMultiInstanceOverManyItemsWritesTaskRowsWithoutCopyingTheVariables(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.env.Deploy(t, "testdata/multi.bpmn")
	const n = 4000
	blob := strings.Repeat("x", 62<<10)
	list := make([]any, n)
	for k := range list {
		list[k] = k
	}
	b.pub.Publish(testkit.Relay{MessageID: "start-many", Body: map[string]any{"start": "multi", "instance_id": "many",
		"variables": map[string]any{"items": list, "blob": blob}}})
	testkit.Eventually(t, 60*time.Second, "the inner instances' tasks", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'many'") == n
	})
	// Each row holds its item and loopCounter (about 40 bytes); a copy of the
	// instance's variables would be 62 KB a row, 250 MB in all.
	if bytes := b.env.Int(t, "SELECT sum(pg_column_size(variables)) FROM tasks"); bytes > 100*n {
		t.Errorf("the task rows' variables take %d bytes: the instance's variables were copied into each", bytes)
	}
	got := b.fetch(t, "w", "each", 1, time.Minute, 0)
	if len(got) != 1 {
		t.Fatalf("fetched %d tasks, want 1", len(got))
	}
	var v struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(got[0].Variables["blob"], &v); err != nil || v.Value != blob {
		t.Errorf("the fetched task lacks the instance's variable blob (%v)", err)
	}
	if err := json.Unmarshal(got[0].Variables["item"], &v); err != nil || v.Value != 0.0 {
		t.Errorf("the fetched task's item = %v (%v), want its own input 0", v.Value, err)
	}
	if _, ok := got[0].Variables["results"]; ok {
		t.Error("the fetched task carries the body's output collection")
	}
}
