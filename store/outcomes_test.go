package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sutra-run/worker/store"
)

// Outcomes recorded while a group's statement runs wait for it, then share
// one statement and one commit; each is answered with its own result, and
// one that fails (a refused fence, a missing task, a statement error) fails
// no other.
func TestConcurrentOutcomesShareAStatementAndEachGetsItsOwnAnswer(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	for _, sql := range []string{
		`INSERT INTO deployed_files (checksum, xml) VALUES ('x', ''); INSERT INTO definitions (key, version, checksum) VALUES ('p', 1, 'x')`,
		`INSERT INTO instances (id, definition_key, definition_version, status, version)
			SELECT 'i' || n, 'p', 1, 'active', 1 FROM generate_series(1, 7) n`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries) SELECT 'i' || n, 't', 'e', 'ship', 3 FROM generate_series(1, 7) n`,
	} {
		if _, err := env.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	locked, err := st.FetchAndLock(ctx, "w", []store.TopicLock{{Topic: "ship", LockDuration: time.Minute}}, 7, false)
	if err != nil || len(locked) != 7 {
		t.Fatalf("locked %v, %v", locked, err)
	}
	id := func(i int) int64 { return locked[i].ID }
	if _, err := env.DB.Exec(ctx, `UPDATE tasks SET locked_by = 'other' WHERE id = $1`, id(3)); err != nil {
		t.Fatal(err)
	}

	g := newGroupGate()
	st.OnOutcomeGroups(g.grouped, g.joined)
	type answer struct {
		rec store.Recorded
		err error
	}
	record := func(reports []store.TaskReport) []answer {
		t.Helper()
		answers := make([]answer, len(reports))
		g.run(len(reports), func(i int) { answers[i].rec, answers[i].err = st.RecordOutcome(ctx, reports[i]) })
		return answers
	}
	complete := func(i int, vars map[string]any) store.TaskReport {
		return store.TaskReport{TaskID: id(i), Worker: "w", Kind: store.TaskCompleted, Variables: vars}
	}
	recorded := func(a answer, i int) {
		t.Helper()
		if want := fmt.Sprintf("task:%d:1", id(i)); a.err != nil || a.rec.Relay.ID != want || a.rec.Relay.InstanceID != locked[i].InstanceID || a.rec.Topic != "ship" {
			t.Errorf("task %d: answered %+v, %v; want its own relay %s", i, a.rec, a.err, want)
		}
	}

	answers := record([]store.TaskReport{complete(0, nil), complete(1, nil), complete(2, map[string]any{"x": 2.0}),
		complete(3, nil), {TaskID: 1 << 40, Worker: "w", Kind: store.TaskCompleted}, complete(1, nil)})
	got := g.sizes()
	// The first alone, then the four other tasks in one statement, then
	// task 1's other outcome, which one statement never writes with the
	// first of task 1's to wait (either).
	if !slices.Equal(got, []int{1, 4, 1}) {
		t.Errorf("6 outcomes ran in groups of %v, want [1 4 1]", got)
	}
	if answers[1].err != nil {
		answers[1], answers[5] = answers[5], answers[1]
	}
	for _, i := range []int{0, 1, 2} {
		recorded(answers[i], i)
	}
	if !bytes.Contains(answers[2].rec.Relay.Body, []byte(`"x": 2`)) || bytes.Contains(answers[1].rec.Relay.Body, []byte(`"x"`)) {
		t.Errorf("relays carry variables %s and %s; want task 2's only", answers[1].rec.Relay.Body, answers[2].rec.Relay.Body)
	}
	var lock *store.LockError
	if !errors.As(answers[3].err, &lock) || lock.Holder != "other" {
		t.Errorf("the outcome of a task another worker holds: %v, want a LockError naming it", answers[3].err)
	}
	if !errors.Is(answers[4].err, store.ErrNotFound) || !errors.Is(answers[5].err, store.ErrNotFound) {
		t.Errorf("a missing task's outcome and a second outcome: %v, %v; want ErrNotFound", answers[4].err, answers[5].err)
	}

	// An outcome the database refuses (no such kind) fails its statement:
	// the others of its group are recorded alone.
	answers = record([]store.TaskReport{complete(4, nil), complete(5, nil), {TaskID: id(6), Worker: "w", Kind: "bogus"}})
	recorded(answers[0], 4)
	recorded(answers[1], 5)
	if answers[2].err == nil {
		t.Error("an outcome of no such kind was recorded")
	}
	if n := env.Int(t, "SELECT count(*) FROM tasks WHERE outcome IS NOT NULL"); n != 5 {
		t.Errorf("%d tasks have an outcome, want 5", n)
	}
	if n := env.Int(t, "SELECT count(*) FROM outbox"); n != 5 {
		t.Errorf("%d outcome relays in the outbox, want 5", n)
	}
}

// groupGate holds the first group of each run until the run's other calls
// wait behind it, and records the sizes of the groups.
type groupGate struct {
	mu      sync.Mutex
	sizesOf []int
	gate    chan struct{}
	held    chan struct{}
	waiting chan int
}

func newGroupGate() *groupGate {
	return &groupGate{held: make(chan struct{}), waiting: make(chan int, 64)}
}

func (g *groupGate) grouped(n int) {
	g.mu.Lock()
	g.sizesOf = append(g.sizesOf, n)
	gate := g.gate
	g.gate = nil
	g.mu.Unlock()
	if gate != nil {
		g.held <- struct{}{}
		<-gate
	}
}

func (g *groupGate) joined(n int) { g.waiting <- n }

// run runs call(0), holds its group, runs call(1..n-1), lets the group go
// once they all wait, and waits for every call.
func (g *groupGate) run(n int, call func(i int)) {
	g.mu.Lock()
	release := make(chan struct{})
	g.sizesOf, g.gate = nil, release
	g.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { call(0) })
	<-g.held
	for i := 1; i < n; i++ {
		wg.Go(func() { call(i) })
	}
	for w := range g.waiting {
		if w == n-1 {
			break
		}
	}
	close(release)
	wg.Wait()
}

func (g *groupGate) sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizesOf)
}

// Fetches of created tasks (handed to waiting activations) that run while
// one's statement runs share the next statement; each locks the tasks it
// asked for to its own worker.
func TestConcurrentLocksOfCreatedTasksShareAStatement(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	for _, sql := range []string{
		`INSERT INTO deployed_files (checksum, xml) VALUES ('x', ''); INSERT INTO definitions (key, version, checksum) VALUES ('p', 1, 'x')`,
		`INSERT INTO instances (id, definition_key, definition_version, status, version)
			SELECT 'i' || n, 'p', 1, 'active', 1 FROM generate_series(1, 4) n`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries) SELECT 'i' || n, 't', 'e', 'ship', 3 FROM generate_series(1, 4) n`,
	} {
		if _, err := env.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	g := newGroupGate()
	st.OnLockGroups(g.grouped, g.joined)
	created := func(ns ...int) []store.CreatedTask {
		var out []store.CreatedTask
		for _, n := range ns {
			out = append(out, store.CreatedTask{Topic: "ship", InstanceID: fmt.Sprintf("i%d", n), TokenID: "t", Element: "e", LockDuration: time.Minute})
		}
		return out
	}
	asks := []struct {
		worker string
		tasks  []store.CreatedTask
	}{{"a", created(1)}, {"b", created(2)}, {"c", created(3, 4)}, {"d", created(9)}}
	got := make([][]store.LockedTask, len(asks))
	errs := make([]error, len(asks))
	g.run(len(asks), func(i int) { got[i], errs[i] = st.LockCreated(ctx, asks[i].worker, asks[i].tasks) })
	if sizes := g.sizes(); !slices.Equal(sizes, []int{1, 3}) {
		t.Errorf("4 fetches ran in groups of %v, want [1 3]", sizes)
	}
	for i, a := range asks {
		var insts []string
		for _, task := range got[i] {
			insts = append(insts, task.InstanceID)
		}
		var want []string
		for _, c := range a.tasks[:min(len(a.tasks), 2)] {
			if c.InstanceID != "i9" {
				want = append(want, c.InstanceID)
			}
		}
		if errs[i] != nil || !slices.Equal(insts, want) {
			t.Errorf("worker %s locked %v, %v; want %v", a.worker, insts, errs[i], want)
		}
	}
	if n := env.Int(t, `SELECT count(*) FROM tasks
		WHERE (instance_id, locked_by) IN (('i1', 'a'), ('i2', 'b'), ('i3', 'c'), ('i4', 'c'))`); n != 4 {
		t.Errorf("%d tasks are locked to the worker that asked for them, want 4", n)
	}
}

