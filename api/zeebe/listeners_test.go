package zeebe_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/entities"
	"github.com/camunda/zeebe/clients/go/v8/pkg/worker"

	"github.com/sutra-run/worker/internal/testkit"
)

// A Zeebe Go client's job worker completes an execution listener's job as
// any job: the element's own job follows, seeing what the listener set.
func TestAZeebeJobWorkerCompletesAnExecutionListenerJob(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	b.env.Deploy(t, "../testdata/listened.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-l1", Body: map[string]any{"start": "listened", "instance_id": "l1"}})
	b.applied(t, "start-l1")

	jobs := make(chan entities.Job, 1)
	jw := b.zb.NewJobWorker().JobType("charge-start").Handler(func(c worker.JobClient, job entities.Job) {
		cmd, err := c.NewCompleteJobCommand().JobKey(job.GetKey()).VariablesFromMap(map[string]any{"limit": 50})
		if err == nil {
			_, err = cmd.Send(context.Background())
		}
		if err != nil {
			t.Errorf("completing: %v", err)
		}
		jobs <- job
	}).Name("listener").Timeout(time.Minute).PollInterval(50 * time.Millisecond).Open()
	defer func() { jw.Close(); jw.AwaitClose() }()
	job := <-jobs
	if job.ElementId != "Charge" || job.BpmnProcessId != "listened" || job.Retries != 3 {
		t.Errorf("the listener's job carries %+v", job.ActivatedJob)
	}
	b.applied(t, outcome(job.GetKey(), 1))

	task := b.one(t, "charge")
	var vars map[string]any
	if err := json.Unmarshal([]byte(task.Variables), &vars); err != nil || vars["limit"] != float64(50) {
		t.Errorf("the task's job sees %s (%v), want the listener's limit", task.Variables, err)
	}
}

// A listener's job failed to zero retries is an incident on its element;
// UpdateJobRetries on the job's key and ResolveIncident create that
// listener's job again with those retries, as for any job.
func TestAListenerJobFailedToZeroRetriesIsResolvedAsAnyJob(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	ctx := testkit.Ctx(t)
	b.env.Deploy(t, "../testdata/listened.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-l2", Body: map[string]any{"start": "listened", "instance_id": "l2"}})
	b.applied(t, "start-l2")
	job := b.one(t, "charge-start")
	if _, err := b.zb.NewFailJobCommand().JobKey(job.Key).Retries(0).ErrorMessage("gave up").Send(ctx); err != nil {
		t.Fatal(err)
	}
	b.applied(t, outcome(job.Key, 1))
	st, _, incidents := b.instance(t, "l2")
	if st != "active" || len(incidents) != 1 {
		t.Fatalf("the instance is %s with open incidents %v, want one", st, incidents)
	}
	if _, err := b.zb.NewUpdateJobRetriesCommand().JobKey(job.Key).Retries(4).Send(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.zb.NewResolveIncidentCommand().IncidentKey(incidents[0]).Send(ctx); err != nil {
		t.Fatal(err)
	}
	next := b.one(t, "charge-start")
	if next.Retries != 4 || next.ElementId != "Charge" {
		t.Fatalf("the job the resolution created is %+v, want the listener's with the 4 retries UpdateJobRetries set", next)
	}
	if _, err := b.zb.NewCompleteJobCommand().JobKey(next.Key).Send(ctx); err != nil {
		t.Fatal(err)
	}
	b.applied(t, outcome(next.Key, 1))
	if task := b.one(t, "charge"); task.ElementId != "Charge" {
		t.Fatalf("task = %+v", task)
	}
}

// A sequential multi-instance activity's listeners run around each inner
// instance: a Zeebe client completes, per parcel, the start listener's job
// (seeing the parcel), the task's (seeing what the listener set) and the
// end listener's, whose label the output collection gathers.
func TestZeebeJobsOfListenersAroundEachInnerInstance(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	ctx := testkit.Ctx(t)
	b.env.Deploy(t, "../testdata/each-listened.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-e1", Body: map[string]any{"start": "each-listened", "instance_id": "e1",
		"variables": map[string]any{"parcels": []any{"p1", "p2"}}}})
	b.applied(t, "start-e1")
	complete := func(typ, parcel string, vars map[string]any) map[string]any {
		t.Helper()
		job := b.one(t, typ)
		var seen map[string]any
		if err := json.Unmarshal([]byte(job.Variables), &seen); err != nil || seen["parcel"] != parcel || job.ElementId != "Ship" {
			t.Fatalf("%s job at %s sees %s (%v), want parcel %s", typ, job.ElementId, job.Variables, err, parcel)
		}
		cmd, err := b.zb.NewCompleteJobCommand().JobKey(job.Key).VariablesFromMap(vars)
		if err == nil {
			_, err = cmd.Send(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		b.applied(t, outcome(job.Key, 1))
		return seen
	}
	for _, parcel := range []string{"p1", "p2"} {
		complete("ship-before", parcel, map[string]any{"carrier": "dhl"})
		if seen := complete("ship", parcel, map[string]any{"label": "L-" + parcel}); seen["carrier"] != "dhl" {
			t.Fatalf("the task's job sees %v, want the start listener's carrier", seen)
		}
		complete("ship-after", parcel, nil)
	}
	st, vars, _ := b.instance(t, "e1")
	if labels, _ := vars["labels"].([]any); st != "completed" || len(labels) != 2 || labels[0] != "L-p1" || labels[1] != "L-p2" {
		t.Fatalf("the instance is %s with labels %v, want completed with both", st, vars["labels"])
	}
	b.env.AssertNoClaimsHeld(t)
}

// CancelProcessInstance of an instance whose user task has canceling
// listeners holds the cancel until a Zeebe job worker completed their jobs,
// in order; a second CancelProcessInstance meanwhile is accepted and opens
// no second job.
func TestCancelProcessInstanceWaitsForCancelingListenerJobs(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	ctx := testkit.Ctx(t)
	b.env.Deploy(t, "../testdata/canceled.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-g1", Body: map[string]any{"start": "canceled", "instance_id": "g1"}})
	b.applied(t, "start-g1")
	key := int64(b.env.Int(t, "SELECT zeebe_key FROM instances WHERE id = 'g1'"))
	for range 2 {
		if _, err := b.zb.NewCancelInstanceCommand().ProcessInstanceKey(key).Send(ctx); err != nil {
			t.Fatalf("CancelProcessInstance: %v", err)
		}
	}
	for _, typ := range []string{"on-cancel", "on-cancel-notify"} {
		if st, _, _ := b.instance(t, "g1"); st != "cancelling" {
			t.Fatalf("before the %s job the instance is %s, want cancelling", typ, st)
		}
		job := b.one(t, typ)
		if job.ElementId != "Review" {
			t.Fatalf("%s job = %+v, want one of Review", typ, job)
		}
		if _, err := b.zb.NewCompleteJobCommand().JobKey(job.Key).Send(ctx); err != nil {
			t.Fatal(err)
		}
		b.applied(t, outcome(job.Key, 1))
	}
	if st, _, _ := b.instance(t, "g1"); st != "cancelled" {
		t.Fatalf("the instance is %s, want cancelled once the listeners' jobs completed", st)
	}
	b.env.AssertNoClaimsHeld(t)
}
