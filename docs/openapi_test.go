package docs_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/sutra-run/worker/internal/spectest"
)

// load loads and validates the spec the way the worker's tests do.
func load(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	spec, err := spectest.Load()
	if err != nil {
		t.Fatal(err)
	}
	return spec.Doc, spec.Router
}

func TestTheSpecIsValidOpenAPI31(t *testing.T) {
	doc, _ := load(t)
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q: want 3.1", doc.OpenAPI)
	}
}

// The routes of the API listener; a route added to the server must be
// added here and to the spec.
var routes = []string{
	"GET /v1/openapi.yaml",
	"POST /v1/definitions",
	"GET /v1/definitions",
	"GET /v1/definitions/{key}/versions/{version}",
	"POST /v1/instances",
	"GET /v1/instances",
	"GET /v1/instances/{id}",
	"POST /v1/instances/{id}/cancel",
	"PATCH /v1/instances/{id}/variables",
	"POST /v1/instances/{id}/migrate",
	"POST /v1/instances/{id}/modification",
	"POST /v1/instances/{id}/modification/preflight",
	"POST /v1/migrations",
	"GET /v1/migrations/{id}",
	"POST /v1/batches",
	"GET /v1/batches/{id}",
	"GET /v1/incidents",
	"POST /v1/incidents/{id}/retry",
	"POST /v1/messages",
	"GET /v1/user-tasks",
	"GET /v1/user-tasks/{id}",
	"PATCH /v1/user-tasks/{id}",
	"POST /v1/user-tasks/{id}/assignment",
	"POST /v1/user-tasks/{id}/completion",
	"GET /v1/outbox/parked",
	"GET /v1/whoami",
	"GET /v1/definitions/{key}/versions/{version}/statistics",
	"GET /v1/user-tasks/{id}/form",
	"POST /v1/outbox/parked/{id}/retry",
	"POST /v1/outbox/parked/{id}/discard",
	"POST /engine-rest/external-task/fetchAndLock",
	"POST /engine-rest/external-task/{id}/complete",
	"POST /engine-rest/external-task/{id}/failure",
	"POST /engine-rest/external-task/{id}/bpmnError",
	"POST /engine-rest/external-task/{id}/extendLock",
	"POST /engine-rest/external-task/{id}/unlock",
	"POST /oauth/token",
	"GET /v1/decisions",
	"POST /v1/decisions/{id}/evaluation",
	"GET /v1/decisions/{id}/versions/{version}",
	"POST /v1/signals",
	"POST /v1/instances/{id}/migrate/preflight",
	"GET /v1/instances/{id}/history",
}

func TestTheSpecHasExactlyTheRoutesOfTheAPI(t *testing.T) {
	doc, _ := load(t)
	var got []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			got = append(got, method+" "+path)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(routes))
	if !slices.Equal(got, want) {
		t.Fatalf("spec routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Every admin route answers the refusals every admin call may meet, each
// as a problem document, and an outage with Retry-After.
func TestEveryAdminRouteDeclaresTheCommonRefusals(t *testing.T) {
	doc, _ := load(t)
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/v1/") || path == "/v1/openapi.yaml" {
			continue
		}
		for method, op := range item.Operations() {
			for _, status := range []string{"400", "401", "403", "413", "500", "503"} {
				r := op.Responses.Value(status)
				if r == nil || r.Value.Content.Get("application/problem+json") == nil {
					t.Errorf("%s %s: no problem+json %s", method, path, status)
				}
			}
			if r := op.Responses.Value("503"); r != nil && r.Value.Headers["Retry-After"] == nil {
				t.Errorf("%s %s: 503 without Retry-After", method, path)
			}
		}
	}
}

type sample struct {
	name        string
	method      string
	target      string
	status      int
	contentType string
	header      http.Header
	body        string
}

