package taskwait

import (
	"context"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// replica is one store on a test schema that deployed tasks.bpmn: a
// replica's database side.
type replica struct {
	st   *store.Store
	proc *bpmn.Process
}

func openReplica(t *testing.T, url string) *replica {
	t.Helper()
	ctx := testkit.Ctx(t)
	st, err := store.Open(ctx, url, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	xml, err := os.ReadFile("../../tools/bench/tasks.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Deploy(ctx, xml); err != nil {
		t.Fatal(err)
	}
	proc, err := st.Process(ctx, "tasks3", 1)
	if err != nil {
		t.Fatal(err)
	}
	return &replica{st: st, proc: proc}
}

// start starts instance id, whose first step creates a job of type
// "work", as a lane of r does, and returns the job.
func (r *replica) start(t *testing.T, id string) store.CreatedTask {
	t.Helper()
	ctx := testkit.Ctx(t)
	inst, err := r.st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: "r/lane/0", Timeout: time.Minute, StartKey: "tasks3"})
	if err != nil {
		t.Fatal(err)
	}
	state, eff, err := engine.Step(r.proc, engine.Instance{ID: id}, engine.Trigger{Kind: engine.TriggerStart}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(eff.Tasks) != 1 || eff.Tasks[0].Type != "work" {
		t.Fatalf("the first step created %+v, want one job of type work", eff.Tasks)
	}
	if err := r.st.WriteStep(ctx, store.StepWrites{InstanceID: id, Owner: "r/lane/0", Version: inst.Version, State: state, Effects: eff}); err != nil {
		t.Fatal(err)
	}
	return store.CreatedTask{Topic: "work", InstanceID: id, TokenID: eff.Tasks[0].TokenID, Element: eff.Tasks[0].Element}
}

var work = []store.TopicLock{{Topic: "work", LockDuration: time.Minute}}

// startWaiters starts waiters on st that never look unless asked, with
// their test signals on, and waits for their listener's first look.
func startWaiters(t *testing.T, st Store) *Waiters {
	t.Helper()
	ws := New(Deps{Store: st, Acquire: func(context.Context) (func(), error) { return func() {}, nil }, Logger: testkit.Logger(t)},
		Config{PollInterval: time.Hour})
	for _, s := range []interface{ Init() }{&ws.TestSignals.Looked, &ws.TestSignals.Listening, &ws.TestSignals.Heard, &ws.TestSignals.Fetched} {
		s.Init()
	}
	if err := ws.Start(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWaiters(t, ws) })
	ws.TestSignals.Listening.WaitOrTimeout(t)
	ws.TestSignals.Looked.WaitOrTimeout(t) // the look each connection asks for
	return ws
}

func stopWaiters(t *testing.T, ws *Waiters) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ws.Stop(ctx); err != nil {
		t.Error(err)
	}
}

