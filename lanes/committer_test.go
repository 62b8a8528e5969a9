package lanes

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// groupStore records the batch commits the committer sends. The first one
// blocks until hold is closed; a commit of an instance named in fenced
// answers it StepFenced; panics makes a commit panic.
type groupStore struct {
	hold    chan struct{}
	entered chan struct{}
	fenced  string
	panics  bool

	mu     sync.Mutex
	groups [][]string
}

func (g *groupStore) Claim(_ context.Context, r store.ClaimRequest) (store.Instance, error) {
	return store.Instance{ID: r.InstanceID, Version: 1}, nil
}
func (g *groupStore) Release(context.Context, string, string) error  { return nil }
func (g *groupStore) CommitStep(context.Context, store.Commit) error { return nil }
func (g *groupStore) ClaimBatch(context.Context, store.ClaimBatchRequest) ([]store.Claimed, error) {
	return nil, errors.New("not used")
}

func (g *groupStore) CommitBatch(_ context.Context, cs []store.Commit) []error {
	g.mu.Lock()
	first := len(g.groups) == 0
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.InstanceID)
	}
	g.groups = append(g.groups, ids)
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.hold
	}
	if g.panics {
		panic("boom")
	}
	errs := make([]error, len(cs))
	for i, c := range cs {
		if c.InstanceID == g.fenced {
			errs[i] = fault.New(fault.StepFenced, "fenced")
		}
	}
	return errs
}

// steps claims ids as lane n and returns them as steps of a batch.
func steps(t *testing.T, g *groupStore, n int, ids ...string) []claims.Step {
	t.Helper()
	c := claims.New(g, claims.LaneOwner("r", n), time.Minute, nil)
	var out []claims.Step
	for _, id := range ids {
		h, err := c.Claim(t.Context(), claims.Request{InstanceID: id})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, claims.Step{Held: h, State: engine.State{Status: engine.StatusActive}})
	}
	return out
}

// Batches that lanes hand in while the committer is busy commit together in
// its next transaction, and each lane gets back exactly its own steps'
// outcomes.
func TestBatchesOfSeveralLanesReadyTogetherCommitInOneTransaction(t *testing.T) {
	g := &groupStore{hold: make(chan struct{}), entered: make(chan struct{}), fenced: "c-2"}
	c := newCommitter(groupMax, time.Minute, 3)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.run(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	results := make([][]error, 3)
	var lanes sync.WaitGroup
	lanes.Go(func() { results[0] = c.commit(steps(t, g, 0, "a-1")) })
	<-g.entered // lane 0's batch is committing
	b, cs := steps(t, g, 1, "b-1", "b-2"), steps(t, g, 2, "c-1", "c-2", "c-3")
	lanes.Go(func() { results[1] = c.commit(b) })
	lanes.Go(func() { results[2] = c.commit(cs) })
	for len(c.reqs) < 2 { // both queued behind the commit in flight
		time.Sleep(time.Millisecond)
	}
	close(g.hold)
	lanes.Wait()

	if len(g.groups) != 2 || !slices.Equal(g.groups[0], []string{"a-1"}) || len(g.groups[1]) != 5 {
		t.Fatalf("transactions = %v, want [a-1] then the five steps of lanes 1 and 2 together", g.groups)
	}
	if len(results[0]) != 1 || results[0][0] != nil || len(results[1]) != 2 || results[1][0] != nil || results[1][1] != nil {
		t.Errorf("lanes 0 and 1 got %v, %v, want every step committed", results[0], results[1])
	}
	if r := results[2]; len(r) != 3 || r[0] != nil || fault.Code(r[1]) != fault.StepFenced || r[2] != nil {
		t.Errorf("lane 2 got %v, want [nil fenced nil]", r)
	}
}

// A group commit that panics answers every lane of the group with an error
// (an unknown outcome, which its lane releases), and the committer goes on.
func TestAGroupCommitThatPanicsAnswersEveryLaneAndTheCommitterGoesOn(t *testing.T) {
	g := &groupStore{hold: make(chan struct{}), entered: make(chan struct{}), panics: true}
	close(g.hold)
	c := newCommitter(groupMax, time.Minute, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.run(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	for _, err := range c.commit(steps(t, g, 0, "a-1", "a-2")) {
		if err == nil {
			t.Fatal("a step of a panicked group commit reported committed")
		}
	}
	g.mu.Lock()
	g.panics = false
	g.mu.Unlock()
	if errs := c.commit(steps(t, g, 0, "a-3")); errs[0] != nil {
		t.Fatalf("the next commit: %v", errs[0])
	}
}
