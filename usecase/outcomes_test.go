package usecase_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

func TestATaskOutcomeIsRecordedFencedOnItsHolderAndHandedToTheLanes(t *testing.T) {
	t.Parallel()
	// The relay's copy never reaches the lanes before the outbox poll: the
	// completion applied first is the hand-off's.
	b := setup(t, func(c *app.Config) { c.Outbox.PollInterval = time.Hour })
	b.start("o-1", "done")
	a := activation("done", 1, nil)
	a.Wait = time.Minute
	var got []store.LockedTask
	if err := b.w.UseCases().Activate(t.Context(), a, func(ts []store.LockedTask) error { got = ts; return nil }); err != nil || len(got) != 1 {
		t.Fatalf("locking the task: %v, %d tasks", err, len(got))
	}
	task := got[0].ID
	uc := b.w.UseCases()

	var lock *store.LockError
	_, err := uc.RecordTaskOutcome(t.Context(), usecase.Conn{}, store.TaskReport{TaskID: task, Worker: "other", Kind: store.TaskCompleted})
	if !errors.As(err, &lock) {
		t.Errorf("another worker's completion: %v, want a *store.LockError", err)
	}
	rec, err := uc.RecordTaskOutcome(t.Context(), usecase.Conn{}, store.TaskReport{TaskID: task, Worker: "w", Kind: store.TaskCompleted,
		Variables: map[string]any{"ok": true}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Topic != "done" {
		t.Errorf("recorded the outcome of topic %q, want done", rec.Topic)
	}
	var status string
	testkit.Eventually(t, 20*time.Second, "the instance completed by the hand-off", func() bool {
		return b.env.DB.QueryRow(t.Context(), `SELECT status FROM instances WHERE id = 'o-1'`).Scan(&status) == nil && status == "completed"
	})
	_, err = uc.RecordTaskOutcome(t.Context(), usecase.Conn{}, store.TaskReport{TaskID: task, Worker: "w", Kind: store.TaskCompleted})
	if !errors.Is(err, store.ErrNotFound) && !errors.As(err, &lock) {
		t.Errorf("a second completion: %v, want refused", err)
	}
}
