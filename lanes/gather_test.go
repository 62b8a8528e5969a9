package lanes

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// groupStore records the batch commits the writer sends. The first one
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
func (g *groupStore) Release(context.Context, string, string) error     { return nil }
func (g *groupStore) WriteStep(context.Context, store.StepWrites) error { return nil }

// ClaimBatch claims every instance but "taken", recording each group as
// id@owner.
func (g *groupStore) ClaimBatch(_ context.Context, r store.ClaimBatchRequest) ([]store.Claimed, error) {
	var ids []string
	out := make([]store.Claimed, len(r.InstanceIDs))
	for i, id := range r.InstanceIDs {
		ids = append(ids, id+"@"+r.Owners[i])
		out[i] = store.Claimed{Instance: store.Instance{ID: id, Version: 1}, OK: id != "taken"}
	}
	g.record(ids)
	return out, nil
}

// record adds a group; the first one blocks until hold is closed.
func (g *groupStore) record(ids []string) {
	g.mu.Lock()
	first := len(g.groups) == 0
	g.groups = append(g.groups, ids)
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.hold
	}
}

func (g *groupStore) WriteGroup(_ context.Context, cs []store.StepWrites) []error {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.InstanceID)
	}
	g.record(ids)
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

// Batches that lanes hand in while the writer is busy commit together in
// its next transaction, and each lane gets back exactly its own steps'
// outcomes.
func TestBatchesOfSeveralLanesReadyTogetherCommitInOneTransaction(t *testing.T) {
	g := &groupStore{hold: make(chan struct{}), entered: make(chan struct{}), fenced: "c-2"}
	c := newWriteGatherer(time.Minute, 0, 3, func() bool { return false }, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.loop(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	results := make([][]error, 3)
	var lanes sync.WaitGroup
	lanes.Go(func() { results[0] = c.do(steps(t, g, 0, "a-1"), false) })
	<-g.entered // lane 0's batch is committing
	c.handedIn.Init()
	b, cs := steps(t, g, 1, "b-1", "b-2"), steps(t, g, 2, "c-1", "c-2", "c-3")
	lanes.Go(func() { results[1] = c.do(b, false) })
	lanes.Go(func() { results[2] = c.do(cs, false) })
	c.handedIn.WaitOrTimeout(t) // both queued behind the commit in flight
	c.handedIn.WaitOrTimeout(t)
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
// (an unknown outcome, which its lane releases), and the writer goes on.
func TestAGroupCommitThatPanicsAnswersEveryLaneAndTheCommitterGoesOn(t *testing.T) {
	g := &groupStore{hold: make(chan struct{}), entered: make(chan struct{}), panics: true}
	close(g.hold)
	c := newWriteGatherer(time.Minute, 0, 1, func() bool { return false }, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.loop(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	for _, err := range c.do(steps(t, g, 0, "a-1", "a-2"), false) {
		if err == nil {
			t.Fatal("a step of a panicked group commit reported committed")
		}
	}
	g.mu.Lock()
	g.panics = false
	g.mu.Unlock()
	if errs := c.do(steps(t, g, 0, "a-3"), false); errs[0] != nil {
		t.Fatalf("the next commit: %v", errs[0])
	}
}

// Batch claims that lanes hand in while a group claim runs go together in the
// next statement, each instance for its own lane, and each lane gets back its
// own claims.
func TestBatchClaimsOfSeveralLanesReadyTogetherGoInOneStatement(t *testing.T) {
	g := &groupStore{hold: make(chan struct{}), entered: make(chan struct{})}
	c := newClaimGatherer(time.Minute, 0, 3, nil, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.loop(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	lane := func(n int) *claims.Claimer { return claims.New(g, claims.LaneOwner("r", n), time.Minute, nil) }
	batch := func(n int, ids ...string) claims.Batch {
		b := claims.Batch{Claimer: lane(n)}
		for _, id := range ids {
			b.Requests = append(b.Requests, claims.BatchRequest{InstanceID: id, InboxID: "in-" + id})
		}
		return b
	}
	results := make([]claimed, 3)
	var lanes sync.WaitGroup
	lanes.Go(func() { results[0] = c.do(batch(0, "a-1"), false) })
	<-g.entered
	c.handedIn.Init()
	lanes.Go(func() { results[1] = c.do(batch(1, "b-1", "taken"), false) })
	lanes.Go(func() { results[2] = c.do(batch(2, "c-1"), false) })
	c.handedIn.WaitOrTimeout(t) // both queued behind the claim in flight
	c.handedIn.WaitOrTimeout(t)
	close(g.hold)
	lanes.Wait()

	if len(g.groups) != 2 || len(g.groups[1]) != 3 {
		t.Fatalf("statements = %v, want [a-1] then lanes 1 and 2 together", g.groups)
	}
	second := slices.Clone(g.groups[1])
	slices.Sort(second)
	if want := []string{"b-1@r/lane/1", "c-1@r/lane/2", "taken@r/lane/1"}; !slices.Equal(second, want) {
		t.Errorf("second statement claimed %v, want %v", second, want)
	}
	for n, want := range [][]string{{"a-1"}, {"b-1", ""}, {"c-1"}} {
		r := results[n]
		if r.err != nil || len(r.helds) != len(want) {
			t.Fatalf("lane %d got %+v", n, r)
		}
		for i, id := range want {
			switch h := r.helds[i]; {
			case id == "" && h != nil:
				t.Errorf("lane %d holds %s, want nothing for a row not taken", n, h.Instance.ID)
			case id != "" && (h == nil || h.Instance.ID != id || h.Owner() != claims.LaneOwner("r", n)):
				t.Errorf("lane %d got %+v for %s, want it held by its own owner", n, h, id)
			}
		}
	}
}

// poolStore is a groupStore that a pool can run on: it has no definitions,
// so every step it claims fails in the engine and runs on its own after.
type poolStore struct{ *groupStore }

func (poolStore) Process(context.Context, string, int) (*bpmn.Process, error) {
	return nil, errors.New("no definitions here")
}
func (poolStore) CalledDecisions(context.Context, *bpmn.Process, int) (engine.Decisions, error) {
	return nil, errors.New("no decisions here")
}
func (poolStore) CalledVersion(context.Context, string, string, string, string) (int, error) {
	return 0, errors.New("no definitions here")
}
func (poolStore) ResolveSubscription(context.Context, string, string, string) (string, error) {
	return "", nil
}
func (poolStore) ResolveOrBuffer(context.Context, store.Buffer) (string, error) { return "", nil }
func (poolStore) Applied(context.Context, string) (bool, error)                 { return false, nil }
func (poolStore) MessageStarts(context.Context, string) ([]store.StartTarget, error) {
	return nil, nil
}
func (poolStore) BufferStart(context.Context, string, store.Buffer) error { return nil }
func (poolStore) BroadcastSignal(context.Context, string, string, map[string]any) (store.SignalReach, error) {
	return store.SignalReach{}, nil
}
func (poolStore) Forward(context.Context, string, string, []store.RelayOut) error {
	return nil
}

// A relay that finds its lane's queue empty while another lane's batch is
// in the claimer joins the group behind it, instead of claiming and
// committing on its own: at 16 lanes under a moderate load most lanes hold
// one relay at a time, and each paid its own statement and WAL flush.
func TestALoneRelayJoinsTheGroupOfAnotherLanesBatchInFlight(t *testing.T) {
	g := &groupStore{hold: make(chan struct{}), entered: make(chan struct{})}
	st := poolStore{g}
	p := New(Deps{Store: st, Metrics: metrics.New(prometheus.NewRegistry()), Logger: slog.New(slog.DiscardHandler)},
		Config{Replica: "r", Lanes: 4, ClaimTimeout: time.Minute})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop(context.Background()) }()

	var other sync.WaitGroup
	other.Go(func() {
		p.claimer.do(claims.Batch{Claimer: claims.New(st, claims.LaneOwner("r", 9), time.Minute, nil),
			Requests: []claims.BatchRequest{{InstanceID: "x", InboxID: "m-x"}}}, false)
	})
	<-g.entered // another lane's batch is being claimed
	p.claimer.handedIn.Init()
	done := make(chan Result, 1)
	p.Dispatch(Resume{Cause: Message{InstanceID: "y", MessageID: "m-y", Name: "m"}, Done: func(o Result) { done <- o }})
	_, joined := p.claimer.handedIn.Wait(testsignal.Timeout)
	close(g.hold)
	if !joined {
		t.Fatal("the lone relay never joined the claimer's next group")
	}
	<-done
	other.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.groups) != 2 || len(g.groups[1]) != 1 || g.groups[1][0][:2] != "y@" {
		t.Fatalf("claim groups = %v, want [x@…] then [y@…]", g.groups)
	}
}

// openStore is a groupStore whose first group does not block.
func openStore() *groupStore {
	g := &groupStore{hold: make(chan struct{}), entered: make(chan struct{})}
	close(g.hold)
	return g
}

// A batch handed in to wait holds its group open for the batches other
// lanes hand in after it, and no longer than until every lane is in: with a
// wait of an hour, a group that did not close then would hang the test.
func TestAGroupThatMayWaitTakesTheLanesThatComeAfterItAndClosesOnceEveryLaneIsIn(t *testing.T) {
	g := openStore()
	answered := 0
	c := newClaimGatherer(time.Minute, time.Hour, 2, nil, func(n int) { answered += n })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.loop(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	c.waiting.Init()
	var lanes sync.WaitGroup
	lanes.Go(func() {
		c.do(claims.Batch{Claimer: claims.New(g, claims.LaneOwner("r", 0), time.Minute, nil), Requests: []claims.BatchRequest{{InstanceID: "a"}}}, true)
	})
	c.waiting.WaitOrTimeout(t) // lane 0's group waits; lane 1 comes after it
	lanes.Go(func() {
		c.do(claims.Batch{Claimer: claims.New(g, claims.LaneOwner("r", 1), time.Minute, nil), Requests: []claims.BatchRequest{{InstanceID: "b"}}}, false)
	})
	lanes.Wait()

	if len(g.groups) != 1 || len(g.groups[0]) != 2 {
		t.Fatalf("claim statements = %v, want a and b in one", g.groups)
	}
	if answered != 2 {
		t.Errorf("the claimer told of %d batches answered, want 2", answered)
	}
}

// A batch handed in without waiting, with no batch of its cohort on its
// way, runs at once, whatever the gatherer's wait and however many lanes
// may still come: the lanes hand in that way on an idle pool, where a wait
// would only add latency.
func TestABatchThatMayNotWaitRunsAtOnce(t *testing.T) {
	g := openStore()
	c := newClaimGatherer(time.Minute, time.Hour, 2, func() bool { return false }, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.loop(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	got := c.do(claims.Batch{Claimer: claims.New(g, claims.LaneOwner("r", 0), time.Minute, nil), Requests: []claims.BatchRequest{{InstanceID: "a"}}}, false)
	if got.err != nil || len(got.helds) != 1 || got.helds[0] == nil {
		t.Fatalf("claim = %+v", got)
	}
}

// The claimer's group waits for the lanes the writer answered that have not
// handed in their next batch yet (their cohort), even when its first batch
// may not wait (the lanes have backlogs), and closes as soon as none is
// left: lanes whose steps were ready together go on together, so 16 lanes
// claim in as few statements as one.
func TestTheClaimerWaitsForTheLanesTheWriterAnsweredAndNoLonger(t *testing.T) {
	g := openStore()
	var mu sync.Mutex
	left := 1 // stands in for the pool's count of lanes answered and not back yet
	c := newClaimGatherer(time.Minute, time.Hour, 2, func() bool { mu.Lock(); defer mu.Unlock(); return left > 0 }, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.loop(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	c.waiting.Init()
	var lanes sync.WaitGroup
	lanes.Go(func() {
		c.do(claims.Batch{Claimer: claims.New(g, claims.LaneOwner("r", 0), time.Minute, nil), Requests: []claims.BatchRequest{{InstanceID: "a"}}}, false)
	})
	c.waiting.WaitOrTimeout(t) // lane 0's group waits; lane 1 is still answering its relays
	mu.Lock()
	left--
	mu.Unlock()
	lanes.Go(func() {
		c.do(claims.Batch{Claimer: claims.New(g, claims.LaneOwner("r", 1), time.Minute, nil), Requests: []claims.BatchRequest{{InstanceID: "b"}}}, false)
	})
	lanes.Wait()

	if len(g.groups) != 1 || len(g.groups[0]) != 2 {
		t.Fatalf("claim statements = %v, want a and b in one", g.groups)
	}
}

// The writer's group waits for the batches the claimer answered that their
// lanes have not handed in yet (they are computing their steps), and closes
// as soon as none is left, so the batches claimed in one statement commit
// in one transaction.
func TestTheWriterWaitsForTheBatchesClaimedWithItsOwnAndNoLonger(t *testing.T) {
	g := openStore()
	var lanes sync.WaitGroup
	left := 1 // stands in for the pool's count of batches claimed and not handed in
	var mu sync.Mutex
	c := newWriteGatherer(time.Minute, time.Hour, 2, func() bool { mu.Lock(); defer mu.Unlock(); return left > 0 }, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.loop(t.Context(), stop) })
	defer func() { close(stop); wg.Wait() }()

	a, b := steps(t, g, 0, "a"), steps(t, g, 1, "b")
	c.waiting.Init()
	lanes.Go(func() { c.do(a, true) })
	c.waiting.WaitOrTimeout(t) // lane 0's group waits; lane 1 is still computing
	mu.Lock()
	left--
	mu.Unlock()
	lanes.Go(func() { c.do(b, true) })
	lanes.Wait()

	if len(g.groups) != 1 || !slices.Equal(g.groups[0], []string{"a", "b"}) {
		t.Fatalf("transactions = %v, want [a b] in one", g.groups)
	}
}

// Relays that reach the lanes at a rate that fills a wait take the batch
// path even alone, and their lanes' batches share one claim statement; the
// first relay on an idle pool runs on its own, unheld.
func TestRelaysArrivingWithinTheBatchWaitShareOneClaimStatement(t *testing.T) {
	g := openStore()
	st := poolStore{g}
	lane := map[string]int{"first": 0, "second": 0, "third": 1}
	p := New(Deps{Store: st, Metrics: metrics.New(prometheus.NewRegistry()), Logger: slog.New(slog.DiscardHandler),
		Hooks: &Hooks{Route: func(r *Resume) int { return lane[r.id] }}},
		Config{Replica: "r", Lanes: 2, ClaimTimeout: time.Minute, BatchWait: time.Hour})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop(context.Background()) }()

	done := make(chan Result, 3)
	relay := func(id string) {
		p.Dispatch(Resume{Cause: Message{InstanceID: id, MessageID: "m-" + id, Name: "m"}, Done: func(o Result) { done <- o }})
	}
	relay("first")
	<-done
	p.arrivals.mean.Store(0) // as after many relays in quick succession
	relay("second")
	relay("third")
	<-done
	<-done
	g.mu.Lock()
	defer g.mu.Unlock()
	var batched []string
	for _, group := range g.groups {
		if slices.ContainsFunc(group, func(id string) bool { return id == "first@r/lane/0" }) {
			t.Errorf("the first relay on an idle pool was claimed in a batch: %v", g.groups)
		}
		if len(group) == 2 {
			batched = slices.Sorted(slices.Values(group))
		}
	}
	if want := []string{"second@r/lane/0", "third@r/lane/1"}; !slices.Equal(batched, want) {
		t.Fatalf("claim statements = %v, want one with %v", g.groups, want)
	}
}

// Batches wait only while relays arrive at two or more a wait on average:
// not for the first relays after an idle time, not at a steady rate below
// that (a batch of one costs more than a step on its own), and not for an
// odd pair that comes close together; at a rate above it they do, within
// about sixteen arrivals, and stop again once relays thin out.
func TestBatchesWaitOnlyWhileRelaysArriveAtTwoOrMoreAWait(t *testing.T) {
	const wait = 2 * time.Millisecond
	a := newArrivals(wait)
	at := time.Unix(1_000_000, 0)
	run := func(n int, gap time.Duration) (waited int) {
		for range n {
			at = at.Add(gap)
			if a.add(at) {
				waited++
			}
		}
		return waited
	}
	if n := run(1000, 1100*time.Microsecond); n != 0 {
		t.Errorf("at a relay every 1.1ms, %d of 1000 batches waited, want none", n)
	}
	run(1, time.Second)
	if n := run(1, 10*time.Microsecond); n != 0 {
		t.Error("a relay just after another, after an idle second, waited")
	}
	if n := run(16, 300*time.Microsecond); n == 16 {
		t.Error("the first relays of a burst after an idle time all waited")
	}
	if n := run(100, 300*time.Microsecond); n != 100 {
		t.Errorf("at a relay every 0.3ms, %d of the next 100 batches waited, want all", n)
	}
	if n := run(32, 5*time.Millisecond); n == 32 || a.add(at.Add(5*time.Millisecond)) {
		t.Error("batches went on waiting once relays came 5ms apart")
	}
	if newArrivals(0).add(at) {
		t.Error("a pool without a batch wait waited")
	}
}
