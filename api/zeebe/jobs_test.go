package zeebe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/entities"
	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"github.com/camunda/zeebe/clients/go/v8/pkg/worker"
	"github.com/camunda/zeebe/clients/go/v8/pkg/zbc"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

// jobBundle is a worker on the test's schema with its Zeebe gateway, a Zeebe
// Go client (zbc) and a raw gRPC client of it.
type jobBundle struct {
	env *testkit.Env
	pub *testkit.Publisher
	w   *app.Worker
	zb  zbc.Client
	gw  pb.GatewayClient
}

// token is what the test's clients present; the worker takes any
// (SUTRA_API_INSECURE), the call carries it as a real client's would.
type token struct{}

func (token) ApplyCredentials(_ context.Context, h map[string]string) error {
	h["authorization"] = "Bearer test"
	return nil
}
func (token) ShouldRetryRequest(context.Context, error) bool { return false }

func setupJobs(t *testing.T, tweak func(*app.Config)) *jobBundle {
	t.Helper()
	env := testkit.New(t)
	env.Deploy(t, "../testdata/tasks.bpmn")
	cfg := apptest.Config(env)
	cfg.AdminInsecure = true // UpdateJobRetries and ResolveIncident take an operator's credentials
	if tweak != nil {
		tweak(&cfg)
	}
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	w.Consumer().TestSignals.Init()
	w.Gateway().TestSignals.Init()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	zb, err := zbc.NewClient(&zbc.ClientConfig{GatewayAddress: w.GatewayAddr(), UsePlaintextConnection: true, CredentialsProvider: token{}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(w.GatewayAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zb.Close(); _ = conn.Close() })
	return &jobBundle{env: env, pub: env.Publisher(t), w: w, zb: zb, gw: pb.NewGatewayClient(conn)}
}

// start starts an instance of testdata/tasks.bpmn whose job has type typ
// and waits for its task row.
func (b *jobBundle) start(t *testing.T, id, typ string, vars map[string]any) {
	t.Helper()
	v := map[string]any{"topic": typ, "timeout": "PT1H"}
	for k, x := range vars {
		v[k] = x
	}
	b.pub.Publish(testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": "tasks", "instance_id": id, "variables": v}})
	b.applied(t, "start-"+id)
}

// applied waits until the consumer acked each relay of ids as applied.
func (b *jobBundle) applied(t *testing.T, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		delete(want, b.w.Consumer().TestSignals.Acked.WaitOrTimeout(t))
	}
}

// outcome is the relay id of a job's n-th outcome (store.recordOutcomeSQL).
func outcome(key int64, n int) string { return fmt.Sprintf("task:%d:%d", key, n) }

func (b *jobBundle) instance(t *testing.T, id string) (status string, vars map[string]any, incidents []int64) {
	t.Helper()
	in, err := b.w.Store().Instance(testkit.Ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, inc := range in.Incidents {
		if inc.ResolvedAt == nil {
			incidents = append(incidents, inc.ID)
		}
	}
	return in.Status, in.Variables, incidents
}

// activate activates up to max jobs of typ, waiting up to wait ms for one
// (negative: no wait).
func (b *jobBundle) activate(t *testing.T, typ, worker string, max int32, wait int64) ([]*pb.ActivatedJob, error) {
	t.Helper()
	s, err := b.gw.ActivateJobs(testkit.Ctx(t), &pb.ActivateJobsRequest{Type: typ, Worker: worker, Timeout: 60_000,
		MaxJobsToActivate: max, RequestTimeout: wait})
	if err != nil {
		return nil, err
	}
	var out []*pb.ActivatedJob
	for {
		r, err := s.Recv()
		if err != nil {
			if strings.Contains(err.Error(), "EOF") {
				return out, nil
			}
			return out, err
		}
		out = append(out, r.Jobs...)
	}
}

func (b *jobBundle) one(t *testing.T, typ string) *pb.ActivatedJob {
	t.Helper()
	got, err := b.activate(t, typ, "w", 5, -1)
	if err != nil || len(got) != 1 {
		t.Fatalf("activating %s: %d jobs, %v", typ, len(got), err)
	}
	return got[0]
}

func codeOf(t *testing.T, err error, want codes.Code, in string) {
	t.Helper()
	if status.Code(err) != want || !strings.Contains(err.Error(), in) {
		t.Errorf("answered %v, want %s with %q", err, want, in)
	}
}

func TestAJobWorkerCompletesJobsWithWhatTheyCarry(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	b.start(t, "i-1", "pay", map[string]any{"amount": 3, "other": "x"})
	jobs := make(chan entities.Job, 1)
	jw := b.zb.NewJobWorker().JobType("pay").Handler(func(c worker.JobClient, job entities.Job) {
		cmd, err := c.NewCompleteJobCommand().JobKey(job.GetKey()).VariablesFromMap(map[string]any{"paid": true})
		if err == nil {
			_, err = cmd.Send(context.Background())
		}
		if err != nil {
			t.Errorf("completing: %v", err)
		}
		jobs <- job
	}).Name("payer").Timeout(time.Minute).FetchVariables("amount").PollInterval(50 * time.Millisecond).Open()
	defer func() { jw.Close(); jw.AwaitClose() }()
	job := <-jobs
	b.applied(t, outcome(job.GetKey(), 1))
	st, vars, _ := b.instance(t, "i-1")
	if st != "completed" || vars["paid"] != true {
		t.Errorf("the instance is %s with %v after the job's completion", st, vars)
	}
	headers, _ := job.GetCustomHeadersAsMap()
	jv, _ := job.GetVariablesAsMap()
	if job.Type != "pay" || job.BpmnProcessId != "tasks" || job.ProcessDefinitionVersion != 1 || job.ElementId != "Work" ||
		job.Worker != "payer" || job.Retries != 3 || job.TenantId != "<default>" || headers["kind"] != "test" ||
		job.ProcessInstanceKey < 1<<51 || job.ProcessDefinitionKey < 1<<51 || job.Key < 1<<51 || job.ElementInstanceKey != job.Key ||
		len(jv) != 1 || jv["amount"] != float64(3) {
		t.Errorf("the job carries %+v (headers %v, variables %v)", job.ActivatedJob, headers, jv)
	}
	if d := time.UnixMilli(job.Deadline); time.Until(d) < 30*time.Second || time.Until(d) > time.Minute+time.Second {
		t.Errorf("deadline %v is not the lock's expiry a minute from the activation", d)
	}
}

func TestAFailedJobComesBackThenStopsInAnIncidentThatRetriesAndResolveRetry(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	ctx := testkit.Ctx(t)
	b.start(t, "i-1", "flaky", nil)
	job := b.one(t, "flaky")
	if _, err := b.zb.NewFailJobCommand().JobKey(job.Key).Retries(job.Retries - 1).RetryBackoff(10 * time.Millisecond).
		ErrorMessage("boom").Send(ctx); err != nil {
		t.Fatal(err)
	}
	b.applied(t, outcome(job.Key, 1))
	// Back after its backoff, with one retry fewer: the task is created
	// anew, under a new key.
	got, err := b.activate(t, "flaky", "w", 1, 30_000)
	if err != nil || len(got) != 1 {
		t.Fatalf("the failed job did not come back: %d jobs, %v", len(got), err)
	}
	again := got[0]
	if again.Retries != 2 || again.ElementId != "Work" || again.ProcessInstanceKey != job.ProcessInstanceKey {
		t.Fatalf("the failed job came back as %+v, want Work of the same instance with 2 retries", again)
	}
	// UpdateJobRetries sets what the next failure reports from.
	if _, err := b.zb.NewUpdateJobRetriesCommand().JobKey(again.Key).Retries(1).Send(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.zb.NewFailJobCommand().JobKey(again.Key).Retries(0).ErrorMessage("gave up").Send(ctx); err != nil {
		t.Fatal(err)
	}
	b.applied(t, outcome(again.Key, 1))
	st, _, incidents := b.instance(t, "i-1")
	if st != "active" || len(incidents) != 1 {
		t.Fatalf("after a failure with no retries the instance is %s with open incidents %v, want one", st, incidents)
	}
	in, _ := b.w.Store().Instance(ctx, "i-1")
	if in.Incidents[0].Code != fault.IncidentTaskFailed || !strings.Contains(in.Incidents[0].Message, "gave up") {
		t.Errorf("the incident is %+v", in.Incidents[0])
	}
	// As with Zeebe: the failed job's retries, then the incident resolved.
	if _, err := b.zb.NewUpdateJobRetriesCommand().JobKey(again.Key).Retries(5).Send(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.zb.NewResolveIncidentCommand().IncidentKey(incidents[0]).Send(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.zb.NewResolveIncidentCommand().IncidentKey(incidents[0]).Send(ctx)
	codeOf(t, err, codes.NotFound, "is resolved")
	next := b.one(t, "flaky")
	if next.Retries != 5 {
		t.Errorf("the job the resolution created has %d retries, want the 5 UpdateJobRetries set", next.Retries)
	}
	_, err = b.zb.NewUpdateJobRetriesCommand().JobKey(again.Key).Retries(5).Send(ctx)
	codeOf(t, err, codes.NotFound, fault.TaskNotFound) // its incident is resolved
	if _, err := b.zb.NewCompleteJobCommand().JobKey(next.Key).Send(ctx); err != nil {
		t.Fatal(err)
	}
	b.applied(t, outcome(next.Key, 1))
	if st, _, _ := b.instance(t, "i-1"); st != "completed" {
		t.Errorf("the instance is %s after the retried job completed", st)
	}
}

func TestAThrownErrorIsCaughtByTheBoundaryEvent(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	ctx := testkit.Ctx(t)
	b.start(t, "i-1", "check", nil)
	job := b.one(t, "check")
	if _, err := b.zb.NewThrowErrorCommand().JobKey(job.Key).ErrorCode("REJECTED").ErrorMessage("no").Send(ctx); err != nil {
		t.Fatal(err)
	}
	b.applied(t, outcome(job.Key, 1))
	in, err := b.w.Store().Instance(ctx, "i-1")
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != "completed" || len(in.Incidents) != 0 {
		t.Errorf("the instance is %s with incidents %v after the error its boundary catches", in.Status, in.Incidents)
	}
}

func TestAStreamingWorkerGetsAJobCreatedAfterItsStreamOpened(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, func(c *app.Config) { c.Tasks.PollInterval = time.Hour }) // only the wake-up can find it
	jobs := make(chan entities.Job, 1)
	jw := b.zb.NewJobWorker().JobType("push").Handler(func(c worker.JobClient, job entities.Job) {
		if _, err := c.NewCompleteJobCommand().JobKey(job.GetKey()).Send(context.Background()); err != nil {
			t.Errorf("completing: %v", err)
		}
		jobs <- job
	}).Timeout(time.Minute).StreamEnabled(true).PollInterval(time.Hour).RequestTimeout(-time.Millisecond).Open()
	defer func() { jw.Close(); jw.AwaitClose() }()
	// The worker's poll answers at once (no long poll) and is not repeated
	// for an hour: only its stream can get the job.
	b.w.Gateway().TestSignals.Answered.WaitOrTimeout(t)
	b.w.Gateway().TestSignals.Streaming.WaitOrTimeout(t)
	b.start(t, "i-1", "push", nil)
	select {
	case job := <-jobs:
		b.applied(t, outcome(job.GetKey(), 1))
	case <-time.After(25 * time.Second):
		t.Fatal("the job created after the stream opened was not pushed to it")
	}
}

func TestAJobIsLockedByOneProtocolAtATime(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	ctx := testkit.Ctx(t)
	rest := "http://" + b.w.APIAddr() + "/engine-rest/external-task"
	post := func(path string, body any) (int, []byte) {
		raw, _ := json.Marshal(body)
		resp, err := http.Post(rest+path, "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	fetch := func() []map[string]any {
		code, body := post("/fetchAndLock", map[string]any{"workerId": "rest", "maxTasks": 5,
			"topics": []map[string]any{{"topicName": "both", "lockDuration": 60000}}})
		var got []map[string]any
		if code != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("fetchAndLock: %d %s", code, body)
		}
		return got
	}

	// Locked through /engine-rest: ActivateJobs gets nothing, and a Zeebe
	// completion of it is refused.
	b.start(t, "i-1", "both", nil)
	locked := fetch()
	if len(locked) != 1 {
		t.Fatalf("fetchAndLock locked %d tasks, want 1", len(locked))
	}
	if got, err := b.activate(t, "both", "z", 5, -1); err != nil || len(got) != 0 {
		t.Fatalf("ActivateJobs took %d jobs /engine-rest holds (%v)", len(got), err)
	}
	var key int64
	fmt.Sscan(locked[0]["id"].(string), &key)
	_, err := b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: key})
	codeOf(t, err, codes.FailedPrecondition, fault.TaskLockLost)

	// Activated through Zeebe: fetchAndLock gets nothing, and an
	// /engine-rest completion naming the worker is refused.
	b.start(t, "i-2", "both", nil)
	job := b.one(t, "both")
	if got := fetch(); len(got) != 0 {
		t.Fatalf("fetchAndLock took %d tasks a Zeebe worker holds", len(got))
	}
	if code, body := post(fmt.Sprintf("/%d/complete", job.Key), map[string]any{"workerId": "w"}); code != 400 || !strings.Contains(string(body), fault.TaskLockLost) {
		t.Errorf("an /engine-rest completion of a Zeebe job answered %d %s", code, body)
	}
	if code, body := post(fmt.Sprintf("/%s/complete", locked[0]["id"]), map[string]any{"workerId": "rest"}); code != 204 {
		t.Fatalf("completing the /engine-rest task: %d %s", code, body)
	}
	if _, err := b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key}); err != nil {
		t.Fatal(err)
	}
	b.applied(t, outcome(key, 1), outcome(job.Key, 1))
}

