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

	// The first group of each phase holds its statement until the others
	// wait behind it.
	var mu sync.Mutex
	var sizes []int
	var gate chan struct{}
	held := make(chan struct{})
	waiting := make(chan int, 64)
	st.OnOutcomeGroups(func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		g := gate
		gate = nil
		mu.Unlock()
		if g != nil {
			held <- struct{}{}
			<-g
		}
	}, func(n int) { waiting <- n })
	hold := func() chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		sizes, gate = nil, make(chan struct{})
		return gate
	}

	type answer struct {
		rec store.Recorded
		err error
	}
	record := func(reports []store.TaskReport) []answer {
		t.Helper()
		release := hold()
		answers := make([]answer, len(reports))
		var wg sync.WaitGroup
		run := func(i int) {
			wg.Go(func() {
				answers[i].rec, answers[i].err = st.RecordOutcome(ctx, reports[i])
			})
		}
		run(0)
		<-held
		for i := 1; i < len(reports); i++ {
			run(i)
		}
		for n := range waiting {
			if n == len(reports)-1 {
				break
			}
		}
		close(release)
		wg.Wait()
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
	mu.Lock()
	got := slices.Clone(sizes)
	mu.Unlock()
	// The first alone, then the four other tasks in one statement, then
	// task 1's second outcome, which one statement never writes with its
	// first.
	if !slices.Equal(got, []int{1, 4, 1}) {
		t.Errorf("6 outcomes ran in groups of %v, want [1 4 1]", got)
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
