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
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
)

// adminBundle is a worker with both tokens, the admin API on, and its
// client.
type adminBundle struct {
	*bundle
	v1 string
}

// token opens the task API (SUTRA_API_TOKEN), adminToken the admin API
// (SUTRA_ADMIN_TOKEN); each is refused where the other belongs.
const (
	token      = "t0ken"
	adminToken = "adm1n"
)

// tokenFor is the token a call of path presents: the admin token under /v1.
func tokenFor(path string) string {
	if strings.Contains(path, "/v1/") {
		return adminToken
	}
	return token
}

func setupAdmin(t *testing.T, hooks *lanes.Hooks, tweak func(*app.Config)) *adminBundle {
	t.Helper()
	return setupAdminWith(t, app.Options{Hooks: hooks}, tweak)
}

// setupAdminWith is setupAdmin with the worker's options (a clock); their
// logger and registry are the test's.
func setupAdminWith(t *testing.T, opt app.Options, tweak func(*app.Config)) *adminBundle {
	t.Helper()
	env := testkit.New(t)
	env.Deploy(t, "testdata/tasks.bpmn")
	env.Deploy(t, "testdata/shop-v1.bpmn")
	b := &bundle{token: token, env: env, cfg: apptest.Config(env), pub: env.Publisher(t), reg: prometheus.NewRegistry()}
	b.cfg.API.Token, b.cfg.AdminToken = token, adminToken
	if tweak != nil {
		tweak(&b.cfg)
	}
	opt.Logger, opt.Registry = testkit.Logger(t), b.reg
	w, err := app.Start(testkit.Ctx(t), b.cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	w.Consumer().TestSignals.Init()
	w.Outbox().TestSignals.Init()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	b.w, b.base = w, "http://"+w.APIAddr()+"/engine-rest"
	return &adminBundle{bundle: b, v1: "http://" + w.APIAddr() + "/v1"}
}

// do calls the admin API with the admin token; body is JSON unless []byte.
func (b *adminBundle) do(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, ok := body.([]byte)
		if !ok {
			raw, _ = json.Marshal(body)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.v1+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("X-Sutra-Caller", "test")
	switch {
	case method == http.MethodGet:
	case path == "/definitions":
		req.Header.Set("Content-Type", "application/xml")
	default: // with a body or without: every state-changing call is JSON
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s %s: %d answered as %q: %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	return resp.StatusCode, out
}

// startShop starts shop v1 instance id waiting for its payment.
func (b *adminBundle) startShop(t *testing.T, id string) {
	t.Helper()
	b.pub.Publish(testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": "shop", "instance_id": id,
		"variables": map[string]any{"orderId": id, "topic": "ship"}}})
	b.applied(t, "start-"+id) // its step subscribed to the payment
}

// snapshot is everything a refused admin call must leave as it was.
func (b *adminBundle) snapshot(t *testing.T, id string) string {
	t.Helper()
	var s string
	err := b.env.DB.QueryRow(testkit.Ctx(t), `SELECT row_to_json(i)::text || (SELECT coalesce(json_agg(s ORDER BY s.element_id)::text, '')
		FROM subscriptions s WHERE s.instance_id = i.id) || (SELECT coalesce(json_agg(x ORDER BY x.id)::text, '') FROM timers x WHERE x.instance_id = i.id)
		|| (SELECT coalesce(json_agg(k ORDER BY k.id)::text, '') FROM tasks k WHERE k.instance_id = i.id)
		FROM (SELECT id, definition_key, definition_version, status, variables, tokens, version FROM instances WHERE id = $1) i`, id).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAMigrateWhileALaneHoldsTheClaimIs409AndChangesNothing(t *testing.T) {
	t.Parallel()
	h := holdFirstStep(t, func(r *lanes.Resume) bool { return r.InboxID() == "paid-o-1" })
	b := setupAdmin(t, h.hooks, nil)
	b.startShop(t, "o-1")
	b.env.Deploy(t, "testdata/shop-v2.bpmn") // after the start: o-1 runs on v1
	before := b.snapshot(t, "o-1")
	b.pub.Publish(testkit.Relay{MessageID: "paid-o-1", Body: map[string]any{"instance_id": "o-1", "message": "payment-received"}})
	<-h.holding
	status, p := b.do(t, "POST", "/instances/o-1/migrate", map[string]any{"target_version": 2, "mapping": map[string]string{"Event_Paid": "Event_PaymentReceived"}})
	if status != http.StatusConflict || p["code"] != "SUTRA.ADMIN.MIGRATE.CLAIM_HELD" || p["instance_id"] != "o-1" {
		t.Fatalf("migrate while held: %d %v", status, p)
	}
	if after := b.snapshot(t, "o-1"); after != before {
		t.Fatalf("a refused migrate changed the instance:\nbefore %s\nafter  %s", before, after)
	}
	h.release()
	b.applied(t, "paid-o-1")
	if v := b.env.Int(t, "SELECT version FROM instances WHERE id = 'o-1'"); v != 2 {
		t.Errorf("version %d after the held step, want 2", v)
	}
	b.env.AssertNoOverlap(t, false)
}

func TestARelayThatArrivesWhileTheAdminHoldsTheClaimBouncesAndAppliesAfterOnTheNewVersion(t *testing.T) {
	t.Parallel()
	h := holdFirstStep(t, func(r *lanes.Resume) bool { return r.Admin() })
	b := setupAdmin(t, h.hooks, nil)
	b.startShop(t, "o-1")
	b.env.Deploy(t, "testdata/shop-v2.bpmn") // after the start: o-1 runs on v1
	migrated := make(chan int, 1)
	go func() {
		status, _ := b.do(t, "POST", "/instances/o-1/migrate", map[string]any{"target_version": 2, "mapping": map[string]string{"Event_Paid": "Event_PaymentReceived"}})
		migrated <- status
	}()
	<-h.holding
	b.pub.Publish(testkit.Relay{MessageID: "paid-o-1", Body: map[string]any{"message": "payment-received", "correlation_key": "o-1"}})
	b.requeued(t, "paid-o-1", 1)
	if n := bounces(t, b, metrics.PathRelay); n < 1 {
		t.Errorf("the relay was requeued while the admin held the claim, counted as %v bounces", n)
	}
	h.release()
	if status := <-migrated; status != http.StatusOK {
		t.Fatalf("migrate: %d", status)
	}
	b.applied(t, "paid-o-1")
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'o-1'"); n != 1 {
		t.Errorf("%d tasks after the payment, want 1", n)
	}
	if v := b.env.Int(t, "SELECT definition_version FROM instances WHERE id = 'o-1'"); v != 2 {
		t.Errorf("definition version %d, want 2", v)
	}
	owners := b.env.Committers(t, "o-1")
	if len(owners) != 3 || !strings.HasSuffix(owners[1], "/admin") || !strings.Contains(owners[2], "/lane/") {
		t.Errorf("committers = %v: want the start, the admin's migration, then the payment", owners)
	}
	b.env.AssertNoOverlap(t, false)
}

// heldStep holds the first step a predicate picks open before its commit,
// claim held, until release (or the test's end).
type heldStep struct {
	hooks   *lanes.Hooks
	holding chan struct{} // closed once the step is held
	release func()
}

func holdFirstStep(t *testing.T, pick func(*lanes.Resume) bool) *heldStep {
	hold := make(chan struct{})
	h := &heldStep{holding: make(chan struct{})}
	var once atomic.Bool
	h.hooks = &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		if pick(r) && once.CompareAndSwap(false, true) {
			close(h.holding)
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
	}}
	var released sync.Once
	h.release = func() { released.Do(func() { close(hold) }) }
	t.Cleanup(h.release)
	return h
}

