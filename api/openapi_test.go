package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/spectest"
	"github.com/sutra-run/worker/internal/testkit"
)

func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	spec, err := spectest.Load()
	if err != nil {
		t.Fatal(err)
	}
	return spec.Doc, spec.Router
}

func TestEveryRouteIsInTheSpecAndEveryOperationOfTheSpecIsServed(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	var spec []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			spec = append(spec, method+" "+path)
		}
	}
	b := setupAdmin(t, nil, nil)
	served := ownRoutes(b)
	sort.Strings(spec)
	sort.Strings(served)
	for _, r := range served {
		if !slices.Contains(spec, r) {
			t.Errorf("route %s is served but not in docs/openapi.yaml", r)
		}
	}
	for _, r := range spec {
		if !slices.Contains(served, r) {
			t.Errorf("operation %s is in docs/openapi.yaml but not served", r)
		}
	}
}

// ownRoutes are the routes docs/openapi.yaml describes: all but /v2's,
// which is Camunda's REST API (api/rest), held to Camunda's own clients
// and spec by its tests.
func ownRoutes(b *adminBundle) []string {
	return slices.DeleteFunc(b.w.API().Routes(), func(r string) bool { return strings.Contains(r, " /v2/") })
}

// validating checks every answer of the worker against the spec.
type validating struct {
	t      *testing.T
	router routers.Router
	b      *adminBundle
	seen   map[string]bool
}

func (v *validating) call(method, path string, body any, contentType string) (int, []byte) {
	v.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		raw, _ = json.Marshal(b)
	}
	url := "http://" + v.b.w.APIAddr() + path
	req, err := http.NewRequest(method, url, bytes.NewReader(raw))
	if err != nil {
		v.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenFor(path))
	if method != http.MethodGet {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)

	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.t.Errorf("%s %s: not in the spec: %v", method, path, err)
		return resp.StatusCode, out
	}
	v.seen[method+" "+route.Path] = true
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(out)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if err != nil {
		v.t.Errorf("%s %s answered %d %s, which the spec refuses: %v", method, path, resp.StatusCode, out, err)
	}
	return resp.StatusCode, out
}

