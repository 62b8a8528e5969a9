package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

// The gateway's roles, on /v2: no token or a wrong one is 401, the task
// token on an admin route 403, both problems; an unknown /v2 path is a 404
// problem naming it.
func TestCredentialsAreTheGatewaysAndEveryRefusalIsAProblem(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := wantProblem(t, b.call(t, "", "GET", "/v2/topology", nil), http.StatusUnauthorized, fault.APIUnauthorized)
	if p["title"] != "UNAUTHORIZED" || p["instance"] != "/v2/topology" {
		t.Errorf("401 problem %v", p)
	}
	wantProblem(t, b.call(t, "nope", "POST", "/v2/jobs/activation", map[string]any{}), http.StatusUnauthorized, fault.APIUnauthorized)
	p = wantProblem(t, b.call(t, taskToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionId": "x"}),
		http.StatusForbidden, fault.APIForbidden)
	if p["title"] != "FORBIDDEN" {
		t.Errorf("403 problem %v", p)
	}
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/deployments", deployment(t, "testdata/orders.bpmn")), http.StatusForbidden, fault.APIForbidden)
	// Retries are an operator's to change, as UpdateJobRetries.
	wantProblem(t, b.call(t, taskToken, "PATCH", "/v2/jobs/1", map[string]any{"changeset": map[string]any{"retries": 3}}),
		http.StatusForbidden, fault.APIForbidden)
	for _, token := range []string{taskToken, adminToken} {
		if a := b.call(t, token, "GET", "/v2/topology", nil); a.status != http.StatusOK {
			t.Errorf("topology with %s: %d %s", token, a.status, a.body)
		}
	}
	p = wantProblem(t, b.call(t, adminToken, "GET", "/v2/no-such-thing", nil), http.StatusNotFound, fault.AdminNotFound)
	if !strings.Contains(p["detail"].(string), "/v2/no-such-thing") {
		t.Errorf("the 404 does not name the path: %v", p)
	}
}

// A job's round trip over /v2: a long poll that waits is answered by the
// job a step creates (the push job path), its completion ends the
// instance; the codes of what goes wrong.
func TestJobsRoundTripAndTheirRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	d := b.call(t, adminToken, "POST", "/v2/deployments", deployment(t, "testdata/orders.bpmn"))
	if d.status != http.StatusOK || len(d.json(t)["deployments"].([]any)) != 2 {
		t.Fatalf("deploy: %d %s", d.status, d.body)
	}
	waiting := make(chan string, 1)
	b.w.REST().OnWaiting(func(typ string) {
		select {
		case waiting <- typ:
		default: // it waits again: the first signal is what counts
		}
	})
	polled := make(chan answer, 1)
	go func() {
		polled <- b.call(t, taskToken, "POST", "/v2/jobs/activation", map[string]any{"type": "rest-charge", "worker": "w1",
			"timeout": 60000, "maxJobsToActivate": 5, "requestTimeout": 30000})
	}()
	if typ := <-waiting; typ != "rest-charge" {
		t.Fatalf("waiting for %q", typ)
	}
	created := b.call(t, adminToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionId": "rest_charge",
		"variables": map[string]any{"orderId": "o-1"}})
	if created.status != http.StatusOK {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	instanceKey := created.json(t)["processInstanceKey"].(string)
	a := <-polled
	jobs := a.json(t)["jobs"].([]any)
	if a.status != http.StatusOK || len(jobs) != 1 {
		t.Fatalf("the long poll answered %d %s", a.status, a.body)
	}
	job := jobs[0].(map[string]any)
	if job["processInstanceKey"] != instanceKey || job["customHeaders"].(map[string]any)["kind"] != "test" ||
		job["variables"].(map[string]any)["orderId"] != "o-1" {
		t.Errorf("job %v", job)
	}
	key := job["jobKey"].(string)
	// Another worker's outcome, a malformed key, an unknown job.
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/jobs/abc/completion", map[string]any{}), http.StatusBadRequest, fault.APIInvalid)
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/jobs/99999999/completion", map[string]any{}), http.StatusNotFound, fault.TaskNotFound)
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/jobs/"+key+"/error", map[string]any{}), http.StatusBadRequest, fault.APIInvalid)
	if a := b.call(t, taskToken, "PATCH", "/v2/jobs/"+key, map[string]any{"changeset": map[string]any{"timeout": 120000}}); a.status != http.StatusNoContent {
		t.Errorf("timeout update: %d %s", a.status, a.body)
	}
	if a := b.call(t, taskToken, "POST", "/v2/jobs/"+key+"/completion", map[string]any{"variables": map[string]any{"paid": true}}); a.status != http.StatusNoContent {
		t.Fatalf("complete: %d %s", a.status, a.body)
	}
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/jobs/"+key+"/completion", map[string]any{}), http.StatusNotFound, fault.TaskNotFound)
	b.eventually(t, "the instance completes", func() bool {
		in := b.call(t, adminToken, "GET", "/v2/process-instances/"+instanceKey, nil).json(t)
		return in["state"] == "COMPLETED" && in["endDate"] != nil
	})
}