// bounces reads sutra_claim_bounces_total{path} of b's worker.
func bounces(t *testing.T, b *adminBundle, path string) float64 {
	t.Helper()
	return testkit.Counter(t, b.reg, "sutra_claim_bounces_total", "path", path)
}

func TestAMigrationWhoseTokensCannotLandIs422AndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.startShop(t, "o-1")
	b.env.Deploy(t, "testdata/shop-v2.bpmn") // after the start: o-1 runs on v1
	before := b.snapshot(t, "o-1")
	for _, mapping := range []map[string]string{
		{"Event_Paid": "No_Such_Element"}, // to a missing element
		{"Event_Paid": "Task_Ship"},       // a message catch onto a service task
		{},                                // Event_Paid does not exist in v2
	} {
		status, p := b.do(t, "POST", "/instances/o-1/migrate", map[string]any{"target_version": 2, "mapping": mapping})
		if status != http.StatusUnprocessableEntity || p["code"] != fault.MigrateUnreachable || !strings.Contains(fmt.Sprint(p["detail"]), "Event_Paid") {
			t.Errorf("mapping %v: %d %v", mapping, status, p)
		}
	}
	if after := b.snapshot(t, "o-1"); after != before {
		t.Fatalf("a refused migration changed the instance")
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestCancelClosesEveryWait(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.start(t, "c-1", "cancel-me", map[string]any{"timeout": "PT1M"}) // a timer that cannot fire before the cancel
	status, p := b.do(t, "POST", "/instances/c-1/cancel", nil)
	if status != http.StatusOK || p["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", status, p)
	}
	for _, table := range []string{"subscriptions", "timers", "tasks"} {
		if n := b.env.Int(t, "SELECT count(*) FROM "+table+" WHERE instance_id = 'c-1'"); n != 0 {
			t.Errorf("%d %s left after cancel", n, table)
		}
	}
	if got := b.fetch(t, "w", "cancel-me", 5, time.Minute, 0); len(got) != 0 {
		t.Errorf("a cancelled instance's task was fetched: %+v", got)
	}
	b.pub.Publish(testkit.Relay{MessageID: "late", Body: map[string]any{"instance_id": "c-1", "message": "anything"}})
	if dead := b.pub.DeadLetters(1, 15*time.Second); len(dead) != 1 || dead[0].Code != fault.NotWaiting {
		t.Errorf("a relay for a cancelled instance: %+v, want %s", dead, fault.NotWaiting)
	}
	if status, p := b.do(t, "POST", "/instances/c-1/cancel", nil); status != http.StatusConflict || p["code"] != fault.NotWaiting {
		t.Errorf("second cancel: %d %v", status, p)
	}
	if st := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'c-1' AND status = 'cancelled'"); st != 1 {
		t.Error("the instance is not cancelled")
	}
}