func TestRealAnswersMatchTheSpec(t *testing.T) {
	t.Parallel()
	_, router := loadSpec(t)
	b := setupAdmin(t, nil, nil)
	v := &validating{t: t, router: router, b: b, seen: map[string]bool{}}
	xml, err := os.ReadFile("testdata/shop-v2.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	const jsonCT = "application/json"
	v.call("GET", "/v1/openapi.yaml", nil, "")
	v.call("POST", "/v1/definitions", xml, "application/xml")
	v.call("POST", "/v1/definitions", xml, "application/xml") // unchanged: 200
	v.call("POST", "/v1/definitions", []byte("<nope/>"), "application/xml")
	drg, err := os.ReadFile("../dmn/testdata/dinner.dmn")
	if err != nil {
		t.Fatal(err)
	}
	v.call("POST", "/v1/definitions", drg, "application/xml")
	v.call("GET", "/v1/decisions?limit=1", nil, "")
	v.call("GET", "/v1/decisions?after=nope", nil, "")
	v.call("POST", "/v1/decisions/beverages/evaluation", map[string]any{"variables": map[string]any{"season": "Fall", "guestCount": 3}}, jsonCT)
	v.call("POST", "/v1/decisions/beverages/evaluation", map[string]any{"version": 7}, jsonCT)
	v.call("POST", "/v1/decisions/dish/evaluation", nil, jsonCT) // no season: no rule of the UNIQUE table, output null
	v.call("GET", "/v1/decisions/dish/versions/1", nil, "")
	v.call("GET", "/v1/decisions/dish/versions/9", nil, "")
	v.call("GET", "/v1/definitions", nil, "")
	v.call("GET", "/v1/definitions/shop/versions/1", nil, "")
	v.call("GET", "/v1/definitions/shop/versions/99", nil, "")
	v.call("GET", "/v1/whoami", nil, "")
	v.call("POST", "/v1/instances", map[string]any{"definition": "shop", "version": 1, "instance_id": "o-1",
		"variables": map[string]any{"orderId": "o-1", "topic": "ship"}}, jsonCT)
	v.call("POST", "/v1/instances", map[string]any{"definition": "shop", "instance_id": "o-1"}, jsonCT) // exists: 409
	v.call("POST", "/v1/instances", map[string]any{"definition": "nope"}, jsonCT)
	v.call("GET", "/v1/instances/o-1", nil, "")
	v.call("GET", "/v1/instances/nope", nil, "")
	v.call("GET", "/v1/instances?definition=shop&limit=1", nil, "")
	v.call("GET", "/v1/instances?definition=shop&version=1&variable=orderId&value=%22o-1%22&created_after=2020-01-01T00:00:00Z", nil, "")
	v.call("GET", "/v1/instances?value=1", nil, "") // no variable: 400
	v.call("GET", "/v1/definitions/shop/versions/1/statistics", nil, "")
	v.call("GET", "/v1/definitions/shop/versions/99/statistics", nil, "")
	v.call("PATCH", "/v1/instances/o-1/variables", map[string]any{"note": "x"}, jsonCT)
	v.call("GET", "/v1/instances/o-1/history?limit=1", nil, "")
	v.call("POST", "/v1/instances/o-1/modification/preflight", map[string]any{"activate": []string{"Nope"}}, jsonCT)
	v.call("POST", "/v1/instances/o-1/modification/preflight", map[string]any{"activate": []string{"End_Small"}}, jsonCT)
	v.call("POST", "/v1/instances/o-1/modification", map[string]any{"activate": []string{"Nope"}}, jsonCT)
	v.call("POST", "/v1/instances/o-1/modification", map[string]any{"activate": []string{"End_Small"}}, jsonCT) // a token that ends at once
	v.call("GET", "/v1/instances/nope/history", nil, "")
	v.call("POST", "/v1/instances/o-1/migrate/preflight", map[string]any{"target_version": 2, "mapping": map[string]string{"Event_Paid": "Nope"}}, jsonCT)
	v.call("POST", "/v1/instances/o-1/migrate/preflight", map[string]any{"target_version": 2, "mapping": map[string]string{"Event_Paid": "Event_PaymentReceived"}}, jsonCT)
	v.call("POST", "/v1/instances/o-1/migrate", map[string]any{"target_version": 2, "mapping": map[string]string{"Event_Paid": "Nope"}}, jsonCT)
	v.call("POST", "/v1/instances/o-1/migrate", map[string]any{"target_version": 2, "mapping": map[string]string{"Event_Paid": "Event_PaymentReceived"}}, jsonCT)
	_, out := v.call("POST", "/v1/migrations", map[string]any{"definition": "shop", "from_version": 1, "to_version": 2}, jsonCT)
	var mig struct{ ID string }
	_ = json.Unmarshal(out, &mig)
	v.call("GET", "/v1/migrations/"+mig.ID, nil, "")
	v.call("GET", "/v1/migrations/nope", nil, "")
	_, out = v.call("POST", "/v1/batches", map[string]any{"operation": "retry", "filter": map[string]any{"definition": "shop"}}, jsonCT)
	var batch struct{ ID string }
	_ = json.Unmarshal(out, &batch)
	v.call("GET", "/v1/batches/"+batch.ID, nil, "")
	v.call("GET", "/v1/batches/nope", nil, "")
	v.call("POST", "/v1/batches", map[string]any{"operation": "cancel"}, jsonCT) // neither filter nor ids: 400
	v.call("GET", "/v1/incidents?open=true", nil, "")
	v.call("POST", "/v1/incidents/123/retry", map[string]any{}, jsonCT)
	v.call("POST", "/v1/messages", map[string]any{"message": "payment-received", "correlation_key": "o-1"}, jsonCT)
	v.call("POST", "/v1/signals", map[string]any{"name": "alarm", "variables": map[string]any{"level": 2}}, jsonCT)
	v.call("POST", "/v1/signals", map[string]any{"variables": map[string]any{}}, jsonCT) // no name: 400
	v.call("GET", "/v1/user-tasks?state=created", nil, "")
	v.call("GET", "/v1/user-tasks/1", nil, "")
	v.call("GET", "/v1/user-tasks/1/form", nil, "")
	v.call("POST", "/v1/user-tasks/1/assignment", map[string]any{"assignee": "ada"}, jsonCT)
	v.call("PATCH", "/v1/user-tasks/1", map[string]any{"priority": 70, "due_date": ""}, jsonCT)
	v.call("PATCH", "/v1/user-tasks/1", map[string]any{"priority": 101}, jsonCT) // 400
	v.call("POST", "/v1/user-tasks/1/completion", map[string]any{}, jsonCT)
	v.call("POST", "/v1/instances/o-1/cancel", nil, jsonCT)
	v.call("POST", "/v1/instances/o-1/cancel", nil, jsonCT) // not active: 409
	for _, id := range []string{"o-1/9/notify/t1", "o-1/9/notify/t2"} {
		if _, err := b.env.DB.Exec(testkit.Ctx(t), `INSERT INTO outbox_parked (id, seq, instance_id, element_id, target, message_name,
			correlation_key, variables, routing_key, attempts, created_at, code, reason)
			VALUES ($1, 0, 'o-1', 'notify', 'outbox', 'notice', 'o-1', '{}', '', 10, now(), $2, 'NO_ROUTE')`, id, fault.OutboxUnroutable); err != nil {
			t.Fatal(err)
		}
	}
	v.call("GET", "/v1/outbox/parked?instance_id=o-1&limit=1", nil, "")
	v.call("POST", "/v1/outbox/parked/o-1%2F9%2Fnotify%2Ft1/retry", nil, jsonCT)
	v.call("POST", "/v1/outbox/parked/o-1%2F9%2Fnotify%2Ft2/discard", map[string]any{}, jsonCT)
	v.call("POST", "/v1/outbox/parked/nope/discard", nil, jsonCT) // 404

	// The task API.
	b.start(t, "t-1", "spec", nil)
	_, out = v.call("POST", "/engine-rest/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []map[string]any{{"topicName": "spec", "lockDuration": 60000}}}, jsonCT)
	var tasks []struct{ ID string }
	_ = json.Unmarshal(out, &tasks)
	if len(tasks) != 1 {
		t.Fatalf("fetch: %s", out)
	}
	id := tasks[0].ID
	v.call("POST", "/engine-rest/external-task/"+id+"/extendLock", map[string]any{"workerId": "w", "newDuration": 60000}, jsonCT)
	v.call("POST", "/engine-rest/external-task/"+id+"/extendLock", map[string]any{"workerId": "other", "newDuration": 60000}, jsonCT)
	v.call("POST", "/engine-rest/external-task/"+id+"/unlock", nil, jsonCT)
	_, _ = v.call("POST", "/engine-rest/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []map[string]any{{"topicName": "spec", "lockDuration": 60000}}}, jsonCT)
	v.call("POST", "/engine-rest/external-task/"+id+"/failure", map[string]any{"workerId": "w", "retries": 1, "retryTimeout": 0}, jsonCT)
	v.call("POST", "/engine-rest/external-task/"+id+"/bpmnError", map[string]any{"workerId": "w", "errorCode": "X"}, jsonCT)
	v.call("POST", "/engine-rest/external-task/"+id+"/complete", map[string]any{"workerId": "w"}, jsonCT)
	v.call("POST", "/engine-rest/external-task/fetchAndLock", []byte("{"), jsonCT)

	// The token endpoint (the Bearer token v.call sends is no client secret).
	const formCT = "application/x-www-form-urlencoded"
	v.call("POST", "/oauth/token", []byte("grant_type=client_credentials&client_id=w&audience=a&client_secret="+adminToken), formCT)
	v.call("POST", "/oauth/token", []byte(`{"grant_type":"client_credentials","client_id":"w","client_secret":"`+token+`"}`), jsonCT)
	v.call("POST", "/oauth/token", []byte("grant_type=client_credentials&client_id=w&client_secret=nope"), formCT)
	v.call("POST", "/oauth/token", []byte("grant_type=password&client_id=w&client_secret=nope"), formCT)

	for _, r := range ownRoutes(b) {
		if !v.seen[r] {
			t.Errorf("route %s was not exercised by this test", r)
		}
	}
}