// A panic in a group's statement answers every call of the group with an
// error, goes on up its leader's stack, and leaves the group working.
func TestAPanickingGroupAnswersEveryCallAndTheNextGroupRuns(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	for _, sql := range []string{
		`INSERT INTO deployed_files (checksum, xml) VALUES ('x', ''); INSERT INTO definitions (key, version, checksum) VALUES ('p', 1, 'x')`,
		`INSERT INTO instances (id, definition_key, definition_version, status, version)
			SELECT 'i' || n, 'p', 1, 'active', 1 FROM generate_series(1, 4) n`,
		`INSERT INTO tasks (instance_id, token_id, element_id, type, retries) SELECT 'i' || n, 't', 'e', 'ship', 3 FROM generate_series(1, 4) n`,
	} {
		if _, err := env.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	locked, err := st.FetchAndLock(ctx, "w", []store.TopicLock{{Topic: "ship", LockDuration: time.Minute}}, 4, false)
	if err != nil || len(locked) != 4 {
		t.Fatalf("locked %v, %v", locked, err)
	}
	g := newGroupGate()
	var groups sync.Mutex
	n := 0
	st.OnOutcomeGroups(func(size int) {
		g.grouped(size)
		groups.Lock()
		n++
		second := n == 2
		groups.Unlock()
		if second {
			panic("injected")
		}
	}, g.joined)
	errs := make([]error, 3)
	panicked := make([]any, 3)
	g.run(3, func(i int) {
		defer func() { panicked[i] = recover() }()
		_, errs[i] = st.RecordOutcome(ctx, store.TaskReport{TaskID: locked[i].ID, Worker: "w", Kind: store.TaskCompleted})
	})
	if errs[0] != nil || panicked[0] != nil {
		t.Errorf("the first group's call: %v, panic %v", errs[0], panicked[0])
	}
	leaders, failed := 0, 0
	for i := 1; i < 3; i++ {
		switch {
		case panicked[i] == "injected":
			leaders++
		case errs[i] != nil:
			failed++
		}
	}
	if leaders != 1 || failed != 1 {
		t.Errorf("the panicking group: %d leaders panicked, %d calls answered an error (%v); want 1 and 1", leaders, failed, errs)
	}
	if _, err := st.RecordOutcome(ctx, store.TaskReport{TaskID: locked[3].ID, Worker: "w", Kind: store.TaskCompleted}); err != nil {
		t.Errorf("an outcome after the panic: %v", err)
	}
}