// What a caller gets wrong answers its code; a limit answers 503
// RESOURCE_EXHAUSTED naming it.
func TestRefusalsAnswerTheirCodes(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { c.Gateway.MaxJobs = 10 })
	p := wantProblem(t, b.call(t, taskToken, "POST", "/v2/jobs/activation", map[string]any{"type": "t", "timeout": 1000,
		"maxJobsToActivate": 11, "requestTimeout": -1}), http.StatusServiceUnavailable, fault.APIBusy)
	if p["title"] != "RESOURCE_EXHAUSTED" || !strings.Contains(p["detail"].(string), "SUTRA_GATEWAY_MAX_JOBS") {
		t.Errorf("503 problem %v", p)
	}
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/jobs/activation", map[string]any{"type": "t", "timeout": 0,
		"maxJobsToActivate": 1}), http.StatusBadRequest, fault.APIInvalid)
	wantProblem(t, b.call(t, adminToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionId": "nope"}),
		http.StatusNotFound, fault.UnknownDefinition)
	wantProblem(t, b.call(t, adminToken, "POST", "/v2/process-instances/123/cancellation", nil), http.StatusNotFound, fault.NotFound)
	wantProblem(t, b.call(t, adminToken, "POST", "/v2/deployments", deployment(t, "testdata/bad.bpmn")), http.StatusBadRequest, fault.BPMNInvalid)
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/messages/publication", map[string]any{"correlationKey": "k"}),
		http.StatusBadRequest, fault.APIInvalid)
	wantProblem(t, b.call(t, adminToken, "POST", "/v2/incidents/77/resolution", nil), http.StatusNotFound, fault.NotFound)
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/user-tasks/search", map[string]any{"page": map[string]any{"limit": 5000}}),
		http.StatusBadRequest, fault.APIInvalid)
	// An empty search is a page of nothing.
	a := b.call(t, adminToken, "POST", "/v2/incidents/search", map[string]any{})
	if a.status != http.StatusOK || len(a.json(t)["items"].([]any)) != 0 {
		t.Errorf("empty incident search: %d %s", a.status, a.body)
	}
}

