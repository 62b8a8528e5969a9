package usecase_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bundle is a worker on the test's schema and queues with
// testdata/tasks.bpmn deployed; the use cases under test are its own.
type bundle struct {
	env *testkit.Env
	w   *app.Worker
	pub *testkit.Publisher
}

func setup(t *testing.T, tweak func(*app.Config)) *bundle {
	t.Helper()
	env := testkit.New(t)
	env.Deploy(t, "testdata/tasks.bpmn")
	cfg := apptest.Config(env)
	if tweak != nil {
		tweak(&cfg)
	}
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
		env.AssertNoOverlap(t, false)
		env.AssertNoClaimsHeld(t)
	})
	return &bundle{env: env, w: w, pub: env.Publisher(t)}
}

// start starts instance id of testdata/tasks.bpmn, whose task has topic,
// through the relay path; it does not wait for the step.
func (b *bundle) start(id, topic string) {
	b.pub.Publish(testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": "tasks", "instance_id": id,
		"variables": map[string]any{"topic": topic, "timeout": "PT1H"}}})
}