// fetch runs w's fetch for worker "w" and tells whether it locked the jobs
// handed to it.
func fetch(t *testing.T, ws *Waiters, w *Waiter) ([]store.LockedTask, bool) {
	t.Helper()
	got, err := ws.FetchAndLock(testkit.Ctx(t), w, "w", work, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	return got, ws.TestSignals.Fetched.WaitOrTimeout(t)
}

func woken(t *testing.T, w *Waiter) {
	t.Helper()
	select {
	case <-w.Wake():
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not woken")
	}
}

// A job another replica creates reaches a waiting fetch through the
// commit's notice: no look runs and the waiter fetches once. The job is
// created after the waiter's first fetch and before it waits, the
// interleaving a waiter that registered after its fetch would miss.
func TestAJobOfAnotherReplicaReachesAWaitingFetchWithNoLook(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	here, there := openReplica(t, env.Config.DatabaseURL), openReplica(t, env.Config.DatabaseURL)
	ws := startWaiters(t, here.st)
	w := ws.Add(work, 1, NewSlots(10, func(float64) {}))
	defer ws.Remove(w, false)
	if got, _ := fetch(t, ws, w); len(got) != 0 {
		t.Fatalf("the first fetch locked %+v with no job", got)
	}

	there.start(t, "i-1")
	if topics := ws.TestSignals.Heard.WaitOrTimeout(t); !slices.Equal(topics, []string{"work"}) {
		t.Fatalf("heard %v, want [work]", topics)
	}
	select {
	case <-w.Wake():
	default:
		t.Fatal("the notice heard before the waiter waits left it no wake-up")
	}
	got, _ := fetch(t, ws, w)
	if len(got) != 1 || got[0].InstanceID != "i-1" {
		t.Fatalf("the woken fetch locked %+v, want the job of i-1", got)
	}
	if n := len(ws.TestSignals.Looked.Drain()); n != 0 {
		t.Errorf("%d looks ran: the job was found by a look, not by its notice", n)
	}
	if n := len(ws.TestSignals.Fetched.Drain()); n != 0 {
		t.Errorf("%d more fetches ran, want 2 in all", n)
	}
}

// A job created here is handed to a waiting fetch, which locks it by its
// key; handed to a waiter that leaves, it goes to another, and with no
// waiter left it stays fetchable. The replica skips its own notices.
func TestAJobCreatedHereIsHandedToAWaiterAndNeverLostWhenTheWaiterLeaves(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	here := openReplica(t, env.Config.DatabaseURL)
	ws := startWaiters(t, here.st)
	slots := NewSlots(10, func(float64) {})

	w := ws.Add(work, 1, slots)
	ws.Created([]store.CreatedTask{here.start(t, "i-1")})
	woken(t, w)
	got, handed := fetch(t, ws, w)
	if len(got) != 1 || got[0].InstanceID != "i-1" || !handed || !w.TookHanded() {
		t.Fatalf("the woken fetch locked %+v (by its key: %v), want the job of i-1 handed to it", got, handed)
	}
	ws.Remove(w, false)

	// Handed to a waiter that leaves before it fetches: the next waiter
	// gets it.
	leaves := ws.Add(work, 1, slots)
	ws.Created([]store.CreatedTask{here.start(t, "i-2")})
	stays := ws.Add(work, 1, slots)
	defer ws.Remove(stays, false)
	ws.Remove(leaves, false)
	woken(t, stays)
	got, handed = fetch(t, ws, stays)
	if len(got) != 1 || got[0].InstanceID != "i-2" || !handed {
		t.Fatalf("the next waiter locked %+v (by its key: %v), want the job of i-2 handed on", got, handed)
	}

	// Handed to a waiter that leaves with no other: the job is still
	// fetchable.
	ws.Remove(stays, false)
	alone := ws.Add(work, 1, slots)
	ws.Created([]store.CreatedTask{here.start(t, "i-3")})
	ws.Remove(alone, false)
	got, handed = fetch(t, ws, nil)
	if len(got) != 1 || got[0].InstanceID != "i-3" || handed {
		t.Fatalf("a fetch after the waiter left locked %+v, want the job of i-3", got)
	}
	if heard := ws.TestSignals.Heard.Drain(); len(heard) != 0 {
		t.Errorf("the replica heard its own notices: %v", heard)
	}
}

// A job handed to a waiter is that waiter's: a fetch that does not wait (a
// Zeebe client's poll beside its stream) leaves it, and the waiter locks it
// by its key; jobs handed to no one stay anyone's.
func TestAFetchThatDoesNotWaitLeavesAJobHandedToAWaiter(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	here := openReplica(t, env.Config.DatabaseURL)
	ws := startWaiters(t, here.st)
	w := ws.Add(work, 1, NewSlots(10, func(float64) {}))
	defer ws.Remove(w, false)
	ws.Created([]store.CreatedTask{here.start(t, "i-1")})
	here.start(t, "i-2") // created, handed to no one

	got, _ := fetch(t, ws, nil)
	if len(got) != 1 || got[0].InstanceID != "i-2" {
		t.Fatalf("a fetch that does not wait locked %+v, want only the job handed to no one (i-2)", got)
	}
	if got, _ = fetch(t, ws, nil); len(got) != 0 {
		t.Fatalf("a second fetch that does not wait locked %+v, the job handed to the waiter", got)
	}
	woken(t, w)
	got, handed := fetch(t, ws, w)
	if len(got) != 1 || got[0].InstanceID != "i-1" || !handed {
		t.Fatalf("the waiter locked %+v (by its key: %v), want the job of i-1 handed to it", got, handed)
	}
}

// The listener's connection is its own and goes with the waiters: after a
// database outage it connects again, and the look it asks for then finds
// the job whose notice the outage lost; at the stop it is closed (and
// goleak, TestMain, finds no goroutine left).
func TestTheListenerConnectsAgainAfterAnOutageAndLooksForWhatItMissed(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	pgURL, _ := url.Parse(env.Config.DatabaseURL)
	appName := "sutra-listen-" + env.Schema
	q := pgURL.Query()
	q.Set("application_name", appName)
	pgURL.RawQuery = q.Encode()
	proxy := testkit.NewProxy(t, pgURL.Host)
	here, there := openReplica(t, proxy.Through(t, pgURL.String())), openReplica(t, env.Config.DatabaseURL)
	ws := startWaiters(t, here.st)
	listeners := func() int64 {
		return env.Int(t, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN "sutra\_tasks\_%'`, appName)
	}
	if n := listeners(); n != 1 {
		t.Fatalf("%d listening connections, want 1", n)
	}
	w := ws.Add(work, 1, NewSlots(10, func(float64) {}))
	defer ws.Remove(w, false)

	proxy.Cut()
	there.start(t, "i-1") // its notice is lost to the listener
	testkit.Eventually(t, 10*time.Second, "the listener's connection is gone", func() bool { return listeners() == 0 })
	if len(w.Wake()) != 0 {
		t.Fatal("woken during the outage")
	}
	// The pool meets the outage as the replica's calls would: each try
	// drops an idle connection the cut broke, or fails to connect.
	for range 5 { // MaxConns + 1
		if here.st.Ping(testkit.Ctx(t)) == nil {
			t.Fatal("the database answered through the cut proxy")
		}
	}
	proxy.Restore()
	ws.TestSignals.Listening.WaitOrTimeout(t)
	if n := ws.TestSignals.Looked.WaitOrTimeout(t); n != 1 {
		t.Fatalf("the look after the reconnection ran %d statements, want 1", n)
	}
	woken(t, w)
	if got, _ := fetch(t, ws, w); len(got) != 1 || got[0].InstanceID != "i-1" {
		t.Fatalf("the fetch after the outage locked %+v, want the job of i-1", got)
	}
	// Notices reach it again.
	there.start(t, "i-2")
	if topics := ws.TestSignals.Heard.WaitOrTimeout(t); !slices.Equal(topics, []string{"work"}) {
		t.Fatalf("heard %v after the outage, want [work]", topics)
	}

	stopWaiters(t, ws)
	testkit.Eventually(t, 10*time.Second, "the listener's connection is closed at the stop", func() bool { return listeners() == 0 })
}
