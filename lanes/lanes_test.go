package lanes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore is the lanes' database for tests of the pipeline's logic: every
// instance waits at the receive task of examples/order.bpmn.
type fakeStore struct {
	proc    *bpmn.Process
	waiting engine.State

	claimErr  error
	resolve   func(ctx context.Context, name, key string) (string, error)
	commitErr error

	mu       sync.Mutex
	released []string
	commits  []string
}

func newFakeStore(t *testing.T) *fakeStore {
	t.Helper()
	f, err := os.Open("../examples/order.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	proc, err := bpmn.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := engine.Step(proc, engine.Instance{ID: "i"}, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"orderId": "k"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &fakeStore{proc: proc, waiting: st}
}

func (f *fakeStore) Claim(_ context.Context, r store.ClaimRequest) (store.Instance, error) {
	if f.claimErr != nil {
		return store.Instance{}, f.claimErr
	}
	return store.Instance{ID: r.InstanceID, DefinitionKey: "order", DefinitionVersion: 1, Version: 1, State: f.waiting}, nil
}

func (f *fakeStore) Release(_ context.Context, id, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, id)
	return nil
}

func (f *fakeStore) WriteStep(ctx context.Context, c store.StepWrites) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.commitErr != nil {
		return f.commitErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits = append(f.commits, c.InstanceID)
	return nil
}

func (f *fakeStore) Process(context.Context, string, int) (*bpmn.Process, error) { return f.proc, nil }

// CalledDecisions is never asked: the fake's process calls no decision.
func (f *fakeStore) CalledDecisions(context.Context, *bpmn.Process, int) (engine.Decisions, error) {
	return nil, errors.New("the fake store holds no decisions")
}

func (f *fakeStore) CalledVersion(context.Context, string, string, string, string) (int, error) {
	return 0, errors.New("the fake store holds no versions")
}

func (f *fakeStore) ResolveSubscription(ctx context.Context, name, key, _ string) (string, error) {
	return f.resolve(ctx, name, key)
}

func (f *fakeStore) ResolveOrBuffer(ctx context.Context, b store.Buffer) (string, error) {
	return f.resolve(ctx, b.Message, b.CorrelationKey)
}

func (f *fakeStore) Applied(context.Context, string) (bool, error) { return false, nil }

func (f *fakeStore) MessageStarts(context.Context, string) ([]store.StartTarget, error) {
	return nil, nil
}

func (f *fakeStore) BufferStart(context.Context, string, store.Buffer) error { return nil }

func (f *fakeStore) Forward(context.Context, string, string, []store.RelayOut) error { return nil }
func (f *fakeStore) BroadcastSignal(context.Context, string, string, map[string]any) (store.SignalReach, error) {
	return store.SignalReach{}, nil
}

func (f *fakeStore) releases() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.released...)
}

func newPool(t *testing.T, st lanes.Store, hooks *lanes.Hooks) *lanes.Pool {
	t.Helper()
	p := lanes.New(lanes.Deps{Store: st, Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t), Hooks: hooks},
		lanes.Config{Replica: "r", Lanes: 4, ClaimTimeout: time.Minute})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

// resume is a relay for instance id whose outcome arrives on the channel.
func resume(id string) (lanes.Resume, chan lanes.Result) {
	out := make(chan lanes.Result, 1)
	return lanes.Resume{Cause: lanes.Message{InstanceID: id, MessageID: "m-" + id, Name: "payment-received"},
		Done: func(o lanes.Result) { out <- o }}, out
}

func TestStepErrorsAreClassifiedByWhetherARetryCanCureThem(t *testing.T) {
	t.Parallel()
	pgErr := func(code string) error { return &pgconn.PgError{Code: code, Message: "injected"} }
	tests := []struct {
		name      string
		claimErr  error
		commitErr error
		kind      lanes.Kind
		reason    string
		code      string
	}{
		{"claim held", &store.ClaimHeldError{InstanceID: "i", Holder: "other"}, nil, lanes.Refused, lanes.ReasonClaimHeld, fault.ClaimHeld},
		{"instance missing", fault.New(fault.NotFound, "gone"), nil, lanes.Rejected, "", fault.NotFound},
		{"duplicate", store.ErrDuplicate, nil, lanes.Duplicate, "", ""},
		{"database unreachable", fault.New(fault.Unavailable, "connection refused"), nil, lanes.Retry, lanes.ReasonUnavailable, fault.Unavailable},
		{"replica registration lapsed", fault.New(fault.Unavailable, "lapsed"), nil, lanes.Retry, lanes.ReasonUnavailable, fault.Unavailable},
		{"deadlock at commit", nil, fault.Wrap(fault.Transient, pgErr("40P01"), "commit"), lanes.Retry, lanes.ReasonTransient, fault.Transient},
		{"fenced commit", nil, fault.New(fault.StepFenced, "swept"), lanes.Retry, lanes.ReasonFenced, fault.StepFenced},
		{"bad data at commit", nil, pgErr("22P05"), lanes.Rejected, "", fault.StepFailed},
		{"constraint at commit", nil, pgErr("23514"), lanes.Rejected, "", fault.StepFailed},
		{"undecodable row", errors.New("decoding tokens of i: invalid character"), nil, lanes.Rejected, "", fault.StepFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := newFakeStore(t)
			st.claimErr, st.commitErr = tt.claimErr, tt.commitErr
			p := newPool(t, st, nil)
			r, out := resume("i")
			p.Dispatch(r)
			o := <-out
			if o.Kind != tt.kind || o.Reason != tt.reason || o.Code != tt.code {
				t.Fatalf("outcome = %v/%q/%q (%v), want %v/%q/%q", o.Kind, o.Reason, o.Code, o.Err, tt.kind, tt.reason, tt.code)
			}
			if got, want := o.CountsAsFailure(), tt.reason == lanes.ReasonTransient; got != want {
				t.Errorf("CountsAsFailure = %v, want %v", got, want)
			}
			if tt.commitErr != nil && tt.code != fault.StepFenced && len(st.releases()) != 1 {
				t.Errorf("releases = %v: a failed commit must release the claim", st.releases())
			}
		})
	}
}

