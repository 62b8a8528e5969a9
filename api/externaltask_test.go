package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bundle is a worker on the test's schema and queues, and an HTTP client of
// its API.
type bundle struct {
	// token, when set, goes with every call of the task API.
	token string
	env   *testkit.Env
	cfg   app.Config
	pub   *testkit.Publisher
	reg   *prometheus.Registry
	w     *app.Worker
	base  string
}

func setup(t *testing.T, tweak func(*app.Config)) *bundle {
	t.Helper()
	env := testkit.New(t)
	env.Deploy(t, "testdata/tasks.bpmn")
	b := &bundle{env: env, cfg: apptest.Config(env), pub: env.Publisher(t), reg: prometheus.NewRegistry()}
	if tweak != nil {
		tweak(&b.cfg)
	}
	w, err := app.Start(testkit.Ctx(t), b.cfg, app.Options{Logger: testkit.Logger(t), Registry: b.reg})
	if err != nil {
		t.Fatal(err)
	}
	w.Consumer().TestSignals.Init()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	b.w, b.base = w, "http://"+w.APIAddr()+"/engine-rest"
	return b
}

// start starts an instance of testdata/tasks.bpmn whose task has topic and
// waits for its task row.
func (b *bundle) start(t *testing.T, id, topic string, vars map[string]any) {
	t.Helper()
	v := map[string]any{"topic": topic, "timeout": "PT1H"}
	for k, x := range vars {
		v[k] = x
	}
	b.pub.Publish(testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": "tasks", "instance_id": id, "variables": v}})
	b.applied(t, "start-"+id) // its step created the task
}

// requeued waits until the consumer has requeued relay id n times (a
// refusal, such as a held claim). Call it from the test's goroutine.
func (b *bundle) requeued(t *testing.T, id string, n int) {
	t.Helper()
	for n > 0 {
		if b.w.Consumer().TestSignals.Requeued.WaitOrTimeout(t).MessageID == id {
			n--
		}
	}
}

// applied waits until the consumer has acked each relay of ids as applied
// (its step committed, or it was a duplicate or buffered). Call it from the
// test's goroutine: the acks of other relays it meets are dropped.
func (b *bundle) applied(t *testing.T, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		delete(want, b.w.Consumer().TestSignals.Acked.WaitOrTimeout(t))
	}
}

