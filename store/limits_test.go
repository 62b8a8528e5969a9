package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// A step past a limit is refused before anything is sent: on its own, and in
// a batch, where its neighbours commit.
func TestAStepPastTheLimitsIsRefusedWritingNothingAndItsBatchNeighboursCommit(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b", "o-c", "o-d"}
	env, _, proc := batchEnv(t, ids...)
	ctx := testkit.Ctx(t)
	st, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{MaxVariablesBytes: 4 << 10, MaxCommitBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const owner = "r/lane/1"
	cs := claimPaid(t, st, proc, owner, ids)
	cs[1].State.Variables["big"] = strings.Repeat("v", 5<<10) // past the variables' cap
	// 20 tasks of 4 KB each: past the commit's cap.
	for k := range 20 {
		cs[2].Effects.Tasks = append(cs[2].Effects.Tasks, engine.Task{TokenID: fmt.Sprint("x", k), Element: "Ship", Type: "ship",
			Variables: map[string]any{"part": strings.Repeat("t", 4<<10)}})
	}
	errs := st.WriteGroup(ctx, cs[:3])
	if errs[0] != nil || fault.Code(errs[1]) != fault.StepTooLarge || fault.Code(errs[2]) != fault.StepTooLarge {
		t.Fatalf("errs = %v, want [nil too-large too-large]", errs)
	}
	for _, want := range []string{"SUTRA_MAX_VARIABLES_BYTES", "SUTRA_MAX_COMMIT_BYTES"} {
		if !strings.Contains(errs[1].Error()+errs[2].Error(), want) {
			t.Errorf("the refusals %v do not name %s", errs, want)
		}
	}
	if err := st.WriteStep(ctx, cs[3]); err != nil {
		t.Fatal(err)
	}
	cs[3].InstanceID = "o-b" // on its own, as o-d's commit would be with o-b's variables
	cs[3].State.Variables = cs[1].State.Variables
	if err := st.WriteStep(ctx, cs[3]); fault.Code(err) != fault.StepTooLarge {
		t.Fatalf("a single commit past the cap: %v, want %s", err, fault.StepTooLarge)
	}
	for _, id := range ids {
		want := int64(2)
		if id == "o-b" || id == "o-c" {
			want = 1
		}
		if v := env.Int(t, "SELECT version FROM instances WHERE id = $1", id); v != want {
			t.Errorf("%s at version %d, want %d", id, v, want)
		}
	}
	if n := env.Int(t, "SELECT count(*) FROM inbox WHERE message_id IN ('pay-b', 'pay-c')"); n != 0 {
		t.Errorf("%d inbox rows of the refused steps", n)
	}
	// Their claims are still held, for the lane to release.
	if n := env.Int(t, "SELECT count(*) FROM claims"); n != 2 {
		t.Errorf("%d claims held, want the refused steps' 2", n)
	}
}