// A Zeebe completion names only the job's key, which stays the same across
// activations: the worker whose activation timed out cannot be told from
// the one that holds the job now (Zeebe accepts either). What holds: the
// job goes to one worker at a time and is completed once.
func TestAJobWhoseActivationTimedOutGoesToAnotherAndCompletesOnce(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	ctx := testkit.Ctx(t)
	b.start(t, "i-1", "slow", nil)
	first := b.one(t, "slow")
	// Its lock expires now: another worker activates it.
	if _, err := b.gw.UpdateJobTimeout(ctx, &pb.UpdateJobTimeoutRequest{JobKey: first.Key, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	second, err := b.activate(t, "slow", "other", 1, 30_000)
	if err != nil || len(second) != 1 {
		t.Fatalf("the timed-out job was not activated again: %d jobs, %v", len(second), err)
	}
	_, err = b.gw.UpdateJobTimeout(ctx, &pb.UpdateJobTimeoutRequest{JobKey: first.Key, Timeout: 60_000})
	if err != nil {
		t.Errorf("extending the lock of an activated job: %v", err)
	}
	// The other worker's completion goes through; the job is then gone.
	if _, err := b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: second[0].Key, Variables: `{"by":"other"}`}); err != nil {
		t.Fatal(err)
	}
	_, err = b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: first.Key})
	codeOf(t, err, codes.NotFound, fault.TaskNotFound)
	b.applied(t, outcome(first.Key, 1))
}