func TestIncidentRetryAfterFixingAVariableContinuesTheInstance(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.startShop(t, "o-1")
	b.pub.Publish(testkit.Relay{MessageID: "paid", Body: map[string]any{"instance_id": "o-1", "message": "payment-received"}})
	b.applied(t, "paid") // its step created the ship task
	task := b.fetch(t, "w", "ship", 1, time.Minute, 0)[0]
	// No amount: the gateway's condition fails, an incident stops the token.
	if status, _, body := b.call(t, "/external-task/"+task.ID+"/complete", map[string]any{"workerId": "w"}); status != 204 {
		t.Fatalf("complete: %d %s", status, body)
	}
	b.applied(t, "task:"+task.ID+":1") // the completion's relay: its step stopped in the incident
	_, list := b.do(t, "GET", "/incidents?open=true&instance_id=o-1", nil)
	incidents, _ := asList(list["incidents"])
	if len(incidents) != 1 || incidents[0]["code"] != fault.IncidentExpression {
		t.Fatalf("incident = %v", incidents[0])
	}
	id := fmt.Sprint(incidents[0]["id"])
	status, p := b.do(t, "POST", "/incidents/"+id+"/retry", map[string]any{"variables": map[string]any{"amount": 5}})
	if status != http.StatusOK || p["resolved"] != true {
		t.Fatalf("retry: %d %v", status, p)
	}
	if st := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND status = 'completed'"); st != 1 {
		t.Error("the retried instance did not complete")
	}
	if open := b.env.Int(t, "SELECT count(*) FROM incidents WHERE resolved_at IS NULL"); open != 0 {
		t.Errorf("%d incidents still open", open)
	}
}

func TestRetryingAFailedTaskGivesItsRetriesBack(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.start(t, "i-1", "flaky", nil)
	task := b.fetch(t, "w", "flaky", 1, time.Minute, 0)[0]
	if status, _, body := b.call(t, "/external-task/"+task.ID+"/failure", map[string]any{"workerId": "w", "retries": 0, "errorMessage": "down"}); status != 204 {
		t.Fatalf("failure: %d %s", status, body)
	}
	b.applied(t, "task:"+task.ID+":1") // the failure's relay: its step opened the incident
	_, list := b.do(t, "GET", "/incidents?open=true", nil)
	incidents, _ := asList(list["incidents"])
	if len(incidents) != 1 || incidents[0]["code"] != fault.IncidentTaskFailed {
		t.Fatalf("incident = %v", incidents[0])
	}
	if status, p := b.do(t, "POST", "/incidents/"+fmt.Sprint(incidents[0]["id"])+"/retry", nil); status != http.StatusOK {
		t.Fatalf("retry: %d %v", status, p)
	}
	again := b.fetch(t, "w", "flaky", 1, time.Minute, 0)
	if len(again) != 1 || again[0].Retries != 3 {
		t.Fatalf("after retry: %+v, want the task with its 3 retries back", again)
	}
}

