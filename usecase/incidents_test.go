package usecase_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// failedTask starts instance id with a task of topic, locks the task and
// fails it with no retries left; it returns the task's id and the incident's
// once the step committed it.
func (b *bundle) failedTask(t *testing.T, id, topic string) (taskID, incidentID int64) {
	t.Helper()
	b.start(id, topic)
	a := activation(topic, 1, nil)
	a.Wait = time.Minute
	var got []store.LockedTask
	if err := b.w.UseCases().Activate(t.Context(), a, func(ts []store.LockedTask) error { got = ts; return nil }); err != nil || len(got) != 1 {
		t.Fatalf("locking the task: %v, %d tasks", err, len(got))
	}
	rec, err := b.w.Store().RecordOutcome(t.Context(), store.TaskReport{TaskID: got[0].ID, Worker: "w", Kind: store.TaskFailed,
		ErrorMessage: "broken"})
	if err != nil {
		t.Fatal(err)
	}
	b.w.Handoff().Relay(rec.Relay)
	testkit.Eventually(t, 20*time.Second, "the incident", func() bool {
		return b.env.DB.QueryRow(t.Context(), `SELECT id FROM incidents WHERE instance_id = $1`, id).Scan(&incidentID) == nil
	})
	return got[0].ID, incidentID
}

// retriesOf is the retries of instance id's open task, once it has one.
func (b *bundle) retriesOf(t *testing.T, id string) int {
	t.Helper()
	var n int
	testkit.Eventually(t, 20*time.Second, "a task of "+id, func() bool {
		return b.env.DB.QueryRow(t.Context(), `SELECT retries FROM tasks WHERE instance_id = $1 AND outcome IS NULL`, id).Scan(&n) == nil
	})
	return n
}

func TestResolvingAnIncidentCreatesItsTaskAgainWithTheRetriesAskedAndOnlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, inc := b.failedTask(t, "r-1", "fails")
	five := 5
	got, err := b.w.UseCases().ResolveIncident(t.Context(), usecase.Conn{}, usecase.IncidentRetry{ID: inc, Retries: &five})
	if err != nil {
		t.Fatal(err)
	}
	if got.InstanceID != "r-1" {
		t.Errorf("the retry read incident %+v, want r-1's", got)
	}
	if n := b.retriesOf(t, "r-1"); n != 5 {
		t.Errorf("the task created again has %d retries, want 5", n)
	}

	_, err = b.w.UseCases().ResolveIncident(t.Context(), usecase.Conn{}, usecase.IncidentRetry{ID: inc})
	if !errors.Is(err, usecase.ErrIncidentResolved) || fault.Code(err) != fault.NotWaiting {
		t.Errorf("a second retry: %v, want %s and ErrIncidentResolved", err, fault.NotWaiting)
	}
	_, err = b.w.UseCases().ResolveIncident(t.Context(), usecase.Conn{}, usecase.IncidentRetry{ID: inc + 1000})
	if !errors.Is(err, store.ErrNotFound) || errors.Is(err, usecase.ErrIncidentResolved) {
		t.Errorf("the retry of no incident: %v, want store.ErrNotFound", err)
	}
}

func TestResolvingAnIncidentWithoutRetriesTakesThoseSetOnItsFailedJobAndGivesTheConnectionBack(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	task, inc := b.failedTask(t, "r-2", "fails2")
	if err := b.w.Store().SetRetries(t.Context(), task, 7); err != nil { // UpdateJobRetries on the failed job
		t.Fatal(err)
	}
	used, idled := 0, 0
	conn := usecase.Conn{Use: func(context.Context) (func(), error) { used++; return func() {}, nil }, Idle: func() { idled++ }}
	if _, err := b.w.UseCases().ResolveIncident(t.Context(), conn, usecase.IncidentRetry{ID: inc}); err != nil {
		t.Fatal(err)
	}
	if n := b.retriesOf(t, "r-2"); n != 7 {
		t.Errorf("the task created again has %d retries, want the 7 set on its failed job", n)
	}
	if used != 1 || idled != 1 {
		t.Errorf("the retry took a connection %d times and gave it back %d times before its step, want 1 and 1", used, idled)
	}
}
