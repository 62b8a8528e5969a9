package usecase_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// userTask starts instance id of definition with vars and returns its
// user task once its step created it.
func (b *bundle) userTask(t *testing.T, id, definition string, vars map[string]any) store.UserTask {
	t.Helper()
	if err := b.w.UseCases().StartInstance(t.Context(), usecase.Conn{}, id, definition, 0, vars); err != nil {
		t.Fatal(err)
	}
	var task int64
	testkit.Eventually(t, 20*time.Second, "the user task of "+id, func() bool {
		return b.env.DB.QueryRow(t.Context(), `SELECT id FROM tasks WHERE instance_id = $1 AND user_task`, id).Scan(&task) == nil
	})
	u, err := b.w.Store().UserTaskByID(t.Context(), task)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestAUserTaskIsAssignedAndUpdatedAtOnceOrAfterItsListeners(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.env.Deploy(t, "testdata/review.bpmn")
	b.env.Deploy(t, "testdata/assigned.bpmn")
	uc, ctx := b.w.UseCases(), t.Context()

	plain := b.userTask(t, "u-1", "review", map[string]any{"reviewer": "ann"})
	ben := "ben"
	deferred, err := uc.AssignUserTask(ctx, "op", plain.ID, &ben)
	if err != nil || deferred {
		t.Fatalf("assigning a task with no listeners: deferred %v, %v; want at once", deferred, err)
	}
	five := 5
	if deferred, err := uc.UpdateUserTask(ctx, "op", plain.ID, engine.UserTaskChanges{Priority: &five}); err != nil || deferred {
		t.Fatalf("updating a task with no listeners: deferred %v, %v; want at once", deferred, err)
	}
	got, err := b.w.Store().UserTaskByID(ctx, plain.ID)
	if err != nil || got.Assignee == nil || *got.Assignee != "ben" || got.Priority != 5 || got.State != "created" {
		t.Fatalf("after the changes: %+v, %v; want ben, priority 5, created", got, err)
	}

	listened := b.userTask(t, "u-2", "assigned", nil)
	deferred, err = uc.AssignUserTask(ctx, "op", listened.ID, &ben)
	if err != nil || !deferred {
		t.Fatalf("assigning a task with assigning listeners: deferred %v, %v; want deferred", deferred, err)
	}
	got, err = b.w.Store().UserTaskByID(ctx, listened.ID)
	if err != nil || got.State != "assigning" || got.Assignee != nil {
		t.Fatalf("an assignment waiting for its listeners: %+v, %v; want assigning, no assignee yet", got, err)
	}
	if _, err := uc.AssignUserTask(ctx, "op", listened.ID, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("assigning a task that is assigning: %v, want store.ErrNotFound", err)
	}
}