// validate validates a response to a request for s.target against the spec.
func validate(t *testing.T, doc *openapi3.T, router routers.Router, s sample) error {
	t.Helper()
	req := httptest.NewRequest(s.method, s.target, nil)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", s.name, s.method, s.target, err)
	}
	h := http.Header{}
	for k, v := range s.header {
		h[k] = v
	}
	if s.contentType != "" {
		h.Set("Content-Type", s.contentType)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 s.status,
		Header:                 h,
		Body:                   io.NopCloser(strings.NewReader(s.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	return openapi3filter.ValidateResponse(context.Background(), in)
}

const (
	problemJSON = "application/problem+json"
	appJSON     = "application/json"
)

func problem(code string, status int, extra string) string {
	return `{"type":"https://sutra.run/problems/` + code + `","title":"t","status":` + strconv.Itoa(status) +
		`,"detail":"d","code":"` + code + `"` + extra + `}`
}

const (
	instanceJSON = `{"instance_id":"order-42","zeebe_key":"2251799813685251","definition":{"key":"order","version":3},"status":"active","version":7,
		"variables":{"amount":42,"items":[1,2]},
		"tokens":[{"id":"t1","element":"pay","wait":"task"},{"id":"t2","element":"inner","wait":"message","scope":"t0"}],
		"compensable":[{"element":"reserve","times":2},{"element":"book","scope":"t0","in":["trip"],"times":1}],
		"waits":{"subscriptions":[{"token":"t2","element":"inner","message":"paid","correlation_key":"order-42","created_at":"2026-12-01T03:07:04.123456Z"}],
		         "signals":[{"token":"t1","element":"alarm","signal":"stop","created_at":"2026-12-01T03:07:05Z"}],
		         "timers":[{"token":"","element":"tick","due_at":"2026-12-01T04:00:00Z","attempts":0}],
		         "tasks":[{"id":"17","zeebe_key":"17","token":"t1","element":"pay","topic":"payments","user_task":false,"retries":3,"locked_by":"w-1","lock_expires_at":"2026-12-01T03:08:00Z"},
		                  {"id":"18","zeebe_key":"18","token":"t3","element":"approve","topic":"","user_task":true,"retries":1,"locked_by":null,"lock_expires_at":null}]},
		"incidents":[{"id":"5","zeebe_key":"5","token":"t1","element":"pay","code":"SUTRA.INCIDENT.TASK_FAILED","message":"boom","error_message":"card declined","error_details":null,"created_at":"2026-12-01T03:07:04Z","resolved_at":null}],
		"called_incidents":[],
		"claim":{"owner":"r1/admin","age_seconds":0.25},"parent_id":null,
		"created_at":"2026-12-01T03:00:00Z","updated_at":"2026-12-01T03:07:04Z"}`
	userTaskJSON = `{"id":"18","zeebe_key":"18","instance_id":"order-42","element":"approve","name":"Approve","process_name":"Order","definition":{"key":"order","version":3},
		"assignee":null,"candidate_groups":["managers"],"candidate_users":[],"form_key":"camunda-forms:bpmn:approve","form_id":null,
		"due_date":"2026-12-02T00:00:00Z","follow_up_date":null,"priority":50,"variables":{"amount":42},"state":"created",
		"created_at":"2026-12-01T03:07:04Z"}`
	migrationJSON = `{"id":"0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c","definition":"order","from_version":2,"to_version":3,"state":"running","total":10,"migrated":7,"retrying":1,
		"refused":[{"instance_id":"order-9","code":"SUTRA.ADMIN.MIGRATE.UNREACHABLE","detail":"token t1 at pay: the target definition has no element \"pay\""}],
		"created_at":"2026-12-01T03:00:00Z","updated_at":"2026-12-01T03:00:05Z"}`
	lockedTaskJSON = `[{"activityId":"pay","activityInstanceId":"pay:t1","errorMessage":null,"errorDetails":null,"executionId":"t1","id":"17",
		"lockExpirationTime":"2026-12-01T03:08:00.000+0000","createTime":"2026-12-01T03:07:04.123+0000","processDefinitionId":"order:3",
		"processDefinitionKey":"order","processDefinitionVersionTag":null,"processInstanceId":"order-42","retries":3,"suspended":false,
		"workerId":"w-1","topicName":"payments","tenantId":null,
		"variables":{"s":{"value":"x","type":"String","valueInfo":{}},"n":{"value":42,"type":"Integer","valueInfo":{}},
		             "l":{"value":9007199254740991,"type":"Long","valueInfo":{}},"d":{"value":1.5,"type":"Double","valueInfo":{}},
		             "b":{"value":true,"type":"Boolean","valueInfo":{}},"z":{"value":null,"type":"Null","valueInfo":{}},
		             "j":{"value":"{\"a\":[1,2]}","type":"Json","valueInfo":{}}},
		"priority":0,"businessKey":null,"extensionProperties":{}}]`
)

var retryAfter = http.Header{"Retry-After": {"1"}}
var wwwAuth = http.Header{"Www-Authenticate": {`Bearer realm="sutra", Basic realm="sutra"`}}

func TestTheSpecAcceptsCorrectResponses(t *testing.T) {
	doc, router := load(t)
	for _, s := range []sample{
		{"openapi", "GET", "/v1/openapi.yaml", 200, "application/yaml", nil, "openapi: 3.1.0\ninfo: {title: x, version: '1'}\npaths: {}\n"},
		{"deploy new", "POST", "/v1/definitions", 201, appJSON, nil, `{"key":"order","version":3,"zeebe_key":"2251799813685250","unchanged":false,"kind":"bpmn","definitions":[{"key":"order","version":3,"zeebe_key":"2251799813685250","unchanged":false},{"key":"refund","version":1,"zeebe_key":"7","unchanged":true}],"decisions":[]}`},
		{"deploy unchanged", "POST", "/v1/definitions", 200, appJSON, nil, `{"key":"order","version":3,"zeebe_key":"2251799813685250","unchanged":true,"kind":"bpmn","definitions":[{"key":"order","version":3,"zeebe_key":"2251799813685250","unchanged":true}],"decisions":[]}`},
		{"deploy invalid", "POST", "/v1/definitions", 422, problemJSON, nil, problem("SUTRA.BPMN.UNSUPPORTED", 422, `,"element_id":"Task_1"`)},
		{"definitions", "GET", "/v1/definitions", 200, appJSON, nil, `{"definitions":[{"key":"order","versions":[1,2,3],"zeebe_keys":["3","4","2251799813685250"],"latest":3}]}`},
		{"definition xml", "GET", "/v1/definitions/order/versions/3", 200, "application/xml", nil, `<?xml version="1.0"?><definitions/>`},
		{"definition missing", "GET", "/v1/definitions/order/versions/9", 404, problemJSON, nil, problem("SUTRA.ADMIN.NOT_FOUND", 404, "")},
		{"start", "POST", "/v1/instances", 201, appJSON, nil, `{"instance_id":"order-42","zeebe_key":"2251799813685251"}`},
		{"start exists", "POST", "/v1/instances", 409, problemJSON, nil, problem("SUTRA.RUNTIME.RESUME.INSTANCE_EXISTS", 409, `,"instance_id":"order-42"`)},
		{"start unknown", "POST", "/v1/instances", 404, problemJSON, nil, problem("SUTRA.RUNTIME.RELAY.UNKNOWN_DEFINITION", 404, "")},
		{"instance", "GET", "/v1/instances/order-42", 200, appJSON, nil, instanceJSON},
		{"instance unclaimed", "GET", "/v1/instances/order-42", 200, appJSON, nil, strings.Replace(instanceJSON, `{"owner":"r1/admin","age_seconds":0.25}`, "null", 1)},
		{"instance missing", "GET", "/v1/instances/nope", 404, problemJSON, nil, problem("SUTRA.RUNTIME.RESUME.NOT_FOUND", 404, `,"instance_id":"nope"`)},
		{"instances", "GET", "/v1/instances?status=active&limit=2", 200, appJSON, nil, `{"instances":[{"instance_id":"a","zeebe_key":"2251799813685251","definition":{"key":"order","version":3},"status":"active","version":2,"has_incident":true,"created_at":"2026-12-01T03:00:00Z","updated_at":"2026-12-01T03:07:04Z","ended_at":null,"duration_ms":424000}],"next":"c2","total":{"count":1893,"exact":false}}`},
		{"instances last page", "GET", "/v1/instances", 200, appJSON, nil, `{"instances":[],"next":null}`},
		{"cancel", "POST", "/v1/instances/order-42/cancel", 200, appJSON, nil, `{"instance_id":"order-42","status":"cancelled"}`},
		{"cancel busy", "POST", "/v1/instances/order-42/cancel", 409, problemJSON, nil, problem("SUTRA.ADMIN.CANCEL.CLAIM_HELD", 409, `,"instance_id":"order-42"`)},
		{"cancel ended", "POST", "/v1/instances/order-42/cancel", 409, problemJSON, nil, problem("SUTRA.RUNTIME.RESUME.NOT_WAITING", 409, "")},
		{"variables", "PATCH", "/v1/instances/order-42/variables", 200, appJSON, nil, `{"instance_id":"order-42","variables":{"a":1}}`},
		{"variables busy", "PATCH", "/v1/instances/order-42/variables", 409, problemJSON, nil, problem("SUTRA.ADMIN.VARIABLES.CLAIM_HELD", 409, "")},
		{"migrate", "POST", "/v1/instances/order-42/migrate", 200, appJSON, nil, `{"instance_id":"order-42","definition":{"key":"order","version":4}}`},
		{"migrate unreachable", "POST", "/v1/instances/order-42/migrate", 422, problemJSON, nil, problem("SUTRA.ADMIN.MIGRATE.UNREACHABLE", 422, `,"instance_id":"order-42","element_id":"pay"`)},
		{"migrate no target", "POST", "/v1/instances/order-42/migrate", 404, problemJSON, nil, problem("SUTRA.ADMIN.NOT_FOUND", 404, "")},
		{"migrate busy", "POST", "/v1/instances/order-42/migrate", 409, problemJSON, nil, problem("SUTRA.ADMIN.MIGRATE.CLAIM_HELD", 409, "")},
		{"bulk migration", "POST", "/v1/migrations", 202, appJSON, nil, `{"id":"0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c"}`},
		{"bulk migration state", "GET", "/v1/migrations/3", 200, appJSON, nil, migrationJSON},
		{"incidents", "GET", "/v1/incidents?open=true&instance_id=order-42", 200, appJSON, nil, `{"incidents":[{"id":"5","zeebe_key":"5","instance_id":"order-42","token":"t1","element":"pay","code":"SUTRA.INCIDENT.TASK_FAILED","message":"boom","error_message":null,"error_details":null,"created_at":"2026-12-01T03:07:04Z","resolved_at":"2026-12-01T03:09:00Z"}],"next":null}`},
		{"retry", "POST", "/v1/incidents/5/retry", 200, appJSON, nil, `{"incident_id":"5","instance_id":"order-42","resolved":true}`},
		{"retry resolved", "POST", "/v1/incidents/5/retry", 409, problemJSON, nil, problem("SUTRA.RUNTIME.RESUME.NOT_WAITING", 409, "")},
		{"message", "POST", "/v1/messages", 202, appJSON, nil, `{"message_id":"m-1"}`},
		{"user tasks", "GET", "/v1/user-tasks?candidate_group=managers&state=created", 200, appJSON, nil, `{"user_tasks":[` + userTaskJSON + `],"next":null}`},
		{"user task", "GET", "/v1/user-tasks/18", 200, appJSON, nil, userTaskJSON},
		{"user task missing", "GET", "/v1/user-tasks/99", 404, problemJSON, nil, problem("SUTRA.TASK.NOT_FOUND", 404, "")},
		{"assign", "POST", "/v1/user-tasks/18/assignment", 204, "", nil, ""},
		{"update", "PATCH", "/v1/user-tasks/18", 204, "", nil, ""},
		{"update with listeners", "PATCH", "/v1/user-tasks/18", 202, appJSON, nil, `{"state":"updating"}`},
		{"complete", "POST", "/v1/user-tasks/18/completion", 204, "", nil, ""},
		{"unauthorized", "GET", "/v1/instances", 401, problemJSON, wwwAuth, problem("SUTRA.API.UNAUTHORIZED", 401, "")},
		{"disabled", "GET", "/v1/instances", 403, problemJSON, nil, problem("SUTRA.ADMIN.DISABLED", 403, "")},
		{"invalid", "POST", "/v1/messages", 400, problemJSON, nil, problem("SUTRA.API.INVALID_REQUEST", 400, "")},
		{"too large", "POST", "/v1/definitions", 413, problemJSON, nil, problem("SUTRA.API.TOO_LARGE", 413, "")},
		{"unavailable", "GET", "/v1/instances/x", 503, problemJSON, retryAfter, problem("SUTRA.RUNTIME.UNAVAILABLE", 503, "")},
		{"internal", "GET", "/v1/instances/x", 500, problemJSON, nil, problem("SUTRA.RUNTIME.STEP.FAILED", 500, "")},

		{"fetchAndLock", "POST", "/engine-rest/external-task/fetchAndLock", 200, appJSON, nil, lockedTaskJSON},
		{"fetchAndLock none", "POST", "/engine-rest/external-task/fetchAndLock", 200, appJSON, nil, `[]`},
		{"fetchAndLock invalid", "POST", "/engine-rest/external-task/fetchAndLock", 400, appJSON, nil, `{"type":"InvalidRequestException","message":"workerId is required","code":"SUTRA.API.INVALID_REQUEST"}`},
		{"complete task", "POST", "/engine-rest/external-task/17/complete", 204, "", nil, ""},
		{"lock lost", "POST", "/engine-rest/external-task/17/complete", 400, appJSON, nil, `{"type":"BadUserRequestException","message":"m","code":"SUTRA.TASK.LOCK_LOST"}`},
		{"task missing", "POST", "/engine-rest/external-task/17/failure", 404, appJSON, nil, `{"type":"InvalidRequestException","message":"External task with id 17 does not exist","code":"SUTRA.TASK.NOT_FOUND"}`},
		{"bpmnError", "POST", "/engine-rest/external-task/17/bpmnError", 204, "", nil, ""},
		{"extendLock", "POST", "/engine-rest/external-task/17/extendLock", 204, "", nil, ""},
		{"unlock", "POST", "/engine-rest/external-task/17/unlock", 204, "", nil, ""},
		{"task unauthorized", "POST", "/engine-rest/external-task/17/unlock", 401, appJSON, wwwAuth, `{"type":"AuthenticationException","message":"m","code":"SUTRA.API.UNAUTHORIZED"}`},
		{"task too large", "POST", "/engine-rest/external-task/17/complete", 413, appJSON, nil, `{"type":"InvalidRequestException","message":"m","code":"SUTRA.API.TOO_LARGE"}`},
		{"task unavailable", "POST", "/engine-rest/external-task/fetchAndLock", 503, appJSON, nil, `{"type":"RestException","message":"m","code":"SUTRA.RUNTIME.UNAVAILABLE"}`},
		{"token", "POST", "/oauth/token", 200, appJSON, http.Header{"Cache-Control": {"no-store"}}, `{"access_token":"a.b.c","token_type":"Bearer","expires_in":3600,"scope":"tasks"}`},
		{"token wrong secret", "POST", "/oauth/token", 401, appJSON, nil, `{"error":"invalid_client","error_description":"d","code":"SUTRA.API.UNAUTHORIZED"}`},
		{"token another grant", "POST", "/oauth/token", 400, appJSON, nil, `{"error":"unsupported_grant_type","error_description":"d","code":"SUTRA.API.INVALID_REQUEST"}`},
		{"token too large", "POST", "/oauth/token", 413, appJSON, nil, `{"error":"invalid_request","error_description":"d","code":"SUTRA.API.TOO_LARGE"}`},
	} {
		if err := validate(t, doc, router, s); err != nil {
			t.Errorf("%s: refused: %v", s.name, err)
		}
	}
}

func TestTheSpecRefusesWrongResponses(t *testing.T) {
	doc, router := load(t)
	for _, s := range []sample{
		{"unknown field", "GET", "/v1/instances", 200, appJSON, nil, `{"instances":[],"next":null,"total":0}`},
		{"next missing", "GET", "/v1/instances", 200, appJSON, nil, `{"instances":[]}`},
		{"bad status value", "GET", "/v1/instances", 200, appJSON, nil, `{"instances":[{"instance_id":"a","zeebe_key":"2251799813685251","definition":{"key":"order","version":3},"status":"running","version":2,"has_incident":true,"created_at":"2026-12-01T03:00:00Z","updated_at":"2026-12-01T03:07:04Z","ended_at":null,"duration_ms":1}],"next":null}`},
		{"bad timestamp", "GET", "/v1/instances", 200, appJSON, nil, `{"instances":[{"instance_id":"a","zeebe_key":"2251799813685251","definition":{"key":"order","version":3},"status":"active","version":2,"has_incident":true,"created_at":"2026-12-01T03:00:00Z","updated_at":"yesterday","ended_at":null,"duration_ms":1}],"next":null}`},
		{"numeric id", "GET", "/v1/user-tasks/18", 200, appJSON, nil, strings.Replace(userTaskJSON, `"id":"18"`, `"id":18`, 1)},
		{"null where required", "GET", "/v1/instances/order-42", 200, appJSON, nil, strings.Replace(instanceJSON, `"variables":{"amount":42,"items":[1,2]}`, `"variables":null`, 1)},
		{"unknown wait", "GET", "/v1/instances/order-42", 200, appJSON, nil, strings.Replace(instanceJSON, `"wait":"task"`, `"wait":"sleeping"`, 1)},
		{"claim without age", "GET", "/v1/instances/order-42", 200, appJSON, nil, strings.Replace(instanceJSON, `,"age_seconds":0.25`, "", 1)},
		{"problem as json", "GET", "/v1/instances/x", 404, appJSON, nil, problem("SUTRA.RUNTIME.RESUME.NOT_FOUND", 404, "")},
		{"wrong 404 code", "GET", "/v1/instances/x", 404, problemJSON, nil, problem("SUTRA.TASK.NOT_FOUND", 404, "")},
		{"status field differs", "GET", "/v1/instances/x", 404, problemJSON, nil, problem("SUTRA.RUNTIME.RESUME.NOT_FOUND", 400, "")},
		{"problem without detail", "GET", "/v1/instances/x", 404, problemJSON, nil, `{"type":"https://sutra.run/problems/SUTRA.RUNTIME.RESUME.NOT_FOUND","title":"t","status":404,"code":"SUTRA.RUNTIME.RESUME.NOT_FOUND"}`},
		{"problem of another type", "GET", "/v1/instances/x", 404, problemJSON, nil, strings.Replace(problem("SUTRA.RUNTIME.RESUME.NOT_FOUND", 404, ""), "sutra.run", "example.com", 1)},
		{"undocumented status", "GET", "/v1/instances/x", 418, problemJSON, nil, problem("SUTRA.API.INVALID_REQUEST", 418, "")},
		{"503 without Retry-After", "GET", "/v1/instances/x", 503, problemJSON, nil, problem("SUTRA.RUNTIME.UNAVAILABLE", 503, "")},
		{"401 without WWW-Authenticate", "GET", "/v1/instances", 401, problemJSON, nil, problem("SUTRA.API.UNAUTHORIZED", 401, "")},
		{"variables busy code", "PATCH", "/v1/instances/a/variables", 409, problemJSON, nil, problem("SUTRA.ADMIN.CANCEL.CLAIM_HELD", 409, "")},
		{"cancel status", "POST", "/v1/instances/a/cancel", 200, appJSON, nil, `{"instance_id":"a","status":"completed"}`},
		{"deploy 200 with a new version", "POST", "/v1/definitions", 200, appJSON, nil, `{"key":"order","version":3,"unchanged":true,"definitions":[{"key":"order","version":3,"unchanged":false}]}`},
		{"deploy without definitions", "POST", "/v1/definitions", 201, appJSON, nil, `{"key":"order","version":3,"unchanged":false}`},
		{"retry not resolved", "POST", "/v1/incidents/5/retry", 200, appJSON, nil, `{"incident_id":"5","instance_id":"a","resolved":false}`},
		{"migration state", "GET", "/v1/migrations/3", 200, appJSON, nil, strings.Replace(migrationJSON, `"running"`, `"failed"`, 1)},
		{"user task state", "GET", "/v1/user-tasks/18", 200, appJSON, nil, strings.Replace(userTaskJSON, `"created"`, `"completed"`, 1)},
		{"user task groups null", "GET", "/v1/user-tasks/18", 200, appJSON, nil, strings.Replace(userTaskJSON, `["managers"]`, "null", 1)},
		{"assignment with a body", "POST", "/v1/user-tasks/18/assignment", 200, appJSON, nil, `{}`},
		{"camunda error as problem", "POST", "/engine-rest/external-task/17/complete", 404, problemJSON, nil, problem("SUTRA.TASK.NOT_FOUND", 404, "")},
		{"camunda error code", "POST", "/engine-rest/external-task/17/complete", 400, appJSON, nil, `{"type":"InvalidRequestException","message":"m","code":"SUTRA.TASK.LOCK_LOST"}`},
		{"typed value mismatch", "POST", "/engine-rest/external-task/fetchAndLock", 200, appJSON, nil, strings.Replace(lockedTaskJSON, `{"value":42,"type":"Integer"`, `{"value":"42","type":"Integer"`, 1)},
		{"integer out of range", "POST", "/engine-rest/external-task/fetchAndLock", 200, appJSON, nil, strings.Replace(lockedTaskJSON, `{"value":42,"type":"Integer"`, `{"value":4294967296,"type":"Integer"`, 1)},
		{"camunda time", "POST", "/engine-rest/external-task/fetchAndLock", 200, appJSON, nil, strings.Replace(lockedTaskJSON, `"2026-12-01T03:08:00.000+0000"`, `"2026-12-01T03:08:00Z"`, 1)},
		{"token without expiry", "POST", "/oauth/token", 200, appJSON, nil, `{"access_token":"a.b.c","token_type":"Bearer","scope":"tasks"}`},
		{"token of another scope", "POST", "/oauth/token", 200, appJSON, nil, `{"access_token":"a.b.c","token_type":"Bearer","expires_in":3600,"scope":"all"}`},
		{"token error unknown", "POST", "/oauth/token", 401, appJSON, nil, `{"error":"access_denied","error_description":"d","code":"SUTRA.API.UNAUTHORIZED"}`},
	} {
		if err := validate(t, doc, router, s); err == nil {
			t.Errorf("%s: accepted", s.name)
		}
	}
}

// Requests are validated too, so that a client generated from the spec
// sends what the server accepts.
func TestTheSpecValidatesRequests(t *testing.T) {
	_, router := load(t)
	for _, c := range []struct {
		name, method, target, contentType, body string
		ok                                      bool
	}{
		{"start", "POST", "/v1/instances", appJSON, `{"definition":"order","version":3,"instance_id":"order-42","variables":{"a":1}}`, true},
		{"start without definition", "POST", "/v1/instances", appJSON, `{"variables":{}}`, false},
		{"start with an unknown field", "POST", "/v1/instances", appJSON, `{"definition":"order","start":"x"}`, false},
		{"message by key", "POST", "/v1/messages", appJSON, `{"message":"paid","correlation_key":"order-42","ttl":"PT10M","message_id":"m-1","variables":{}}`, true},
		{"message by id", "POST", "/v1/messages", appJSON, `{"message":"paid","instance_id":"order-42"}`, true},
		{"message start", "POST", "/v1/messages", appJSON, `{"message":"order-placed"}`, true},
		{"message by key and id", "POST", "/v1/messages", appJSON, `{"message":"paid","correlation_key":"k","instance_id":"order-42"}`, false},
		{"message by id with ttl", "POST", "/v1/messages", appJSON, `{"message":"paid","instance_id":"order-42","ttl":"PT1M"}`, false},
		{"message ttl not ISO", "POST", "/v1/messages", appJSON, `{"message":"paid","correlation_key":"k","ttl":"10m"}`, false},
		{"migrate", "POST", "/v1/instances/a/migrate", appJSON, `{"target_version":4,"mapping":{"pay":"pay2"}}`, true},
		{"migrate to 0", "POST", "/v1/instances/a/migrate", appJSON, `{"target_version":0}`, false},
		{"unassign", "POST", "/v1/user-tasks/18/assignment", appJSON, `{"assignee":null}`, true},
		{"assign nobody", "POST", "/v1/user-tasks/18/assignment", appJSON, `{}`, false},
		{"update", "PATCH", "/v1/user-tasks/18", appJSON, `{"candidate_groups":["sales"],"candidate_users":[],"due_date":"","follow_up_date":"2030-01-01T09:00:00Z","priority":80}`, true},
		{"update nothing", "PATCH", "/v1/user-tasks/18", appJSON, `{}`, false},
		{"update priority too high", "PATCH", "/v1/user-tasks/18", appJSON, `{"priority":101}`, false},
		{"update the assignee", "PATCH", "/v1/user-tasks/18", appJSON, `{"assignee":"ada"}`, false},
		{"deploy", "POST", "/v1/definitions", "application/xml", `<definitions/>`, true},
		{"deploy as text", "POST", "/v1/definitions", "text/xml", `<definitions/>`, true},
		{"deploy as bytes", "POST", "/v1/definitions", "application/octet-stream", `<definitions/>`, true},
		{"deploy as json", "POST", "/v1/definitions", appJSON, `{}`, false},
		{"instances page", "GET", "/v1/instances?definition=order&status=active&has_incident=true&limit=500&after=c", "", "", true},
		{"instances page too large", "GET", "/v1/instances?limit=501", "", "", false},
		{"instances bad status", "GET", "/v1/instances?status=running", "", "", false},
		{"fetchAndLock", "POST", "/engine-rest/external-task/fetchAndLock", appJSON,
			`{"workerId":"w","maxTasks":5,"usePriority":true,"asyncResponseTimeout":30000,"topics":[{"topicName":"payments","lockDuration":60000,"variables":["a"],"processDefinitionKey":"order"}],"sorting":[{"sortBy":"createTime","sortOrder":"asc"}]}`, true},
		{"fetchAndLock without lockDuration", "POST", "/engine-rest/external-task/fetchAndLock", appJSON, `{"workerId":"w","maxTasks":5,"topics":[{"topicName":"payments"}]}`, false},
		{"complete", "POST", "/engine-rest/external-task/17/complete", appJSON, `{"workerId":"w","variables":{"r":{"value":"x","type":"String"}},"localVariables":{"p":{"value":"{}","type":"Json","valueInfo":{}}}}`, true},
		{"failure", "POST", "/engine-rest/external-task/17/failure", appJSON, `{"workerId":"w","errorMessage":"m","retries":0,"retryTimeout":1000}`, true},
		{"failure without retries", "POST", "/engine-rest/external-task/17/failure", appJSON, `{"workerId":"w"}`, false},
		{"bpmnError", "POST", "/engine-rest/external-task/17/bpmnError", appJSON, `{"workerId":"w","errorCode":"E1"}`, true},
		{"extendLock", "POST", "/engine-rest/external-task/17/extendLock", appJSON, `{"workerId":"w","newDuration":1000}`, true},
		{"token as a form", "POST", "/oauth/token", "application/x-www-form-urlencoded", "grant_type=client_credentials&client_id=zeebe&client_secret=s&audience=zeebe-api&scope=", true},
		{"token as JSON", "POST", "/oauth/token", appJSON, `{"grant_type":"client_credentials","client_id":"zeebe","client_secret":"s"}`, true},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req := httptest.NewRequest(c.method, c.target, body)
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		})
		if (err == nil) != c.ok {
			t.Errorf("%s: ok %v, got %v", c.name, c.ok, err)
		}
	}
}