// Start accepts before it returns: a relay dispatched at once is stepped,
// not answered Retry as though the pool were stopping (the pool used to
// accept only once its goroutine ran, and a consumer that attached first
// requeued what it handed in meanwhile).
func TestAResumeDispatchedRightAfterStartIsStepped(t *testing.T) {
	t.Parallel()
	for range 20 {
		st := newFakeStore(t)
		p := lanes.New(lanes.Deps{Store: st, Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t)},
			lanes.Config{Replica: "r", Lanes: 4, ClaimTimeout: time.Minute})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, out := resume("i")
		p.Dispatch(r)
		o := <-out
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if o.Kind != lanes.Applied {
			t.Fatalf("outcome = %v/%q (%v), want committed", o.Kind, o.Reason, o.Err)
		}
	}
}

func TestEveryResumeAcceptedBeforeTheStopIsAnsweredEvenWhenForwardedDuringIt(t *testing.T) {
	t.Parallel()
	st := newFakeStore(t)
	stopping := make(chan struct{})
	// Correlate-by-key relays resolve only once the stop has begun, to an
	// instance of another lane than their message's: the forward must find a
	// lane that still runs. (The fake's instance waits with key "k".)
	id := "elsewhere"
	st.resolve = func(context.Context, string, string) (string, error) {
		<-stopping // closed after id is chosen
		return id, nil
	}
	p := newPool(t, st, nil)
	for p.Lane(id) == p.Lane("payment-received\x00k") {
		id += "!"
	}
	const n = 32
	outs := make([]chan lanes.Result, n)
	for i := range n {
		outs[i] = make(chan lanes.Result, 1)
		p.Dispatch(lanes.Resume{Cause: lanes.Correlate{MessageID: fmt.Sprintf("m-%d", i), Message: "payment-received", CorrelationKey: "k"},
			Done: func(o lanes.Result) { outs[i] <- o }})
	}
	p.TestSignals.Stopping.Init()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(context.Background()) }()
	p.TestSignals.Stopping.WaitOrTimeout(t)
	close(stopping)
	for i, out := range outs {
		select {
		case o := <-out:
			if o.Kind != lanes.Rejected && o.Kind != lanes.Applied {
				t.Errorf("resume %d: %v %v", i, o.Kind, o.Err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("resume %d forwarded during the stop was never answered", i)
		}
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	r, out := resume("late")
	p.Dispatch(r)
	if o := <-out; o.Kind != lanes.Retry || o.Reason != lanes.ReasonShutdown {
		t.Fatalf("a resume after the stop: %v %q, want Retry shutdown", o.Kind, o.Reason)
	}
}

func TestAStopAtItsDeadlineCancelsTheStepInFlightWhichReleasesItsClaim(t *testing.T) {
	t.Parallel()
	st := newFakeStore(t)
	holding := make(chan struct{})
	p := newPool(t, st, &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, _ *lanes.Resume) {
		close(holding)
		<-ctx.Done() // a step that outlives the stop's deadline
	}})
	r, out := resume("held")
	p.Dispatch(r)
	<-holding
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	began := time.Now()
	if err := p.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v, want the deadline", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("stop took %s past a 50 ms deadline", took)
	}
	if o := <-out; o.Kind != lanes.Retry || o.Reason != lanes.ReasonShutdown {
		t.Errorf("held step answered %v %q, want Retry shutdown", o.Kind, o.Reason)
	}
	if got := st.releases(); len(got) != 1 || got[0] != "held" {
		t.Errorf("releases = %v, want the held step's claim", got)
	}
}

// The admin owner is shared by every admin call of a replica, and a claim
// re-enters for its own owner: so admin calls must run one at a time, or two
// on one instance would both hold its claim. Whatever instances they name,
// no two admin steps of a replica ever overlap.
func TestAdminCallsOfAReplicaNeverRunTwoStepsAtOnce(t *testing.T) {
	t.Parallel()
	p := newPool(t, newFakeStore(t), nil)
	var mu sync.Mutex
	running, most := 0, 0
	op := func(ctx context.Context, _ lanes.Definitions, _ *bpmn.Process, in engine.Instance, _ time.Time) (lanes.OpResult, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(time.Millisecond) // widen the window a second admin lane would use
		mu.Lock()
		running--
		mu.Unlock()
		return lanes.OpResult{State: in.State}, nil
	}
	const n = 40
	outs := make(chan lanes.Result, n)
	for i := range n {
		p.Dispatch(lanes.Resume{Cause: lanes.AdminOp{InstanceID: []string{"same", "other"}[i%2] + strings.Repeat("x", i%3), Op: op},
			Done: func(o lanes.Result) { outs <- o }})
	}
	for range n {
		if o := <-outs; o.Kind != lanes.Applied {
			t.Fatalf("admin call: %v %v", o.Kind, o.Err)
		}
	}
	if most != 1 {
		t.Fatalf("%d admin steps ran at once", most)
	}
}