// eventually waits, up to a deadline, for cond: what a relay's consumer
// applies after the call answered.
func (b *bundle) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The admin calls: a decision's evaluation, an instance's variables set
// and searched, a signal's broadcast, a definition's file, an instance
// search.
func TestAdminCallsAnswerCamundasShapes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	d := b.call(t, adminToken, "POST", "/v2/deployments", deployment(t, "testdata/orders.bpmn", "testdata/discount.dmn"))
	if d.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", d.status, d.body)
	}
	var definitionKey string
	for _, dep := range d.json(t)["deployments"].([]any) {
		if p, ok := dep.(map[string]any)["processDefinition"].(map[string]any); ok && p["processDefinitionId"] == "rest_review" {
			definitionKey = p["processDefinitionKey"].(string)
		}
	}
	ev := b.call(t, adminToken, "POST", "/v2/decision-definitions/evaluation", map[string]any{"decisionDefinitionId": "rest_discount",
		"variables": map[string]any{"total": 150}}).json(t)
	if ev["output"] != "10" || ev["failureMessage"] != "" || len(ev["evaluatedDecisions"].([]any)) != 1 {
		t.Errorf("evaluation %v", ev)
	}
	if x := b.call(t, adminToken, "GET", "/v2/process-definitions/"+definitionKey+"/xml", nil); x.status != http.StatusOK ||
		!strings.Contains(string(x.body), `id="rest_review"`) {
		t.Errorf("definition file: %d %.80s", x.status, x.body)
	}
	created := b.call(t, adminToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionKey": definitionKey,
		"variables": map[string]any{"orderId": "o-7"}}).json(t)
	key := created["processInstanceKey"].(string)
	if a := b.call(t, adminToken, "PUT", "/v2/element-instances/"+key+"/variables", map[string]any{"variables": map[string]any{"note": "rush"}}); a.status != http.StatusNoContent {
		t.Fatalf("set variables: %d %s", a.status, a.body)
	}
	vars := b.call(t, adminToken, "POST", "/v2/variables/search", map[string]any{"filter": map[string]any{"processInstanceKey": key}}).json(t)
	items := vars["items"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["name"] != "note" || items[0].(map[string]any)["value"] != `"rush"` {
		t.Errorf("variables %v", vars)
	}
	if a := b.call(t, adminToken, "POST", "/v2/signals/broadcast", map[string]any{"signalName": "nobody-waits"}); a.status != http.StatusOK ||
		a.json(t)["signalKey"] == nil {
		t.Errorf("broadcast: %d %s", a.status, a.body)
	}
	found := b.call(t, adminToken, "POST", "/v2/process-instances/search", map[string]any{"filter": map[string]any{
		"processDefinitionId": map[string]any{"$eq": "rest_review"}, "state": "ACTIVE"}, "page": map[string]any{"limit": 1}}).json(t)
	list := found["items"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["processInstanceKey"] != key || list[0].(map[string]any)["processDefinitionName"] != "Review" {
		t.Errorf("search %v", found)
	}
	next := found["page"].(map[string]any)["endCursor"]
	more := b.call(t, adminToken, "POST", "/v2/process-instances/search", map[string]any{"page": map[string]any{"after": next}}).json(t)
	if len(more["items"].([]any)) != 0 {
		t.Errorf("the page after the last: %v", more)
	}
}

// A process-instance search sorted by startDate pages in that order, its
// cursors carrying the time; a sort or a filter field a search does not
// serve is refused, never ignored.
func TestASearchSortedByStartDatePagesInThatOrderAndWhatIsNotServedIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if d := b.call(t, adminToken, "POST", "/v2/deployments", deployment(t, "testdata/orders.bpmn")); d.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", d.status, d.body)
	}
	var keys []string
	for i := range 3 {
		c := b.call(t, adminToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionId": "rest_charge",
			"variables": map[string]any{"orderId": fmt.Sprintf("o-%d", i)}})
		if c.status != http.StatusOK {
			t.Fatalf("create: %d %s", c.status, c.body)
		}
		keys = append(keys, c.json(t)["processInstanceKey"].(string))
	}
	var got []string
	var after any
	for range 3 {
		page := map[string]any{"limit": 1}
		if after != nil {
			page["after"] = after
		}
		r := b.call(t, adminToken, "POST", "/v2/process-instances/search", map[string]any{
			"sort": []any{map[string]any{"field": "startDate", "order": "DESC"}}, "page": page})
		if r.status != http.StatusOK {
			t.Fatalf("search: %d %s", r.status, r.body)
		}
		body := r.json(t)
		for _, it := range body["items"].([]any) {
			got = append(got, it.(map[string]any)["processInstanceKey"].(string))
		}
		after = body["page"].(map[string]any)["endCursor"]
	}
	if want := []string{keys[2], keys[1], keys[0]}; !slices.Equal(got, want) {
		t.Errorf("newest first, a page at a time: %v, want %v", got, want)
	}
	if r := b.call(t, adminToken, "POST", "/v2/user-tasks/search", map[string]any{"filter": map[string]any{"elementId": "review"}}); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "filter.elementId") {
		t.Errorf("a filter field not served: %d %s", r.status, r.body)
	}
	for path, sort := range map[string]string{"/v2/process-instances/search": "processDefinitionId", "/v2/incidents/search": "creationTime"} {
		r := b.call(t, adminToken, "POST", path, map[string]any{"sort": []any{map[string]any{"field": sort}}})
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "sort") {
			t.Errorf("%s sorted by %s: %d %s", path, sort, r.status, r.body)
		}
	}
}

