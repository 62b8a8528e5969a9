package lanes_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// countingStore is the real store, recording which instances each
// transaction committed as it returns.
type countingStore struct {
	*store.Store

	mu        sync.Mutex
	groups    int // transactions that committed steps of relays "o-…"
	committed map[string]bool
}

func (s *countingStore) WriteGroup(ctx context.Context, cs []store.StepWrites) []error {
	errs := s.Store.WriteGroup(ctx, cs)
	s.mu.Lock()
	defer s.mu.Unlock()
	counted := false
	for i, c := range cs {
		if errs[i] == nil {
			s.committed[c.InstanceID] = true
			if strings.HasPrefix(c.InstanceID, "o-") && !counted {
				s.groups, counted = s.groups+1, true
			}
		}
	}
	return errs
}

func (s *countingStore) WriteStep(ctx context.Context, c store.StepWrites) error {
	err := s.Store.WriteStep(ctx, c)
	if err == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.committed[c.InstanceID] = true
		if strings.HasPrefix(c.InstanceID, "o-") {
			s.groups++
		}
	}
	return err
}

func (s *countingStore) isCommitted(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed[id]
}

// cohort is a 16-lane pool on the real store with instances o-0 … o-(n-1)
// and b-0 … b-15 waiting for their payment. ready dispatches one payment
// per lane (b-k to lane k) that holds its lane before its commit, then the
// payments of the o-… instances, which queue behind them, and lets the
// lanes go once every one is queued: the payments are all ready at the same
// moment. Each outcome is checked against the commits made before it.
type cohort struct {
	env *testkit.Env
	st  *countingStore
	p   *lanes.Pool
	n   int
	// beforeCommit runs before the commit of each o-… step.
	beforeCommit func(ctx context.Context, id string)
	// ready makes the payments ready together and returns their outcomes
	// by instance.
	ready func() map[string]lanes.Result
	// stop lets the lanes go and stops the pool (its lanes release what
	// they hold after they answer).
	stop func()
}

const cohortLanes = 16

func newCohort(t *testing.T, n int) *cohort {
	t.Helper()
	env := testkit.New(t)
	env.Deploy(t, "../examples/order.bpmn")
	ctx := testkit.Ctx(t)
	inner, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inner.Close)
	c := &cohort{env: env, st: &countingStore{Store: inner, committed: map[string]bool{}}, n: n}
	hold := make(chan struct{})
	var held sync.WaitGroup
	held.Add(cohortLanes)
	hooks := &lanes.Hooks{
		Route: func(r *lanes.Resume) int {
			if m, ok := r.Cause.(lanes.Message); ok && strings.HasPrefix(m.InstanceID, "b-") {
				var k int
				fmt.Sscanf(m.InstanceID, "b-%d", &k)
				return k
			}
			return -1
		},
		BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
			m, ok := r.Cause.(lanes.Message)
			switch {
			case !ok:
			case strings.HasPrefix(m.InstanceID, "b-"):
				held.Done()
				select {
				case <-hold:
				case <-ctx.Done():
				}
			case c.beforeCommit != nil:
				c.beforeCommit(ctx, m.InstanceID)
			}
		},
	}
	c.p = lanes.New(lanes.Deps{Store: c.st, Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t), Hooks: hooks},
		lanes.Config{Replica: "r", Lanes: cohortLanes, ClaimTimeout: time.Minute, BatchWait: 100 * time.Millisecond})
	if err := c.p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(func() { close(hold) })
	c.stop = func() { release(); _ = c.p.Stop(context.Background()) }
	t.Cleanup(c.stop)

	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("o-%d", i))
	}
	for k := range cohortLanes {
		ids = append(ids, fmt.Sprintf("b-%d", k))
	}
	outs := make(chan lanes.Result, len(ids))
	for _, id := range ids {
		c.p.Dispatch(lanes.Resume{Cause: lanes.Start{InstanceID: id, MessageID: "start-" + id, Definition: "order", Variables: map[string]any{"orderId": id}},
			Done: func(o lanes.Result) { outs <- o }})
	}
	for range ids {
		if o := <-outs; o.Kind != lanes.Applied {
			t.Fatalf("start %s: %+v", o.InstanceID, o)
		}
	}
	c.st.mu.Lock()
	c.st.groups = 0 // the starts, one at a time
	c.st.mu.Unlock()
	c.ready = func() map[string]lanes.Result {
		results := make(chan lanes.Result, n+cohortLanes)
		var early sync.Map
		for k := range cohortLanes {
			c.p.Dispatch(payment(fmt.Sprintf("b-%d", k), results, nil))
		}
		held.Wait() // every lane is held before its commit
		c.p.TestSignals.Queued.Init()
		for i := range n {
			id := fmt.Sprintf("o-%d", i)
			c.p.Dispatch(payment(id, results, func(o lanes.Result) {
				if o.Kind == lanes.Applied && !c.st.isCommitted(id) {
					early.Store(id, true)
				}
			}))
		}
		for range n {
			c.p.TestSignals.Queued.WaitOrTimeout(t)
		}
		release()
		got := map[string]lanes.Result{}
		for range n + cohortLanes {
			o := <-results
			got[o.InstanceID] = o
		}
		early.Range(func(id, _ any) bool {
			t.Errorf("%s was answered Applied before its commit", id)
			return true
		})
		return got
	}
	return c
}

