package app_test

import (
	"context"
	"testing"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
	"github.com/sutra-run/worker/store"
)

// A running worker registers the schema version it carries beside its
// replica lease, which a contract migration reads; the row goes when it
// stops.
func TestAWorkerRegistersItsSchemaVersionWhileItRuns(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Publisher(t)
	cfg := apptest.Config(env)
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := env.Int(t, `SELECT count(*) FROM replica_versions v JOIN leases l ON l.holder = v.holder
		WHERE l.name = 'replica/' || $1 AND v.replica_id = $1 AND v.schema_version = $2 AND v.release <> ''`,
		cfg.ReplicaID, store.SchemaVersion()); got != 1 {
		t.Errorf("%d registrations of replica %s at schema %d, want 1", got, cfg.ReplicaID, store.SchemaVersion())
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := env.Int(t, "SELECT count(*) FROM replica_versions"); got != 0 {
		t.Errorf("%d version rows left after the worker stopped", got)
	}
}