// call posts body (JSON unless []byte) to path and returns status and body.
func (b *bundle) call(t *testing.T, path string, body any, header ...string) (int, http.Header, []byte) {
	t.Helper()
	raw, ok := body.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, b.base+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

type locked struct {
	ID                   string                     `json:"id"`
	TopicName            string                     `json:"topicName"`
	WorkerID             string                     `json:"workerId"`
	ProcessInstanceID    string                     `json:"processInstanceId"`
	ProcessDefinitionKey string                     `json:"processDefinitionKey"`
	ProcessDefinitionID  string                     `json:"processDefinitionId"`
	ActivityID           string                     `json:"activityId"`
	Retries              int                        `json:"retries"`
	ErrorMessage         string                     `json:"errorMessage"`
	LockExpirationTime   string                     `json:"lockExpirationTime"`
	Variables            map[string]json.RawMessage `json:"variables"`
	ExtensionProperties  map[string]string          `json:"extensionProperties"`
}

func (b *bundle) fetch(t *testing.T, worker, topic string, max int, lock, wait time.Duration) []locked {
	t.Helper()
	status, _, body := b.call(t, "/external-task/fetchAndLock", map[string]any{
		"workerId": worker, "maxTasks": max, "asyncResponseTimeout": wait.Milliseconds(),
		"topics": []map[string]any{{"topicName": topic, "lockDuration": lock.Milliseconds(), "includeExtensionProperties": true}},
	})
	if status != http.StatusOK {
		t.Fatalf("fetchAndLock: %d %s", status, body)
	}
	var tasks []locked
	if err := json.Unmarshal(body, &tasks); err != nil {
		t.Fatalf("fetchAndLock answer %s: %v", body, err)
	}
	return tasks
}

func TestFetchAndLockAnswersInCamundasWireFormat(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t, "i-1", "wire", map[string]any{"name": "Ada", "count": 3, "amount": 2.5, "big": 1e12, "ok": true, "order": map[string]any{"id": "o-1"}, "none": nil})
	status, hdr, body := b.call(t, "/external-task/fetchAndLock", map[string]any{
		"workerId": "w-1", "maxTasks": 10, "usePriority": true,
		"topics": []map[string]any{{"topicName": "wire", "lockDuration": 60000, "includeExtensionProperties": true}},
	})
	if status != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q (want exactly application/json): %s", status, hdr.Get("Content-Type"), body)
	}
	var tasks []locked
	if err := json.Unmarshal(body, &tasks); err != nil || len(tasks) != 1 {
		t.Fatalf("answer %s: %v", body, err)
	}
	task := tasks[0]
	if task.TopicName != "wire" || task.WorkerID != "w-1" || task.ProcessInstanceID != "i-1" || task.ActivityID != "Work" ||
		task.ProcessDefinitionKey != "tasks" || task.ProcessDefinitionID != "tasks:1" || task.Retries != 3 ||
		task.ExtensionProperties["kind"] != "test" {
		t.Errorf("task = %+v", task)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000-0700", task.LockExpirationTime); err != nil {
		t.Errorf("lockExpirationTime %q is not in Camunda's format: %v", task.LockExpirationTime, err)
	}
	want := map[string]string{
		"name":   `{"value":"Ada","type":"String","valueInfo":{}}`,
		"count":  `{"value":3,"type":"Integer","valueInfo":{}}`,
		"amount": `{"value":2.5,"type":"Double","valueInfo":{}}`,
		"big":    `{"value":1000000000000,"type":"Long","valueInfo":{}}`,
		"ok":     `{"value":true,"type":"Boolean","valueInfo":{}}`,
		"order":  `{"value":"{\"id\":\"o-1\"}","type":"Json","valueInfo":{}}`,
		"none":   `{"value":null,"type":"Null","valueInfo":{}}`,
	}
	for name, w := range want {
		if got := string(task.Variables[name]); got != w {
			t.Errorf("variable %s = %s, want %s", name, got, w)
		}
	}
}

