package claims_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
)

// A batch claim holds what it took and nothing else: a row that does not
// decode is released at once and left for the single claim to report, a row
// another lane holds keeps its holder, a lane whose guard refuses takes
// nothing, each lane's claims are its own, and the claims it holds end with
// the batch commit.
func TestABatchClaimReleasesWhatItCannotStepAndCommitsWhatItHolds(t *testing.T) {
	t.Parallel()
	env, st := setup(t) // i-1
	ctx := testkit.Ctx(t)
	starter := claims.New(st, claims.LaneOwner("r1", 0), time.Minute, nil)
	for _, id := range []string{"i-2", "i-3", "i-4", "i-5", "i-6"} {
		h, err := starter.Claim(ctx, claims.Request{InstanceID: id, StartKey: "order"})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.WriteStep(ctx, engine.State{Status: engine.StatusActive, Variables: map[string]any{}}, engine.Effects{}, claims.Extras{}); err != nil {
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
	lapsed := errors.New("registration lapsed")
	refused := claims.New(st, claims.LaneOwner("r1", 6), time.Minute, func() error { return lapsed })
	seventh := claims.New(st, claims.LaneOwner("r1", 7), time.Minute, nil)
	all, errs := claims.ClaimBatch(ctx, []claims.Batch{
		{Claimer: lane, Requests: []claims.BatchRequest{{InstanceID: "i-1", InboxID: "a"}, {InstanceID: "i-2", InboxID: "b"},
			{InstanceID: "i-3", InboxID: "c"}, {InstanceID: "i-4", InboxID: "d"}}},
		{Claimer: refused, Requests: []claims.BatchRequest{{InstanceID: "i-5", InboxID: "e"}}},
		{Claimer: seventh, Requests: []claims.BatchRequest{{InstanceID: "i-6", InboxID: "f"}, {InstanceID: "i-1", InboxID: "a"}}},
	})
	if errs[0] != nil || !errors.Is(errs[1], lapsed) || errs[2] != nil {
		t.Fatalf("errs = %v, want only the refusing lane's guard error", errs)
	}
	helds := all[0]
	if helds[0] == nil || helds[1] != nil || helds[2] != nil || helds[3] == nil {
		t.Fatalf("held = %v, want i-1 and i-4 only", helds)
	}
	if len(all[2]) != 2 || all[2][0] == nil || all[2][0].Owner() != seventh.Owner() {
		t.Fatalf("lane 7 holds %v, want i-6 as its own", all[2])
	}
	if all[2][1] != nil {
		t.Fatalf("lane 7 holds i-1 too, which lane 5 asked for first in the same statement")
	}
	owners := func(id string) string {
		var o *string
		if err := env.DB.QueryRow(ctx, "SELECT (SELECT owner FROM claims WHERE instance_id = $1)", id).Scan(&o); err != nil {
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
	if o := owners("i-5"); o != "" {
		t.Errorf("i-5 is held by %q, want free: its lane's guard refused", o)
	}
	if o := owners("i-6"); o != seventh.Owner() {
		t.Errorf("i-6 is held by %q, want %q", o, seventh.Owner())
	}
	if err := all[2][0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	var steps []claims.Step
	for _, h := range []*claims.Held{helds[0], helds[3]} {
		steps = append(steps, claims.Step{Held: h, State: h.Instance.State, Extras: claims.Extras{InboxID: "in-" + h.Instance.ID}})
	}
	for i, err := range claims.WriteGroup(ctx, steps) {
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