// A start with awaitCompletion answers once the instance completed, with
// the variables asked for; one that does not complete in time is 504.
func TestCreateAwaitingCompletionAnswersAtTheEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if d := b.call(t, adminToken, "POST", "/v2/deployments", deployment(t, "testdata/orders.bpmn")); d.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", d.status, d.body)
	}
	done := make(chan answer, 1)
	go func() {
		done <- b.call(t, adminToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionId": "rest_charge",
			"variables": map[string]any{"orderId": "o-1"}, "awaitCompletion": true, "fetchVariables": []string{"paid"}, "requestTimeout": "30000"})
	}()
	a := b.call(t, taskToken, "POST", "/v2/jobs/activation", map[string]any{"type": "rest-charge", "timeout": 60000,
		"maxJobsToActivate": 1, "requestTimeout": 30000})
	jobs := a.json(t)["jobs"].([]any)
	if len(jobs) != 1 {
		r := <-done
		t.Fatalf("activation: %s; the start answered %d %s", a.body, r.status, r.body)
	}
	key := jobs[0].(map[string]any)["jobKey"].(string)
	if c := b.call(t, taskToken, "POST", "/v2/jobs/"+key+"/completion", map[string]any{"variables": map[string]any{"paid": true}}); c.status != http.StatusNoContent {
		t.Fatalf("complete: %d %s", c.status, c.body)
	}
	r := <-done
	vars, _ := r.json(t)["variables"].(map[string]any)
	if r.status != http.StatusOK || len(vars) != 1 || vars["paid"] != true {
		t.Errorf("the awaited start answered %d %s", r.status, r.body)
	}
	late := b.call(t, adminToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionId": "rest_review",
		"variables": map[string]any{"orderId": "o-2"}, "awaitCompletion": true, "requestTimeout": 200})
	wantProblem(t, late, http.StatusGatewayTimeout, fault.Unavailable)
}