func TestTwoWorkersFetchingOneTopicAtOnceNeverGetTheSameTask(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const n = 40
	for i := range n {
		b.start(t, fmt.Sprintf("i-%d", i), "shared", nil)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for _, worker := range []string{"w-a", "w-b"} {
		wg.Go(func() {
			for {
				tasks := b.fetch(t, worker, "shared", 3, time.Minute, 0)
				if len(tasks) == 0 {
					return
				}
				mu.Lock()
				for _, task := range tasks {
					if other, dup := seen[task.ID]; dup {
						t.Errorf("task %s locked by %s and %s", task.ID, other, worker)
					}
					seen[task.ID] = worker
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d tasks locked, want %d", len(seen), n)
	}
}

func TestAnExpiredLockLetsAnotherWorkerTakeTheTaskAndTheLateWorkerIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t, "i-1", "slow", nil)
	first := b.fetch(t, "late", "slow", 1, 50*time.Millisecond, 0)
	if len(first) != 1 {
		t.Fatalf("first fetch = %+v", first)
	}
	var second []locked
	testkit.Eventually(t, 20*time.Second, "the task fetchable after its lock expired", func() bool {
		second = b.fetch(t, "prompt", "slow", 1, time.Minute, 0)
		return len(second) == 1
	})
	if second[0].ID != first[0].ID {
		t.Fatalf("fetched task %s, want %s", second[0].ID, first[0].ID)
	}
	status, _, body := b.call(t, "/external-task/"+first[0].ID+"/complete", map[string]any{"workerId": "late"})
	var e struct{ Type, Message, Code string }
	_ = json.Unmarshal(body, &e)
	if status != http.StatusBadRequest || e.Code != fault.TaskLockLost || e.Type != "BadUserRequestException" || !strings.Contains(e.Message, "prompt") {
		t.Fatalf("late complete: %d %s", status, body)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE outcome IS NOT NULL"); n != 0 {
		t.Fatalf("the refused complete recorded an outcome")
	}
	if status, _, body := b.call(t, "/external-task/"+first[0].ID+"/complete", map[string]any{"workerId": "prompt"}); status != http.StatusNoContent {
		t.Fatalf("complete by the holder: %d %s", status, body)
	}
	// The holder's completion is the one applied: the instance ends at Done
	// (checking it still active raced the completion's own step).
	b.applied(t, "task:"+first[0].ID+":1") // the task's first outcome: the late worker's recorded none
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed'"); n != 1 {
		t.Errorf("%d instances completed, want 1", n)
	}
}

func TestAnOutcomeIsRecordedWithItsRelayBeforeTheAnswerAndOnlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t, "i-1", "once", nil)
	task := b.fetch(t, "w", "once", 1, time.Minute, 0)[0]
	status, _, body := b.call(t, "/external-task/"+task.ID+"/complete", map[string]any{
		"workerId": "w", "variables": map[string]any{"receipt": map[string]any{"value": "r-1", "type": "String"}},
		"localVariables": map[string]any{"payload": map[string]any{"value": `{"a":[1,2]}`, "type": "Json"}},
	})
	if status != http.StatusNoContent {
		t.Fatalf("complete: %d %s", status, body)
	}
	var relay []byte
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT body FROM outbox WHERE target = 'relay' AND id = $1", "task:"+task.ID+":1").Scan(&relay); err != nil {
		t.Fatalf("no relay in the outbox: %v", err)
	}
	var env struct {
		InstanceID string `json:"instance_id"`
		Task       struct {
			ID, Token, Element, Outcome string
		}
		Variables map[string]any
	}
	if err := json.Unmarshal(relay, &env); err != nil {
		t.Fatal(err)
	}
	if env.InstanceID != "i-1" || env.Task.ID != task.ID || env.Task.Element != "Work" || env.Task.Outcome != "completed" ||
		env.Variables["receipt"] != "r-1" || fmt.Sprint(env.Variables["payload"]) != "map[a:[1 2]]" {
		t.Errorf("relay = %s", relay)
	}
	for path, body := range map[string]map[string]any{
		"/complete":  {"workerId": "w"},
		"/failure":   {"workerId": "w", "retries": 0},
		"/bpmnError": {"workerId": "w", "errorCode": "X"},
	} {
		status, _, body := b.call(t, "/external-task/"+task.ID+path, body)
		if status != http.StatusNotFound || !strings.Contains(string(body), fault.TaskNotFound) {
			t.Errorf("%s after complete: %d %s", path, status, body)
		}
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE target = 'relay'"); n != 1 {
		t.Errorf("%d relays queued, want 1", n)
	}
}