func TestAdminRoutesRefuseBadCallsWithProblemsNever500(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, func(c *app.Config) { c.Tasks.MaxTasks = 10 })
	b.startShop(t, "o-1")
	routes := []struct{ method, path string }{
		{"POST", "/definitions"}, {"GET", "/definitions"}, {"GET", "/definitions/shop/versions/1"},
		{"POST", "/instances"}, {"GET", "/instances"}, {"GET", "/instances/o-1"}, {"POST", "/instances/o-1/cancel"},
		{"PATCH", "/instances/o-1/variables"}, {"POST", "/instances/o-1/migrate"}, {"POST", "/migrations"},
		{"GET", "/migrations/x"}, {"GET", "/incidents"}, {"POST", "/incidents/1/retry"}, {"POST", "/messages"},
		{"GET", "/user-tasks"}, {"GET", "/user-tasks/1"}, {"POST", "/user-tasks/1/assignment"}, {"POST", "/user-tasks/1/completion"},
		{"GET", "/openapi.yaml"}, {"GET", "/decisions"}, {"POST", "/decisions/d/evaluation"},
	}
	for _, r := range routes {
		req, _ := http.NewRequest(r.method, b.v1+r.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d", r.method, r.path, resp.StatusCode)
		}
	}
	huge := bytes.Repeat([]byte("x"), 5<<20)
	for _, tt := range []struct {
		method, path string
		body         any
		status       int
	}{
		{"PATCH", "/instances/o-1/variables", []byte("{"), 400},
		{"POST", "/instances/o-1/migrate", map[string]any{"target_version": 2, "colour": "red"}, 400},
		{"POST", "/instances", map[string]any{"definition": "shop", "variables": "not an object"}, 400},
		{"POST", "/definitions", huge, 413},
		{"POST", "/definitions", []byte("<not-bpmn/>"), 422},
		{"GET", "/instances/..%2F..%2Fetc%2Fpasswd", nil, 404},
		{"GET", "/instances?limit=100000", nil, 400},
		{"POST", "/instances/nope/cancel", nil, 404},
		{"POST", "/incidents/abc/retry", nil, 404},
		{"GET", "/user-tasks/-1", nil, 404},
		{"POST", "/messages", map[string]any{"message": "m", "correlation_key": "k", "instance_id": "i"}, 400},
	} {
		if status, p := b.do(t, tt.method, tt.path, tt.body); status != tt.status || p["code"] == nil {
			t.Errorf("%s %s: %d %v, want %d with a code", tt.method, tt.path, status, p, tt.status)
		}
	}
}

func TestAdminRoutesAreOffWithoutAnAdminTokenUnlessExplicitlyInsecure(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		tweak    func(*app.Config)
		bearer   string
		status   int
		wantCode string
	}{
		{"no token", func(*app.Config) {}, "", http.StatusForbidden, fault.AdminDisabled},
		{"the task token alone", func(c *app.Config) { c.API.Token = token }, token, http.StatusForbidden, fault.AdminDisabled},
		{"insecure", func(c *app.Config) { c.AdminInsecure = true }, "", http.StatusOK, ""},
	} {
		env := testkit.New(t)
		cfg := apptest.Config(env)
		tt.tweak(&cfg)
		w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+w.APIAddr()+"/v1/definitions", nil)
		if tt.bearer != "" {
			req.Header.Set("Authorization", "Bearer "+tt.bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != tt.status || (tt.wantCode != "" && p["code"] != tt.wantCode) {
			t.Errorf("%s: %d %v, want %d %s", tt.name, resp.StatusCode, p, tt.status, tt.wantCode)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = w.Stop(ctx)
		cancel()
	}
}

func asList(v any) ([]map[string]any, bool) {
	l, ok := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, x := range l {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, ok
}