// A correlation waiting for its step's commit holds none of the API's
// database connections: with one, another call is served meanwhile, and
// the correlation answers once the held step commits.
func TestACorrelationWaitingForItsCommitHoldsNoneOfTheAPIsConnections(t *testing.T) {
	t.Parallel()
	holding, hold := make(chan struct{}), make(chan struct{})
	var armed, once atomic.Bool
	// Armed once the instance waits: the next relay's step is the
	// correlation's.
	hooks := &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		if armed.Load() && r.InboxID() != "" && once.CompareAndSwap(false, true) {
			close(holding)
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
	}}
	b := setupHooked(t, func(c *app.Config) { c.API.MaxDBConns = 1 }, hooks)
	var released sync.Once
	release := func() { released.Do(func() { close(hold) }) }
	t.Cleanup(release)
	if d := b.call(t, adminToken, "POST", "/v2/deployments", deployment(t, "testdata/messages.bpmn")); d.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", d.status, d.body)
	}
	key := b.call(t, adminToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionId": "rest_wait",
		"variables": map[string]any{"orderId": "o-1"}}).json(t)["processInstanceKey"].(string)
	b.eventually(t, "the instance waits", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE message_name = 'rest-ready'") == 1
	})
	armed.Store(true)
	done := make(chan answer, 1)
	go func() {
		done <- b.call(t, taskToken, "POST", "/v2/messages/correlation", map[string]any{"name": "rest-ready", "correlationKey": "o-1"})
	}()
	<-holding
	if a := b.call(t, adminToken, "GET", "/v2/process-instances/"+key, nil); a.status != http.StatusOK {
		t.Errorf("a call beside the waiting correlation: %d %s", a.status, a.body)
	}
	release()
	if a := <-done; a.status != http.StatusOK || a.json(t)["processInstanceKey"] != key {
		t.Errorf("the correlation: %d %s", a.status, a.body)
	}
}

// A correlation answers once its step committed, with the instance it went
// to: a waiting instance has advanced (ended) by the answer, a message
// start event's instance exists; nothing waiting is 404 and buffers
// nothing.
func TestCorrelationAnswersTheInstanceItCommittedTo(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if d := b.call(t, adminToken, "POST", "/v2/deployments", deployment(t, "testdata/messages.bpmn")); d.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", d.status, d.body)
	}
	ready := map[string]any{"name": "rest-ready", "correlationKey": "o-1", "variables": map[string]any{"ready": true}}
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/messages/correlation", ready), http.StatusNotFound, fault.RelayUncorrelated)
	if n := b.env.Int(t, "SELECT count(*) FROM buffered_messages"); n != 0 {
		t.Errorf("a refused correlation left %d buffered messages", n)
	}

	created := b.call(t, adminToken, "POST", "/v2/process-instances", map[string]any{"processDefinitionId": "rest_wait",
		"variables": map[string]any{"orderId": "o-1"}}).json(t)
	key := created["processInstanceKey"].(string)
	b.eventually(t, "the instance waits", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE message_name = 'rest-ready'") == 1
	})
	a := b.call(t, taskToken, "POST", "/v2/messages/correlation", ready)
	if a.status != http.StatusOK {
		t.Fatalf("correlation: %d %s", a.status, a.body)
	}
	got := a.json(t)
	if got["processInstanceKey"] != key || got["messageKey"] == nil || got["tenantId"] != "<default>" {
		t.Errorf("correlation answered %v, want instance %s", got, key)
	}
	// Read at once: the answer came after the commit.
	in := b.call(t, adminToken, "GET", "/v2/process-instances/"+key, nil).json(t)
	if in["state"] != "COMPLETED" {
		t.Errorf("the correlated instance is %v after the answer, want COMPLETED", in["state"])
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE zeebe_key = "+key+" AND variables->>'ready' = 'true'"); n != 1 {
		t.Error("the message's variables were not applied")
	}
	// It waits no more: a second correlation has nothing to go to.
	wantProblem(t, b.call(t, taskToken, "POST", "/v2/messages/correlation", ready), http.StatusNotFound, fault.RelayUncorrelated)

	a = b.call(t, taskToken, "POST", "/v2/messages/correlation", map[string]any{"name": "rest-order", "correlationKey": "c-1"})
	if a.status != http.StatusOK {
		t.Fatalf("correlation to a start event: %d %s", a.status, a.body)
	}
	started := a.json(t)["processInstanceKey"].(string)
	in = b.call(t, adminToken, "GET", "/v2/process-instances/"+started, nil).json(t)
	if in["processDefinitionId"] != "rest_inbound" || in["state"] != "COMPLETED" {
		t.Errorf("the started instance: %v", in)
	}
}