func TestBadRequestsAreRefusedWith400AndTheirReason(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { c.Tasks.MaxTasks = 10 })
	b.start(t, "i-1", "bad", nil)
	task := b.fetch(t, "w", "bad", 1, time.Minute, 0)[0]
	topic := func(extra map[string]any) map[string]any {
		m := map[string]any{"workerId": "w", "maxTasks": 1, "topics": []map[string]any{{"topicName": "t", "lockDuration": 1000}}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name, path string
		body       any
		status     int
		says       string
	}{
		{"not JSON", "/external-task/fetchAndLock", []byte("{"), 400, "not a valid request"},
		{"unknown field", "/external-task/fetchAndLock", topic(map[string]any{"colour": "red"}), 400, "colour"},
		{"no workerId", "/external-task/fetchAndLock", map[string]any{"maxTasks": 1}, 400, "workerId"},
		{"maxTasks over the cap", "/external-task/fetchAndLock", topic(map[string]any{"maxTasks": 11}), 400, "maxTasks"},
		{"negative lock", "/external-task/fetchAndLock", topic(map[string]any{"topics": []map[string]any{{"topicName": "t", "lockDuration": -1}}}), 400, "lockDuration"},
		{"negative long poll", "/external-task/fetchAndLock", topic(map[string]any{"asyncResponseTimeout": -5}), 400, "asyncResponseTimeout"},
		{"negative retries", "/external-task/" + task.ID + "/failure", map[string]any{"workerId": "w", "retries": -1}, 400, "retries"},
		{"negative retry timeout", "/external-task/" + task.ID + "/failure", map[string]any{"workerId": "w", "retries": 1, "retryTimeout": -1}, 400, "retryTimeout"},
		{"retry timeout over the cap", "/external-task/" + task.ID + "/failure", map[string]any{"workerId": "w", "retries": 1, "retryTimeout": 9e12}, 400, "SUTRA_API_MAX_RETRY_TIMEOUT"},
		{"negative extension", "/external-task/" + task.ID + "/extendLock", map[string]any{"workerId": "w", "newDuration": -1}, 400, "newDuration"},
		{"bpmnError without code", "/external-task/" + task.ID + "/bpmnError", map[string]any{"workerId": "w"}, 400, "errorCode"},
		{"variable of a bad type", "/external-task/" + task.ID + "/complete", map[string]any{"workerId": "w", "variables": map[string]any{"f": map[string]any{"value": "x", "type": "File"}}}, 400, "not supported"},
		{"unknown task", "/external-task/999999/complete", map[string]any{"workerId": "w"}, 404, fault.TaskNotFound},
		{"path traversal", "/external-task/..%2F..%2Fetc/complete", map[string]any{"workerId": "w"}, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := b.call(t, tt.path, tt.body)
			if status != tt.status || !strings.Contains(string(body), tt.says) {
				t.Errorf("%d %s, want %d saying %q", status, body, tt.status, tt.says)
			}
			if status < 500 && tt.status != 404 && hdr.Get("Content-Type") != "application/json" {
				t.Errorf("error answered as %q", hdr.Get("Content-Type"))
			}
		})
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE outcome IS NOT NULL"); n != 0 {
		t.Errorf("a refused call recorded an outcome")
	}
}

func TestEveryCallNeedsTheTokenWhenOneIsSet(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { c.API.Token = "s3cret" })
	fetch := map[string]any{"workerId": "w", "maxTasks": 1, "topics": []map[string]any{}}
	for _, tt := range []struct {
		header []string
		status int
	}{
		{nil, 401},
		{[]string{"Authorization", "Bearer wrong"}, 401},
		{[]string{"Authorization", "Basic dXNlcjp3cm9uZw=="}, 401}, // user:wrong
		{[]string{"Authorization", "Bearer s3cret"}, 200},
		{[]string{"Authorization", "Basic ZGVtbzpzM2NyZXQ="}, 200}, // demo:s3cret
	} {
		if status, _, body := b.call(t, "/external-task/fetchAndLock", fetch, tt.header...); status != tt.status {
			t.Errorf("%v: %d %s, want %d", tt.header, status, body, tt.status)
		}
	}
	for _, path := range []string{"/complete", "/failure", "/bpmnError", "/extendLock", "/unlock"} {
		if status, _, _ := b.call(t, "/external-task/1"+path, map[string]any{}); status != 401 {
			t.Errorf("%s without the token: %d", path, status)
		}
	}
}