// payment is the payment relay of instance id; check sees its outcome
// first.
func payment(id string, out chan<- lanes.Result, check func(lanes.Result)) lanes.Resume {
	return lanes.Resume{Cause: lanes.Message{InstanceID: id, MessageID: "paid-" + id, Name: "payment-received"},
		Done: func(o lanes.Result) {
			if check != nil {
				check(o)
			}
			out <- o
		}}
}

// With 16 lanes, steps that are ready at the same moment share their
// commits: fewer transactions than steps, and each relay is answered
// Applied only once its step has committed. A step whose commit is fenced
// (its claim cleared under it) is answered Retry, and the others of its
// group commit.
func TestStepsReadyTogetherOnSixteenLanesShareTheirCommitsAndAreAckedAfterThem(t *testing.T) {
	t.Parallel()
	const n = 64
	c := newCohort(t, n)
	c.beforeCommit = func(ctx context.Context, id string) {
		if id == "o-0" {
			if _, err := c.env.DB.Exec(ctx, "DELETE FROM claims WHERE instance_id = 'o-0'"); err != nil {
				t.Error(err)
			}
		}
	}
	got := c.ready()
	for id, o := range got {
		switch {
		case id == "o-0":
			if o.Kind != lanes.Retry || o.Code != fault.StepFenced {
				t.Errorf("the fenced step got %+v, want Retry with %s", o, fault.StepFenced)
			}
		case o.Kind != lanes.Applied:
			t.Errorf("%s got %+v, want Applied", id, o)
		}
	}
	if v := c.env.Int(t, "SELECT count(*) FROM instances WHERE id LIKE 'o-%' AND version = 2"); v != n-1 {
		t.Errorf("%d of the o-… instances stepped, want %d (all but the fenced one)", v, n-1)
	}
	if c.st.groups >= n-1 {
		t.Errorf("%d transactions committed %d steps ready together, want fewer", c.st.groups, n-1)
	}
	t.Logf("%d steps ready together on %d lanes committed in %d transactions", n-1, cohortLanes, c.st.groups)
	c.stop()
	c.env.AssertNoClaimsHeld(t)
}

// A group commit that the server kills (SQLSTATE 57P01, as when its
// session is terminated) acks nothing: no relay of it is answered Applied,
// each is answered Retry (the broker redelivers it), no step is written,
// and every claim is released.
func TestAKilledGroupCommitAcksNothing(t *testing.T) {
	t.Parallel()
	const n = 32
	c := newCohort(t, n)
	if _, err := c.env.DB.Exec(testkit.Ctx(t), `
		CREATE FUNCTION kill_commit() RETURNS trigger LANGUAGE plpgsql AS
		  $$ BEGIN RAISE EXCEPTION 'terminating connection due to administrator command' USING ERRCODE = '57P01'; END $$;
		CREATE TRIGGER kill_commit BEFORE UPDATE ON instances FOR EACH ROW WHEN (NEW.id LIKE 'o-%') EXECUTE FUNCTION kill_commit()`); err != nil {
		t.Fatal(err)
	}
	got := c.ready()
	for id, o := range got {
		if strings.HasPrefix(id, "o-") && o.Kind != lanes.Retry {
			t.Errorf("%s got %+v from a killed commit, want Retry", id, o)
		}
	}
	if v := c.env.Int(t, "SELECT count(*) FROM instances WHERE id LIKE 'o-%' AND version > 1"); v != 0 {
		t.Errorf("%d steps written by killed commits", v)
	}
	c.stop()
	c.env.AssertNoClaimsHeld(t)
}
