package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/tasks"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// countingStore counts the statements the API's fetches and looks run.
type countingStore struct {
	*store.Store
	fetches, looks atomic.Int64
}

func (c *countingStore) FetchAndLock(ctx context.Context, worker string, topics []store.TopicLock, max int, byPriority bool) ([]store.LockedTask, error) {
	c.fetches.Add(1)
	return c.Store.FetchAndLock(ctx, worker, topics, max, byPriority)
}

func (c *countingStore) CountFetchable(ctx context.Context, asks []store.TopicLock, limits []int) ([]int, error) {
	c.looks.Add(1)
	return c.Store.CountFetchable(ctx, asks, limits)
}

// post posts a JSON body to base+path; safe in any goroutine.
func post(base, path string, body any) (int, []byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.Post(base+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

type pollResult struct {
	status int
	tasks  []locked
	err    error
}

// longPoll starts a long poll of topic (filtered to definition key unless
// ""), waiting up to wait; its answer comes on the channel.
func longPoll(base, worker, topic, key string, wait time.Duration) <-chan pollResult {
	out := make(chan pollResult, 1)
	ask := map[string]any{"topicName": topic, "lockDuration": 60000}
	if key != "" {
		ask["processDefinitionKey"] = key
	}
	go func() {
		status, body, err := post(base, "/external-task/fetchAndLock", map[string]any{
			"workerId": worker, "maxTasks": 1, "asyncResponseTimeout": wait.Milliseconds(), "topics": []any{ask}})
		r := pollResult{status: status, err: err}
		if err == nil && status == http.StatusOK {
			r.err = json.Unmarshal(body, &r.tasks)
		} else if err == nil {
			r.err = fmt.Errorf("%d %s", status, body)
		}
		out <- r
	}()
	return out
}

func TestIdleLongPollsFilteredByDefinitionCostOneStatementPerLookWhateverTheirNumber(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t, "i-1", "spin", nil) // an open task of definition "tasks" on the topic
	ctx := testkit.Ctx(t)
	st, err := store.Open(ctx, b.env.Config.DatabaseURL, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs := &countingStore{Store: st}
	// A second API on the schema, as another replica's, whose statements are
	// counted; it looks for tasks every 10 ms.
	m := metrics.New(prometheus.NewRegistry())
	srv := api.New(api.Deps{Metrics: m, Logger: testkit.Logger(t)}, api.Config{Addr: "127.0.0.1:0",
		Credentials: api.Credentials{TaskInsecure: true}})
	waiters := taskwait.New(taskwait.Deps{Store: cs, Acquire: srv.AcquireDB, Logger: testkit.Logger(t)}, taskwait.Config{PollInterval: 10 * time.Millisecond})
	tasksAPI := tasks.New(srv, tasks.Deps{Store: cs, UseCases: usecase.New(usecase.Deps{Store: cs, Metrics: m, Waiters: waiters}, usecase.Config{}), Metrics: m, Logger: testkit.Logger(t)}, tasks.Config{})
	sig := &tasksAPI.TestSignals
	sig.Init()
	lookSig := &waiters.TestSignals.Looked
	lookSig.Init()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waiters.Start(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr() + "/engine-rest"

	const polls, looks = 40, 20
	answers := make([]<-chan pollResult, polls)
	for i := range answers {
		answers[i] = longPoll(base, fmt.Sprintf("w%d", i), "spin", "nope", time.Minute)
	}
	for range polls {
		sig.Waiting.WaitOrTimeout(t) // each fetched nothing and waits
	}
	// Count over looks complete looks, from the end of the one in flight.
	lookSig.Drain()
	lookSig.WaitOrTimeout(t)
	fetches, looked := cs.fetches.Load(), cs.looks.Load()
	for n := 0; n < looks; {
		n += lookSig.WaitOrTimeout(t)
	}
	fetches, looked = cs.fetches.Load()-fetches, cs.looks.Load()-looked
	t.Logf("%d long polls over %d looks: %d look statements, %d fetches", polls, looks, looked, fetches)
	if fetches != 0 {
		t.Errorf("long polls filtered to a definition with no task fetched %d times over %d looks: woken by a task they cannot take", fetches, looks)
	}
	if looked > looks+1 {
		t.Errorf("%d look statements over %d looks, want one a look", looked, looks)
	}

	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if err := waiters.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	for _, a := range answers {
		if r := <-a; r.err != nil || len(r.tasks) != 0 {
			t.Errorf("a long poll filtered to an unknown definition answered %+v", r)
		}
	}
}

func TestALongPollFilteredByDefinitionTakesATaskOfItsDefinitionCreatedHere(t *testing.T) {
	t.Parallel()
	// The looks every interval never run: only the look a task created here
	// asks for can find the task for the filtered long poll.
	b := setup(t, func(c *app.Config) { c.Tasks.PollInterval = time.Hour })
	b.w.Tasks().TestSignals.Init()
	got := longPoll(b.base, "w", "kick", "tasks", time.Minute)
	b.w.Tasks().TestSignals.Waiting.WaitOrTimeout(t)
	b.start(t, "i-1", "kick", nil)
	select {
	case r := <-got:
		if r.err != nil || len(r.tasks) != 1 || r.tasks[0].ProcessInstanceID != "i-1" {
			t.Fatalf("the long poll answered %+v", r)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("a long poll filtered to the task's definition was not answered with the task created on its replica")
	}
}

func TestALongPollOverTheCapAnswersAtOnceWithoutWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { c.Tasks.MaxLongPolls = 2; c.Tasks.PollInterval = time.Hour })
	sig := &b.w.Tasks().TestSignals
	sig.Init()
	waiting := []<-chan pollResult{longPoll(b.base, "w1", "cap", "", time.Minute), longPoll(b.base, "w2", "cap", "", time.Minute)}
	sig.Waiting.WaitOrTimeout(t)
	sig.Waiting.WaitOrTimeout(t)

	// The third fetches once and answers: it does not wait its minute.
	if over := b.fetch(t, "w3", "cap", 1, time.Minute, time.Minute); len(over) != 0 {
		t.Fatalf("the long poll over the cap answered %+v", over)
	}
	if again := sig.Waiting.Drain(); len(again) != 0 {
		t.Fatalf("a long poll over SUTRA_API_MAX_LONG_POLLS waited")
	}
	if v := testkit.Counter(t, b.reg, "sutra_api_long_polls_over_cap_total", "", ""); v != 1 {
		t.Errorf("sutra_api_long_polls_over_cap_total = %v, want 1", v)
	}
	// The two admitted still get tasks.
	b.start(t, "i-1", "cap", nil)
	b.start(t, "i-2", "cap", nil)
	for _, w := range waiting {
		if r := <-w; r.err != nil || len(r.tasks) != 1 {
			t.Errorf("an admitted long poll answered %+v", r)
		}
	}
}

func TestBodiesAreCappedPerRouteAndReplicaWide(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) {
		c.API.MaxBody, c.API.MaxDeployBody, c.Tasks.MaxTopics, c.API.MaxBytesInFlight = 4096, 4096, 3, 4096
	})
	sig := &b.w.API().TestSignals
	sig.Init()
	var e struct{ Code, Message string }
	code := func(body []byte) string { e.Code = ""; _ = json.Unmarshal(body, &e); return e.Code }

	// Over the route's limit: refused from the declared length, unread.
	big := map[string]any{"workerId": "w", "variables": map[string]any{"x": map[string]any{"value": strings.Repeat("x", 5000), "type": "String"}}}
	if status, _, body := b.call(t, "/external-task/1/complete", big); status != http.StatusRequestEntityTooLarge || code(body) != fault.APITooLarge {
		t.Errorf("a 5 kB completion under a 4 KiB cap: %d %s", status, body)
	}
	topics := []map[string]any{}
	for i := range 4 {
		topics = append(topics, map[string]any{"topicName": fmt.Sprint("t", i), "lockDuration": 1000})
	}
	if status, _, body := b.call(t, "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "topics": topics}); status != http.StatusBadRequest || !strings.Contains(string(body), "SUTRA_API_MAX_TOPICS") {
		t.Errorf("a fetch of 4 topics under a cap of 3: %d %s", status, body)
	}
	if status, _, body := b.call(t, "/external-task/1/unlock", []byte(strings.Repeat(" ", 5000))); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 5 kB unlock: %d %s", status, body)
	}

	// A body being read holds its bytes: a call that finds no room waits,
	// then is refused with 503 and Retry-After.
	sig.Reading.Drain()
	conn, err := net.Dial("tcp", b.w.APIAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /engine-rest/external-task/1/complete HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{")
	if n := sig.Reading.WaitOrTimeout(t); n != 4096 {
		t.Fatalf("the slow body reserved %d bytes, want 4096", n)
	}
	status, hdr, body := b.call(t, "/external-task/1/complete", map[string]any{"workerId": "w"})
	if status != http.StatusServiceUnavailable || code(body) != fault.APIBusy || hdr.Get("Retry-After") == "" || !strings.Contains(e.Message, "SUTRA_API_MAX_BYTES_IN_FLIGHT") {
		t.Fatalf("a call with every byte in flight taken: %d %v %s", status, hdr, body)
	}
	conn.Close() // its bytes are given back
	testkit.Eventually(t, 20*time.Second, "room for a body again", func() bool {
		status, _, _ := b.call(t, "/external-task/1/complete", map[string]any{"workerId": "w"})
		return status == http.StatusNotFound
	})
}

func TestAPICallsUseNoMoreDatabaseConnectionsThanTheirCapAndAWaitingLongPollUsesNone(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { c.API.MaxDBConns = 1; c.Tasks.PollInterval = time.Hour })
	b.w.Tasks().TestSignals.Init()

	// A long poll that waits holds no connection: calls go on beside it.
	idle := longPoll(b.base, "idle", "idle", "", time.Minute)
	b.w.Tasks().TestSignals.Waiting.WaitOrTimeout(t)
	b.start(t, "i-1", "dbcap", nil)
	task := b.fetch(t, "w", "dbcap", 1, time.Minute, 0)[0]

	// A completion whose statement waits on the task's row lock holds the
	// one connection.
	ctx := testkit.Ctx(t)
	tx, err := b.env.DB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE", task.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		status, _, _ := post(b.base, "/external-task/"+task.ID+"/complete", map[string]any{"workerId": "w"})
		done <- status
	}()
	testkit.Eventually(t, 20*time.Second, "the completion waiting on the row lock", func() bool {
		return b.env.Int(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE tasks t SET outcome%'`) > 0
	})
	status, hdr, body := b.call(t, "/external-task/"+task.ID+"/extendLock", map[string]any{"workerId": "w", "newDuration": 60000})
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), fault.APIBusy) || !strings.Contains(string(body), "SUTRA_API_MAX_DB_CONNS") || hdr.Get("Retry-After") == "" {
		t.Fatalf("a call with the API's one connection taken: %d %s", status, body)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if status := <-done; status != http.StatusNoContent {
		t.Fatalf("the completion that held the connection: %d", status)
	}
	b.start(t, "i-2", "idle", nil)
	if r := <-idle; r.err != nil || len(r.tasks) != 1 {
		t.Fatalf("the long poll answered %+v", r)
	}
}

// An admin call waits for its step on the admin lane, which runs on the
// lanes' connections: it holds none of the API's meanwhile, so admin steps
// slow up to the step deadline never starve the task API.
func TestAnAdminCallWaitingForItsStepHoldsNoneOfTheAPIsConnections(t *testing.T) {
	t.Parallel()
	h := holdFirstStep(t, func(r *lanes.Resume) bool { return r.Admin() })
	b := setupAdmin(t, h.hooks, func(c *app.Config) { c.API.MaxDBConns = 1 })
	b.startShop(t, "o-1")
	cancelled := make(chan int, 1)
	go func() {
		status, _ := b.do(t, http.MethodPost, "/instances/o-1/cancel", nil)
		cancelled <- status
	}()
	<-h.holding
	// The API's one connection is free: a fetch is served, not 503 BUSY.
	b.fetch(t, "w", "ship", 1, time.Minute, 0)
	h.release()
	if status := <-cancelled; status != http.StatusOK {
		t.Fatalf("the held cancel answered %d", status)
	}
}