func TestALongPollIsAnsweredByATaskCreatedOnThisReplica(t *testing.T) {
	t.Parallel()
	// The poll for other replicas' tasks never runs during the test: only the
	// in-process wake-up from this replica's commit can answer the long poll.
	b := setup(t, func(c *app.Config) { c.Tasks.PollInterval = time.Hour })
	b.w.Tasks().TestSignals.Init()
	got := make(chan []locked, 1)
	go func() { got <- b.fetch(t, "w", "soon", 1, time.Minute, 30*time.Second) }()
	b.w.Tasks().TestSignals.Waiting.WaitOrTimeout(t) // it found nothing and waits
	b.start(t, "i-1", "soon", nil)
	var created time.Time
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT created_at FROM tasks WHERE instance_id = 'i-1'").Scan(&created); err != nil {
		t.Fatal(err)
	}
	select {
	case tasks := <-got:
		if len(tasks) != 1 || tasks[0].ProcessInstanceID != "i-1" {
			t.Fatalf("long poll answered %+v", tasks)
		}
		t.Logf("long poll answered %s after the task's creation", time.Since(created).Round(time.Millisecond))
	case <-time.After(25 * time.Second):
		t.Fatal("the long poll was not woken by the task created on its replica")
	}
}

func TestEachTaskCreatedWakesOneLongPollAndReachesOneWithoutThePoll(t *testing.T) {
	t.Parallel()
	// Only the in-process wake-ups can answer: the poll never runs.
	b := setup(t, func(c *app.Config) { c.Tasks.PollInterval = time.Hour })
	b.w.Tasks().TestSignals.Init()
	const polls = 4
	got := make(chan []locked, polls)
	for i := range polls {
		go func() { got <- b.fetch(t, fmt.Sprintf("w%d", i), "many", 1, time.Minute, 30*time.Second) }()
	}
	for range polls {
		b.w.Tasks().TestSignals.Waiting.WaitOrTimeout(t) // each found nothing and waits
	}
	seen := map[string]bool{}
	for i := range polls {
		id := fmt.Sprintf("i-%d", i)
		b.start(t, id, "many", nil)
		select {
		case tasks := <-got:
			if len(tasks) != 1 || seen[tasks[0].ProcessInstanceID] {
				t.Fatalf("long poll answered %+v after the task of %s (answered before: %v)", tasks, id, seen)
			}
			seen[tasks[0].ProcessInstanceID] = true
		case <-time.After(25 * time.Second):
			t.Fatalf("no long poll was answered with the task of %s", id)
		}
	}
	// A long poll woken for a task it did not get fetches again and waits
	// again (signalling Waiting) before it can answer; all have answered, so
	// every such fetch was signalled by now.
	if again := b.w.Tasks().TestSignals.Waiting.Drain(); len(again) != 0 {
		t.Errorf("%d long polls were woken for a task another one took (a fetch statement each)", len(again))
	}
}

func TestExtendLockKeepsTheTaskAndUnlockReleasesIt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t, "i-1", "lock", nil)
	// Locked for 10 s, then extended to 60: the check below (over 50 s left)
	// tells the two apart, and no slow machine can let the first lock lapse.
	task := b.fetch(t, "w", "lock", 1, 10*time.Second, 0)[0]
	if status, _, body := b.call(t, "/external-task/"+task.ID+"/extendLock", map[string]any{"workerId": "w", "newDuration": 60000}); status != 204 {
		t.Fatalf("extendLock: %d %s", status, body)
	}
	if status, _, _ := b.call(t, "/external-task/"+task.ID+"/extendLock", map[string]any{"workerId": "other", "newDuration": 60000}); status != 400 {
		t.Fatalf("extendLock by another worker: %d", status)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE locked_by = 'w' AND lock_expires_at > now() + interval '50 seconds'"); n != 1 {
		t.Fatal("the lock was not extended")
	}
	if status, _, _ := b.call(t, "/external-task/"+task.ID+"/unlock", nil); status != 204 {
		t.Fatalf("unlock: %d", status)
	}
	if again := b.fetch(t, "other", "lock", 1, time.Minute, 0); len(again) != 1 || again[0].ID != task.ID {
		t.Fatalf("after unlock: %+v", again)
	}
}
