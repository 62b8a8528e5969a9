package claims_test

import (
	"testing"
	"time"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
)

// A batch claim holds what it took and nothing else: a row that does not
// decode is released at once and left for the single claim to report, a row
// another lane holds keeps its holder, and the claims it holds end with the
// batch commit.
func TestABatchClaimReleasesWhatItCannotStepAndCommitsWhatItHolds(t *testing.T) {
	t.Parallel()
	env, st := setup(t) // i-1
	ctx := testkit.Ctx(t)
	starter := claims.New(st, claims.LaneOwner("r1", 0), time.Minute, nil)
	for _, id := range []string{"i-2", "i-3", "i-4"} {
		h, err := starter.Claim(ctx, claims.Request{InstanceID: id, StartKey: "order"})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Commit(ctx, engine.State{Status: engine.StatusActive, Variables: map[string]any{}}, engine.Effects{}, claims.Extras{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.DB.Exec(ctx, `UPDATE instances SET tokens = '{"tokens": 5}' WHERE id = 'i-2'`); err != nil {
		t.Fatal(err)
	}
	other := claims.New(st, claims.LaneOwner("r2", 0), time.Minute, nil)
	if _, err := other.Claim(ctx, claims.Request{InstanceID: "i-3"}); err != nil {
		t.Fatal(err)
	}
	lane := claims.New(st, claims.LaneOwner("r1", 5), time.Minute, nil)
	helds, err := lane.ClaimBatch(ctx, []claims.BatchRequest{{InstanceID: "i-1", InboxID: "a"}, {InstanceID: "i-2", InboxID: "b"},
		{InstanceID: "i-3", InboxID: "c"}, {InstanceID: "i-4", InboxID: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	if helds[0] == nil || helds[1] != nil || helds[2] != nil || helds[3] == nil {
		t.Fatalf("held = %v, want i-1 and i-4 only", helds)
	}
	owners := func(id string) string {
		var o *string
		if err := env.DB.QueryRow(ctx, "SELECT owner FROM instances WHERE id = $1", id).Scan(&o); err != nil {
			t.Fatal(err)
		}
		if o == nil {
			return ""
		}
		return *o
	}
	if o := owners("i-2"); o != "" {
		t.Errorf("the undecodable row is held by %q, want released", o)
	}
	if o := owners("i-3"); o != other.Owner() {
		t.Errorf("i-3 is held by %q, want still %q", o, other.Owner())
	}
	var steps []claims.Step
	for _, h := range []*claims.Held{helds[0], helds[3]} {
		steps = append(steps, claims.Step{Held: h, State: h.Instance.State, Extras: claims.Extras{InboxID: "in-" + h.Instance.ID}})
	}
	for i, err := range claims.CommitBatch(ctx, steps) {
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	for _, h := range []*claims.Held{helds[0], helds[3]} {
		if o := owners(h.Instance.ID); o != "" {
			t.Errorf("%s still held by %q after the batch commit", h.Instance.ID, o)
		}
		if err := h.Release(ctx); err != nil { // a no-op after the commit
			t.Error(err)
		}
	}
	if v := env.Int(t, "SELECT version FROM instances WHERE id = 'i-4'"); v != 2 {
		t.Errorf("i-4 at version %d, want 2", v)
	}
	env.AssertNoOverlap(t, false)
}