func TestBadJobCallsAreRefusedWithZeebesCodes(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, func(c *app.Config) {
		c.Gateway.MaxJobs = 5
		c.Gateway.MaxStreams = 2
		c.Gateway.MaxMessageSize = 64 << 10
	})
	ctx := testkit.Ctx(t)
	b.start(t, "i-1", "bad", nil)
	job := b.one(t, "bad")

	_, err := b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: 42})
	codeOf(t, err, codes.NotFound, "job 42")
	_, err = b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key, Variables: `{"a":`})
	codeOf(t, err, codes.InvalidArgument, "unexpected end of JSON input")
	_, err = b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key, Variables: `[1]`})
	codeOf(t, err, codes.InvalidArgument, "not a JSON object")
	_, err = b.gw.ThrowError(ctx, &pb.ThrowErrorRequest{JobKey: job.Key})
	codeOf(t, err, codes.InvalidArgument, "errorCode")
	_, err = b.gw.FailJob(ctx, &pb.FailJobRequest{JobKey: job.Key, Retries: -1})
	codeOf(t, err, codes.InvalidArgument, "negative")
	_, err = b.gw.UpdateJobRetries(ctx, &pb.UpdateJobRetriesRequest{JobKey: 42, Retries: 2})
	codeOf(t, err, codes.NotFound, "job 42")
	_, err = b.gw.UpdateJobTimeout(ctx, &pb.UpdateJobTimeoutRequest{JobKey: 42, Timeout: 1000})
	codeOf(t, err, codes.NotFound, "job 42")
	_, err = b.gw.ResolveIncident(ctx, &pb.ResolveIncidentRequest{IncidentKey: 42})
	codeOf(t, err, codes.NotFound, "incident 42")
	_, err = b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key, Variables: `{"big":"` + strings.Repeat("x", 64<<10) + `"}`})
	codeOf(t, err, codes.ResourceExhausted, "larger than max")
	_, err = b.activate(t, "bad", "w", 6, -1)
	codeOf(t, err, codes.ResourceExhausted, "SUTRA_GATEWAY_MAX_JOBS")
	_, err = b.activate(t, "", "w", 1, -1)
	codeOf(t, err, codes.InvalidArgument, "type is required")
	s, err := b.gw.ActivateJobs(ctx, &pb.ActivateJobsRequest{Type: "bad", Timeout: 1000, MaxJobsToActivate: 1, TenantIds: []string{"acme"}})
	if err == nil {
		_, err = s.Recv()
	}
	codeOf(t, err, codes.InvalidArgument, "tenant")
	// A lock for ever, or a worker name that is a document, is refused:
	// both are stored with every job locked.
	for _, req := range []*pb.ActivateJobsRequest{
		{Type: "bad", Worker: "w", Timeout: (25 * time.Hour).Milliseconds(), MaxJobsToActivate: 1},
		{Type: "bad", Worker: strings.Repeat("w", 2000), Timeout: 1000, MaxJobsToActivate: 1},
		{Type: "bad", Worker: "w\x00", Timeout: 1000, MaxJobsToActivate: 1},
	} {
		s, err := b.gw.ActivateJobs(ctx, req)
		if err == nil {
			_, err = s.Recv()
		}
		codeOf(t, err, codes.InvalidArgument, fault.APIInvalid)
	}
	_, err = b.gw.UpdateJobTimeout(ctx, &pb.UpdateJobTimeoutRequest{JobKey: job.Key, Timeout: (25 * time.Hour).Milliseconds()})
	codeOf(t, err, codes.InvalidArgument, "SUTRA_API_MAX_LOCK_DURATION")

	// Two jobs of 40 KiB of variables each: two answers under the 64 KiB
	// message cap.
	big := strings.Repeat("x", 40<<10)
	b.start(t, "i-2", "big", map[string]any{"blob": big})
	b.start(t, "i-3", "big", map[string]any{"blob": big})
	s, err = b.gw.ActivateJobs(ctx, &pb.ActivateJobsRequest{Type: "big", Worker: "w", Timeout: 60_000, MaxJobsToActivate: 5, RequestTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{1, 1} {
		r, err := s.Recv()
		if err != nil || len(r.Jobs) != want {
			t.Fatalf("an answer of %v jobs (%v), want %d a message", r, err, want)
		}
	}
	if r, err := s.Recv(); err == nil {
		t.Errorf("a third answer with %d jobs", len(r.Jobs))
	}

	// Completed once; twice is NotFound.
	if _, err := b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key}); err != nil {
		t.Fatal(err)
	}
	_, err = b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key})
	codeOf(t, err, codes.NotFound, fault.TaskNotFound)
	b.applied(t, outcome(job.Key, 1))

	// Two streams open (SUTRA_GATEWAY_MAX_STREAMS); a third, and a long
	// poll, are refused at once.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range 2 {
		st, err := b.gw.StreamActivatedJobs(sctx, &pb.StreamActivatedJobsRequest{Type: "idle", Timeout: 1000})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = st.Recv() }() // ends with the cancel
		b.w.Gateway().TestSignals.Streaming.WaitOrTimeout(t)
	}
	st, err := b.gw.StreamActivatedJobs(ctx, &pb.StreamActivatedJobsRequest{Type: "idle", Timeout: 1000})
	if err == nil {
		_, err = st.Recv()
	}
	codeOf(t, err, codes.ResourceExhausted, "SUTRA_GATEWAY_MAX_STREAMS")
	lp, err := b.gw.ActivateJobs(ctx, &pb.ActivateJobsRequest{Type: "idle", Timeout: 1000, MaxJobsToActivate: 1, RequestTimeout: 60_000})
	if err == nil {
		_, err = lp.Recv()
	}
	codeOf(t, err, codes.ResourceExhausted, "SUTRA_GATEWAY_MAX_STREAMS")
	cancel()
}

// A user task without zeebe:userTask is a job of type
// io.camunda.zeebe:userTask, activated and completed as any job, as Zeebe
// 8.4 served it.
func TestAJobWorkerUserTaskIsAJobOfZeebesUserTaskType(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	ctx := testkit.Ctx(t)
	b.env.Deploy(t, "testdata/jobusertask.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-u", Body: map[string]any{"start": "jobusertask", "instance_id": "u-1"}})
	b.applied(t, "start-u")
	job := b.one(t, "io.camunda.zeebe:userTask")
	if job.ElementId != "Review" || !strings.Contains(job.CustomHeaders, `"screen":"review"`) {
		t.Errorf("the user task's job is %+v", job)
	}
	if _, err := b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key, Variables: `{"ok":true}`}); err != nil {
		t.Fatal(err)
	}
	b.applied(t, outcome(job.Key, 1))
	if st, vars, _ := b.instance(t, "u-1"); st != "completed" || vars["ok"] != true {
		t.Errorf("the instance is %s with %v after its user task's job completed", st, vars)
	}
}
