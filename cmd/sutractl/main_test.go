package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/sutra-run/worker/internal/spectest"
)

// exchange is one request the CLI must send and the API's canned answer.
type exchange struct {
	method string
	uri    string // path and query as sent
	ctype  string // the request's Content-Type, "" for none
	body   string // the request body: JSON compared as JSON, else bytes

	status int
	rtype  string // the answer's Content-Type
	resp   string
	header http.Header
	// offSpec marks what docs/openapi.yaml does not describe (a request it
	// refuses, a proxy's answer, a path kin-openapi's router cannot match):
	// not validated.
	offSpec bool
}

// The spec every request and canned answer is checked against, so that
// the CLI and the contract cannot drift apart.
func spec() (routers.Router, error) {
	s, err := spectest.Load()
	if err != nil {
		return nil, err
	}
	return s.Router, nil
}

// fakeAPI serves the exchanges in order and fails the test on any other
// request.
type fakeAPI struct {
	t    *testing.T
	mu   sync.Mutex
	want []exchange
	srv  *httptest.Server
	// The headers every request must carry.
	auth, caller string
}

func newFakeAPI(t *testing.T, want ...exchange) *fakeAPI {
	f := &fakeAPI{t: t, want: want, auth: "Bearer tok", caller: "oncall"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.srv.Close()
		if len(f.want) > 0 {
			t.Errorf("requests not sent: %s %s …", f.want[0].method, f.want[0].uri)
		}
	})
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	t := f.t
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if len(f.want) == 0 {
		t.Errorf("unexpected request %s %s", r.Method, r.RequestURI)
		w.WriteHeader(http.StatusTeapot)
		return
	}
	x := f.want[0]
	f.want = f.want[1:]
	if r.Method != x.method || r.RequestURI != x.uri {
		t.Errorf("request %s %s, want %s %s", r.Method, r.RequestURI, x.method, x.uri)
	}
	for name, want := range map[string]string{
		"Authorization": f.auth, "X-Sutra-Caller": f.caller, "Content-Type": x.ctype,
		"Accept": "application/json, application/problem+json",
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("%s %s: header %s %q, want %q", r.Method, r.RequestURI, name, got, want)
		}
	}
	if !sameBody(body, x.body, x.ctype) {
		t.Errorf("%s %s: body %s, want %s", r.Method, r.RequestURI, body, x.body)
	}
	if !x.offSpec {
		f.validate(r, body, x)
	}
	for k, v := range x.header {
		w.Header()[k] = v
	}
	if x.rtype != "" {
		w.Header().Set("Content-Type", x.rtype)
	}
	w.WriteHeader(x.status)
	_, _ = io.WriteString(w, x.resp)
}

func sameBody(got []byte, want, ctype string) bool {
	if ctype != "application/json" || want == "" {
		return string(got) == want
	}
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && jsonEqual(g, w)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// validate checks the CLI's request and the canned answer against the spec.
func (f *fakeAPI) validate(r *http.Request, body []byte, x exchange) {
	t := f.t
	router, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	req := r.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Errorf("%s %s: not in the spec: %v", r.Method, r.RequestURI, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		t.Errorf("%s %s: the request breaks the spec: %v", r.Method, r.RequestURI, err)
	}
	h := http.Header{}
	for k, v := range x.header {
		h[k] = v
	}
	if x.rtype != "" {
		h.Set("Content-Type", x.rtype)
	}
	if err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: x.status, Header: h, Body: io.NopCloser(strings.NewReader(x.resp)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}); err != nil {
		t.Errorf("%s %s: the canned answer breaks the spec: %v", r.Method, r.RequestURI, err)
	}
}

// sutractl runs the CLI against api with the token "tok" and the caller
// "oncall"; env overrides the environment.
func sutractl(t *testing.T, api *fakeAPI, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	vars := map[string]string{"SUTRA_ADMIN_TOKEN": "tok", "SUTRA_CALLER": "oncall"}
	if api != nil {
		vars["SUTRA_API_URL"] = api.srv.URL
	}
	for k, v := range env {
		vars[k] = v
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr, func(k string) string { return vars[k] })
	return code, stdout.String(), stderr.String()
}

const (
	appJSON     = "application/json"
	problemJSON = "application/problem+json"
)

const parkedJSON = `{"id":"order-42/3/ship/t1","instance_id":"order-42","element_id":"ship","target":"outbox","message":"shipped",
	"correlation_key":"order-42","attempts":10,"created_at":"2026-12-01T03:07:04Z","parked_at":"2026-12-01T03:11:00Z",
	"code":"SUTRA.OUTBOX.UNROUTABLE","reason":"NO_ROUTE"}`

func ok(method, uri, ctype, body string, status int, resp string) exchange {
	return exchange{method: method, uri: uri, ctype: ctype, body: body, status: status, rtype: appJSON, resp: resp}
}

func problem(method, uri, ctype, body string, status int, code, detail string) exchange {
	return exchange{method: method, uri: uri, ctype: ctype, body: body, status: status, rtype: problemJSON,
		resp: `{"type":"https://sutra.run/problems/` + code + `","title":"refused","status":` + itoa(status) +
			`,"detail":"` + detail + `","code":"` + code + `"}`}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

const (
	instanceJSON = `{"instance_id":"order-42","zeebe_key":"2251799813685300","definition":{"key":"order","version":3},"status":"active","version":7,
"variables":{"amount":42,"items":[1, 2],"note":"two\twords"},
"tokens":[{"id":"t1","element":"pay","wait":"task"},{"id":"t2","element":"inner","wait":"message","scope":"t0"}],
"compensable":[{"element":"reserve","times":2},{"element":"book","scope":"t0","in":["trip"],"times":1}],
"waits":{"subscriptions":[{"token":"t2","element":"inner","message":"paid","correlation_key":"order-42","created_at":"2026-12-01T03:07:04Z"}],
"signals":[{"token":"t1","element":"pay-alarm","signal":"alarm","created_at":"2026-12-01T03:07:05Z"}],
"timers":[{"token":"","element":"tick","due_at":"2026-12-01T04:00:00Z","attempts":2}],
"tasks":[{"id":"17","zeebe_key":"17","token":"t1","element":"pay","topic":"payments","user_task":false,"retries":3,"locked_by":"w-1","lock_expires_at":"2026-12-01T03:08:00Z"}]},
"incidents":[{"id":"5","zeebe_key":"5","token":"t1","element":"pay","code":"SUTRA.INCIDENT.TASK_FAILED","message":"card\ndeclined","error_message":null,"error_details":null,"created_at":"2026-12-01T03:07:04Z","resolved_at":null}],
"called_incidents":[],
"claim":{"owner":"r1/admin","age_seconds":0.25},"parent_id":null,
"created_at":"2026-12-01T03:00:00Z","updated_at":"2026-12-01T03:07:04Z"}`
	summaryA     = `{"instance_id":"a","zeebe_key":"2251799813685251","definition":{"key":"order","version":3},"status":"active","version":2,"has_incident":true,"created_at":"2026-12-01T03:00:00Z","updated_at":"2026-12-01T03:07:04Z","ended_at":null,"duration_ms":424000}`
	summaryB     = `{"instance_id":"b","zeebe_key":"2251799813685252","definition":{"key":"order","version":2},"status":"completed","version":9,"has_incident":false,"created_at":"2026-12-01T02:00:00Z","updated_at":"2026-12-01T03:00:00Z","ended_at":"2026-12-01T03:00:00Z","duration_ms":3600000}`
	userTaskJSON = `{"id":"18","zeebe_key":"18","instance_id":"order-42","element":"approve","name":"Approve","process_name":"Order","definition":{"key":"order","version":3},
"assignee":null,"candidate_groups":["managers","finance"],"candidate_users":[],"form_key":"camunda-forms:bpmn:approve","form_id":null,
"due_date":"2026-12-02T00:00:00Z","follow_up_date":null,"priority":50,"variables":{"amount":42},"state":"created",
"created_at":"2026-12-01T03:07:04Z"}`
	migrationJSON = `{"id":"0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c","definition":"order","from_version":2,"to_version":3,"state":"running","total":10,"migrated":7,"retrying":1,
"refused":[{"instance_id":"order-9","code":"SUTRA.ADMIN.MIGRATE.UNREACHABLE","detail":"token t1 at pay: the target definition has no element \"pay\""}],
"created_at":"2026-12-01T03:00:00Z","updated_at":"2026-12-01T03:00:05Z"}`
	incidentJSON = `{"id":"5","zeebe_key":"5","instance_id":"order-42","token":"t1","element":"pay","code":"SUTRA.INCIDENT.TASK_FAILED","message":"card declined","error_message":null,"error_details":null,"created_at":"2026-12-01T03:07:04Z","resolved_at":null}`
)

// Each command: the request it sends and the table it prints.
func TestCommandsSendTheirRequestAndPrintATable(t *testing.T) {
	bpmn := filepath.Join(t.TempDir(), "order.bpmn")
	if err := os.WriteFile(bpmn, []byte("<definitions/>\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		args   []string
		api    []exchange
		stdout string
		stderr string
	}{
		{name: "instances get", args: []string{"instances", "get", "order-42"},
			api: []exchange{ok("GET", "/v1/instances/order-42", "", "", 200, instanceJSON)},
			stdout: `INSTANCE  DEFINITION  STATUS  STEP  CLAIM            PARENT  CREATED               UPDATED
order-42  order:3     active  7     r1/admin (0.2s)  -       2026-12-01T03:00:00Z  2026-12-01T03:07:04Z

TOKENS
ID  ELEMENT  WAIT     SCOPE
t1  pay      task     -
t2  inner    message  t0

COMPENSABLE
ELEMENT  SCOPE  IN    TIMES
reserve  -      -     2
book     t0     trip  1

SUBSCRIPTIONS
TOKEN  ELEMENT  MESSAGE  CORRELATION_KEY  CREATED
t2     inner    paid     order-42         2026-12-01T03:07:04Z

SIGNALS
TOKEN  ELEMENT    SIGNAL  CREATED
t1     pay-alarm  alarm   2026-12-01T03:07:05Z

TIMERS
TOKEN  ELEMENT  DUE                   ATTEMPTS
-      tick     2026-12-01T04:00:00Z  2

TASKS
ID  TOKEN  ELEMENT  KIND     TOPIC     RETRIES  LOCKED_BY  LOCK_EXPIRES
17  t1     pay      service  payments  3        w-1        2026-12-01T03:08:00Z

INCIDENTS
ID  TOKEN  ELEMENT  CODE                        CREATED               RESOLVED  MESSAGE
5   t1     pay      SUTRA.INCIDENT.TASK_FAILED  2026-12-01T03:07:04Z  -         card declined

VARIABLES
NAME    VALUE
amount  42
items   [1,2]
note    "two\twords"
`},
		{name: "instances list", args: []string{"instances", "list", "--definition", "order", "--status", "active", "--has-incident", "--limit", "2"},
			api: []exchange{ok("GET", "/v1/instances?definition=order&has_incident=true&limit=2&status=active", "", "", 200,
				`{"instances":[`+summaryA+`,`+summaryB+`],"next":"c2"}`)},
			stdout: `INSTANCE  DEFINITION  STATUS     STEP  INCIDENT  UPDATED
a         order:3     active     2     yes       2026-12-01T03:07:04Z
b         order:2     completed  9     no        2026-12-01T03:00:00Z
`, stderr: "more: --after c2 (or --all)\n"},
		{name: "instances list without incidents", args: []string{"instances", "list", "--has-incident=false", "--after", "c2"},
			api: []exchange{ok("GET", "/v1/instances?after=c2&has_incident=false", "", "", 200, `{"instances":[`+summaryB+`],"next":null}`)},
			stdout: `INSTANCE  DEFINITION  STATUS     STEP  INCIDENT  UPDATED
b         order:2     completed  9     no        2026-12-01T03:00:00Z
`},
		{name: "instances list --all", args: []string{"instances", "list", "--all", "--limit", "1"},
			api: []exchange{
				ok("GET", "/v1/instances?limit=1", "", "", 200, `{"instances":[`+summaryA+`],"next":"c1"}`),
				ok("GET", "/v1/instances?after=c1&limit=1", "", "", 200, `{"instances":[`+summaryB+`],"next":null}`),
			},
			stdout: `INSTANCE  DEFINITION  STATUS     STEP  INCIDENT  UPDATED
a         order:3     active     2     yes       2026-12-01T03:07:04Z
b         order:2     completed  9     no        2026-12-01T03:00:00Z
`},
		{name: "instances start", args: []string{"instances", "start", "--definition", "order", "--version", "3", "--id", "order-42", "--var", `amount=42`, "--var", `customer={"id":"c-1"}`},
			api: []exchange{ok("POST", "/v1/instances", appJSON, `{"definition":"order","version":3,"instance_id":"order-42","variables":{"amount":42,"customer":{"id":"c-1"}}}`,
				201, `{"instance_id":"order-42","zeebe_key":"2251799813685300"}`)},
			stdout: `INSTANCE
order-42
`},
		{name: "instances start, latest version, id by the worker", args: []string{"instances", "start", "--definition", "order"},
			api: []exchange{ok("POST", "/v1/instances", appJSON, `{"definition":"order"}`, 201, `{"instance_id":"4f1c","zeebe_key":"2251799813685301"}`)},
			stdout: `INSTANCE
4f1c
`},
		{name: "cancel", args: []string{"cancel", "order-42"},
			api: []exchange{ok("POST", "/v1/instances/order-42/cancel", appJSON, "", 200, `{"instance_id":"order-42","status":"cancelled"}`)},
			stdout: `INSTANCE  STATUS
order-42  cancelled
`},
		{name: "cancel held by canceling listeners", args: []string{"cancel", "order-42"},
			api: []exchange{ok("POST", "/v1/instances/order-42/cancel", appJSON, "", 202, `{"instance_id":"order-42","status":"cancelling"}`)},
			stdout: `INSTANCE  STATUS
order-42  cancelling
instance order-42 ends cancelled once the canceling listeners of its user tasks are done
`},
		{name: "variables set", args: []string{"variables", "set", "order-42", "amount=43", `note="checked by hand"`, "flags=[true,false]"},
			api: []exchange{ok("PATCH", "/v1/instances/order-42/variables", appJSON, `{"amount":43,"note":"checked by hand","flags":[true,false]}`,
				200, `{"instance_id":"order-42","variables":{"amount":43,"flags":[true,false],"note":"checked by hand","orderId":"order-42"}}`)},
			stdout: `NAME     VALUE
amount   43
flags    [true,false]
note     "checked by hand"
orderId  "order-42"
`},
		{name: "migrate", args: []string{"migrate", "order-42", "--to", "4", "--map", "pay=payV2", "--map", "ship=shipV2"},
			api: []exchange{ok("POST", "/v1/instances/order-42/migrate", appJSON, `{"target_version":4,"mapping":{"pay":"payV2","ship":"shipV2"}}`,
				200, `{"instance_id":"order-42","definition":{"key":"order","version":4}}`)},
			stdout: `INSTANCE  DEFINITION
order-42  order:4
`},
		{name: "migrations start", args: []string{"migrations", "start", "--definition", "order", "--from", "2", "--to", "3", "--map", "pay=payV2"},
			api: []exchange{ok("POST", "/v1/migrations", appJSON, `{"definition":"order","from_version":2,"to_version":3,"mapping":{"pay":"payV2"}}`,
				202, `{"id":"0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c"}`)},
			stdout: `MIGRATION
0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c
`, stderr: "follow it with: sutractl migrations get 0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c\n"},
		{name: "migrations get", args: []string{"migrations", "get", "0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c"},
			api: []exchange{ok("GET", "/v1/migrations/0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c", "", "", 200, migrationJSON)},
			stdout: `MIGRATION                             DEFINITION  FROM  TO  STATE    TOTAL  MIGRATED  RETRYING  REFUSED  UPDATED
0d8b3a61-0bb0-4653-a5e1-5a64a3c0bc6c  order       2     3   running  10     7         1         1        2026-12-01T03:00:05Z

REFUSED
INSTANCE  CODE                             DETAIL
order-9   SUTRA.ADMIN.MIGRATE.UNREACHABLE  token t1 at pay: the target definition has no element "pay"
`},
		{name: "migrate --check", args: []string{"migrate", "order-42", "--to", "4", "--map", "pay=payV2", "--check"},
			api: []exchange{ok("POST", "/v1/instances/order-42/migrate/preflight", appJSON, `{"target_version":4,"mapping":{"pay":"payV2"}}`,
				200, `{"instance_id":"order-42","from":{"key":"order","version":3},"to":{"key":"order","version":4},"version":7,"ok":true,"status":200,`+
					`"tokens":[{"id":"t1","from":"pay","to":"payV2","wait":"task"}]}`)},
			stdout: `TOKEN  FROM  TO     WAIT
t1     pay   payV2  task
`},
		{name: "instances history", args: []string{"instances", "history", "order-42", "--limit", "2"},
			api: []exchange{ok("GET", "/v1/instances/order-42/history?limit=2", "", "", 200, `{"instance_id":"order-42","steps":[`+
				`{"version":7,"committed_at":"2026-12-01T03:07:04Z","cause":"timer","detail":"timer at remind","owner":"w-1/lane/3","message_id":null,"bounces":2,"passed":["remind","Flow_3","Ship"],"passed_cut":false},`+
				`{"version":6,"committed_at":"2026-12-01T03:07:01Z","cause":"relay","detail":"message paid","owner":"w-0/lane/1","message_id":"m-9","bounces":null,"passed":["paid"],"passed_cut":false}],"next":"6"}`)},
			stdout: `STEP  COMMITTED             CAUSE  OWNER       RELAY  BOUNCES  DETAIL
7     2026-12-01T03:07:04Z  timer  w-1/lane/3  -      2        timer at remind
6     2026-12-01T03:07:01Z  relay  w-0/lane/1  m-9    -        message paid
`, stderr: "more: --after 6 (or --all)\n"},
		{name: "incidents list", args: []string{"incidents", "list", "--open", "--instance", "order-42"},
			api: []exchange{ok("GET", "/v1/incidents?instance_id=order-42&open=true", "", "", 200, `{"incidents":[`+incidentJSON+`],"next":null}`)},
			stdout: `ID  INSTANCE  TOKEN  ELEMENT  CODE                        CREATED               RESOLVED  MESSAGE
5   order-42  t1     pay      SUTRA.INCIDENT.TASK_FAILED  2026-12-01T03:07:04Z  -         card declined
`},
		{name: "incidents list resolved", args: []string{"incidents", "list", "--open=false"},
			api: []exchange{ok("GET", "/v1/incidents?open=false", "", "", 200, `{"incidents":[],"next":null}`)},
			stdout: `ID  INSTANCE  TOKEN  ELEMENT  CODE  CREATED  RESOLVED  MESSAGE
`},
		{name: "incidents retry", args: []string{"incidents", "retry", "5", "--var", `card="4242"`, "--retries", "3"},
			api: []exchange{ok("POST", "/v1/incidents/5/retry", appJSON, `{"variables":{"card":"4242"},"retries":3}`,
				200, `{"incident_id":"5","instance_id":"order-42","resolved":true}`)},
			stdout: `INCIDENT  INSTANCE  RESOLVED
5         order-42  yes
`},
		{name: "outbox parked", args: []string{"outbox", "parked", "--instance", "order-42"},
			api: []exchange{ok("GET", "/v1/outbox/parked?instance_id=order-42", "", "", 200, `{"parked":[`+parkedJSON+`],"next":null}`)},
			stdout: `ID                  INSTANCE  ELEMENT  MESSAGE  CORRELATION_KEY  ATTEMPTS  PARKED                REASON
order-42/3/ship/t1  order-42  ship     shipped  order-42         10        2026-12-01T03:11:00Z  NO_ROUTE
`},
		{name: "outbox retry", args: []string{"outbox", "retry", "order-42/3/ship/t1"},
			api: []exchange{ok("POST", "/v1/outbox/parked/order-42%2F3%2Fship%2Ft1/retry", appJSON, `{}`, 200,
				`{"id":"order-42/3/ship/t1","status":"requeued"}`)},
			stdout: `ID                  STATUS
order-42/3/ship/t1  requeued
`},
		{name: "outbox discard", args: []string{"outbox", "discard", "order-42/3/ship/t1"},
			api: []exchange{ok("POST", "/v1/outbox/parked/order-42%2F3%2Fship%2Ft1/discard", appJSON, `{}`, 200,
				`{"id":"order-42/3/ship/t1","status":"discarded"}`)},
			stdout: `ID                  STATUS
order-42/3/ship/t1  discarded
`},
		{name: "incidents retry as it is", args: []string{"incidents", "retry", "5"},
			api: []exchange{ok("POST", "/v1/incidents/5/retry", appJSON, `{}`, 200, `{"incident_id":"5","instance_id":"order-42","resolved":true}`)},
			stdout: `INCIDENT  INSTANCE  RESOLVED
5         order-42  yes
`},
		{name: "deploy", args: []string{"deploy", bpmn},
			api: []exchange{ok("POST", "/v1/definitions", "application/xml", "<definitions/>\n", 201,
				`{"key":"order","version":4,"unchanged":false,"kind":"bpmn","decisions":[],"definitions":[{"key":"order","version":4,"zeebe_key":"2251799813685260","unchanged":false},{"key":"refund","version":1,"zeebe_key":"2251799813685261","unchanged":true}]}`)},
			stdout: `DEFINITION  VERSION  RESULT
order       4        deployed
refund      1        unchanged
`},
		{name: "deploy a DMN file", args: []string{"deploy", bpmn},
			api: []exchange{ok("POST", "/v1/definitions", "application/xml", "<definitions/>\n", 201,
				`{"key":"dish","version":2,"unchanged":false,"kind":"dmn","definitions":[],"decisions":[{"decision_id":"dish","name":"Dish","version":2,"version_tag":"v2","unchanged":false},{"decision_id":"beverages","name":"Beverages","version":1,"unchanged":true}]}`)},
			stdout: `DECISION   VERSION  VERSION_TAG  RESULT
dish       2        v2           deployed
beverages  1        -            unchanged
`},
		{name: "decisions list", args: []string{"decisions", "list", "--limit", "2"},
			api: []exchange{ok("GET", "/v1/decisions?limit=2", "", "", 200, `{"decisions":[{"decision_id":"beverages","name":"Beverages","version":1,"version_tag":null,"deployed_at":"2026-12-01T03:10:00Z"},`+
				`{"decision_id":"dish","name":"Dish","version":2,"version_tag":"v2","deployed_at":"2026-12-01T03:11:00Z"}],"next":"dish:2"}`)},
			stdout: `DECISION   VERSION  VERSION_TAG  NAME       DEPLOYED
beverages  1        -            Beverages  2026-12-01T03:10:00Z
dish       2        v2           Dish       2026-12-01T03:11:00Z
`, stderr: "more: --after dish:2 (or --all)\n"},
		{name: "decisions evaluate", args: []string{"decisions", "evaluate", "beverages", "--version", "1", "--var", `season="Winter"`},
			api: []exchange{ok("POST", "/v1/decisions/beverages/evaluation", appJSON, `{"variables":{"season":"Winter"},"version":1}`, 200,
				`{"decision_id":"beverages","name":"Beverages","version":1,"zeebe_key":"2251799813685260","drg":{"id":"dinner","name":"Dinner","zeebe_key":"2251799813685258"},"output":["Bordeaux","Water"],"decisions":[`+
					`{"decision_id":"dish","name":"Dish","version":1,"zeebe_key":"2251799813685259","type":"decision_table","output":"Roastbeef","inputs":[{"id":"i1","name":"Season","value":"Winter"}],"matched_rules":[{"rule_id":"r2","index":2,"outputs":{"desiredDish":"Roastbeef"}}]},`+
					`{"decision_id":"beverages","name":"Beverages","version":1,"zeebe_key":"2251799813685260","type":"decision_table","output":["Bordeaux","Water"],"inputs":[{"id":"i3","name":"Dish","value":"Roastbeef"}],"matched_rules":[{"rule_id":"b3","index":3,"outputs":{"beverages":"Bordeaux"}},{"rule_id":"b6","index":6,"outputs":{"beverages":"Water"}}]}]}`)},
			stdout: `DECISION   OUTPUT                MATCHED_RULES
dish       "Roastbeef"           r2
beverages  ["Bordeaux","Water"]  b3,b6
`},
		{name: "definitions list", args: []string{"definitions", "list"},
			api: []exchange{ok("GET", "/v1/definitions", "", "", 200, `{"definitions":[{"key":"order","versions":[1,2,3],"zeebe_keys":["2251799813685249","2251799813685250","2251799813685251"],"latest":3},{"key":"refund","versions":[1],"zeebe_keys":["2251799813685252"],"latest":1}]}`)},
			stdout: `DEFINITION  LATEST  VERSIONS
order       3       1,2,3
refund      1       1
`},
		{name: "definitions get", args: []string{"definitions", "get", "order", "3"},
			api: []exchange{{method: "GET", uri: "/v1/definitions/order/versions/3", status: 200, rtype: "application/xml",
				resp: "<?xml version=\"1.0\"?>\n<definitions/>\n"}},
			stdout: "<?xml version=\"1.0\"?>\n<definitions/>\n"},
		{name: "messages publish by key", args: []string{"messages", "publish", "--message", "paid", "--key", "order-42", "--var", "amount=42", "--ttl", "PT10M", "--id", "m-1"},
			api: []exchange{ok("POST", "/v1/messages", appJSON, `{"message":"paid","correlation_key":"order-42","variables":{"amount":42},"ttl":"PT10M","message_id":"m-1"}`,
				202, `{"message_id":"m-1"}`)},
			stdout: `MESSAGE_ID
m-1
`},
		{name: "messages publish to an instance", args: []string{"messages", "publish", "--message", "paid", "--instance", "order-42"},
			api: []exchange{ok("POST", "/v1/messages", appJSON, `{"message":"paid","instance_id":"order-42"}`, 202, `{"message_id":"2b9e"}`)},
			stdout: `MESSAGE_ID
2b9e
`},
		{name: "messages publish with an empty key, which is no key", args: []string{"messages", "publish", "--message", "paid", "--key", ""},
			api: []exchange{ok("POST", "/v1/messages", appJSON, `{"message":"paid"}`, 202, `{"message_id":"2b9f"}`)},
			stdout: `MESSAGE_ID
2b9f
`},
		{name: "signals broadcast", args: []string{"signals", "broadcast", "--name", "alarm", "--var", "level=2"},
			api: []exchange{ok("POST", "/v1/signals", appJSON, `{"name":"alarm","variables":{"level":2}}`,
				200, `{"signal_id":"s-1","subscriptions":3,"starts":1}`)},
			stdout: `SIGNAL_ID  SUBSCRIPTIONS  STARTS
s-1        3              1
`},
		{name: "user-tasks list", args: []string{"user-tasks", "list", "--candidate-group", "managers", "--state", "created", "--assignee", "bob", "--candidate-user", "ann"},
			api: []exchange{ok("GET", "/v1/user-tasks?assignee=bob&candidate_group=managers&candidate_user=ann&state=created", "", "", 200,
				`{"user_tasks":[`+userTaskJSON+`],"next":null}`)},
			stdout: `ID  INSTANCE  ELEMENT  STATE    ASSIGNEE  CANDIDATE_GROUPS  CANDIDATE_USERS  PRIORITY  DUE                   CREATED
18  order-42  approve  created  -         managers,finance  -                50        2026-12-02T00:00:00Z  2026-12-01T03:07:04Z
`},
		{name: "user-tasks get", args: []string{"user-tasks", "get", "18"},
			api: []exchange{ok("GET", "/v1/user-tasks/18", "", "", 200, userTaskJSON)},
			stdout: `ID  INSTANCE  ELEMENT  DEFINITION  STATE    ASSIGNEE  CANDIDATE_GROUPS  CANDIDATE_USERS  PRIORITY  DUE                   FORM                        CREATED
18  order-42  approve  order:3     created  -         managers,finance  -                50        2026-12-02T00:00:00Z  camunda-forms:bpmn:approve  2026-12-01T03:07:04Z

VARIABLES
NAME    VALUE
amount  42
`},
		{name: "user-tasks assign", args: []string{"user-tasks", "assign", "18", "bob"},
			api:    []exchange{{method: "POST", uri: "/v1/user-tasks/18/assignment", ctype: appJSON, body: `{"assignee":"bob"}`, status: 204}},
			stdout: "user task 18 assigned to bob\n"},
		{name: "user-tasks unassign", args: []string{"user-tasks", "assign", "--unassign", "18"},
			api:    []exchange{{method: "POST", uri: "/v1/user-tasks/18/assignment", ctype: appJSON, body: `{"assignee":null}`, status: 204}},
			stdout: "user task 18 unassigned\n"},
		{name: "user-tasks update", args: []string{"user-tasks", "update", "18", "--candidate-groups", "sales,managers", "--candidate-users", "", "--due-date", "", "--priority", "80"},
			api: []exchange{{method: "PATCH", uri: "/v1/user-tasks/18", ctype: appJSON,
				body: `{"candidate_groups":["sales","managers"],"candidate_users":[],"due_date":"","priority":80}`, status: 204}},
			stdout: "user task 18 updated\n"},
		{name: "user-tasks update held by its listeners", args: []string{"user-tasks", "update", "18", "--follow-up-date", "2030-01-01T09:00:00Z"},
			api:    []exchange{ok("PATCH", "/v1/user-tasks/18", appJSON, `{"follow_up_date":"2030-01-01T09:00:00Z"}`, 202, `{"state":"updating"}`)},
			stdout: "user task 18 is updating: the update takes effect once its updating listeners are done\n"},
		{name: "user-tasks complete", args: []string{"user-tasks", "complete", "18", "--var", "approved=true"},
			api:    []exchange{{method: "POST", uri: "/v1/user-tasks/18/completion", ctype: appJSON, body: `{"variables":{"approved":true}}`, status: 204}},
			stdout: "user task 18 completed\n"},
		{name: "flags after the arguments, common flags before the command", args: []string{"--caller", "someone-else", "cancel", "order-42", "--caller", "oncall"},
			api: []exchange{ok("POST", "/v1/instances/order-42/cancel", appJSON, "", 200, `{"instance_id":"order-42","status":"cancelled"}`)},
			stdout: `INSTANCE  STATUS
order-42  cancelled
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := newFakeAPI(t, c.api...)
			code, stdout, stderr := sutractl(t, api, nil, c.args...)
			if code != 0 || stdout != c.stdout || stderr != c.stderr {
				t.Errorf("exit %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, c.stdout, stderr, c.stderr)
			}
		})
	}
}

// -o json prints the API's JSON as it came, indented; --all makes one page
// of every item.
func TestJSONOutputIsTheAPIsJSON(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		api    []exchange
		stdout string
	}{
		{name: "instances get", args: []string{"-o", "json", "instances", "get", "order-42"},
			api:    []exchange{ok("GET", "/v1/instances/order-42", "", "", 200, instanceJSON)},
			stdout: indent(t, instanceJSON)},
		{name: "one page keeps its next", args: []string{"instances", "list", "-o", "json"},
			api:    []exchange{ok("GET", "/v1/instances", "", "", 200, `{"instances":[`+summaryA+`],"next":"c1"}`)},
			stdout: indent(t, `{"instances":[`+summaryA+`],"next":"c1"}`)},
		{name: "--all is one page", args: []string{"incidents", "list", "--all", "-o", "json"},
			api: []exchange{
				ok("GET", "/v1/incidents", "", "", 200, `{"incidents":[`+incidentJSON+`],"next":"c1"}`),
				ok("GET", "/v1/incidents?after=c1", "", "", 200, `{"incidents":[`+strings.Replace(incidentJSON, `"id":"5"`, `"id":"6"`, 1)+`],"next":null}`),
			},
			stdout: indent(t, `{"incidents":[`+incidentJSON+`,`+strings.Replace(incidentJSON, `"id":"5"`, `"id":"6"`, 1)+`],"next":null}`)},
		{name: "--all of user tasks", args: []string{"user-tasks", "list", "--all", "-o", "json"},
			api:    []exchange{ok("GET", "/v1/user-tasks", "", "", 200, `{"user_tasks":[],"next":null}`)},
			stdout: indent(t, `{"user_tasks":[],"next":null}`)},
		{name: "cancel", args: []string{"cancel", "-o", "json", "order-42"},
			api:    []exchange{ok("POST", "/v1/instances/order-42/cancel", appJSON, "", 200, `{"instance_id":"order-42","status":"cancelled"}`)},
			stdout: "{\n  \"instance_id\": \"order-42\",\n  \"status\": \"cancelled\"\n}\n"},
		{name: "a 204 has no JSON", args: []string{"user-tasks", "complete", "18", "-o", "json"},
			api:    []exchange{{method: "POST", uri: "/v1/user-tasks/18/completion", ctype: appJSON, body: `{}`, status: 204}},
			stdout: ""},
		{name: "a definition is its XML", args: []string{"definitions", "get", "order", "1", "-o", "json"},
			api:    []exchange{{method: "GET", uri: "/v1/definitions/order/versions/1", status: 200, rtype: "application/xml", resp: "<definitions/>"}},
			stdout: "<definitions/>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := sutractl(t, newFakeAPI(t, c.api...), nil, c.args...)
			if code != 0 || stdout != c.stdout || stderr != "" {
				t.Errorf("exit %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s", code, stdout, c.stdout, stderr)
			}
		})
	}
}

func indent(t *testing.T, s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		t.Fatal(err)
	}
	return buf.String() + "\n"
}

// A refusal prints its code and detail on stderr and exits 1; what the
// operator can do about it follows when it is known.
func TestRefusalsExit1WithTheCodeAndDetail(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		api    exchange
		stderr string
	}{
		{name: "claim held", args: []string{"cancel", "order-42"},
			api: problem("POST", "/v1/instances/order-42/cancel", appJSON, "", 409, "SUTRA.ADMIN.CANCEL.CLAIM_HELD", "instance order-42 is claimed by r1/lane/3"),
			stderr: "sutractl: SUTRA.ADMIN.CANCEL.CLAIM_HELD: instance order-42 is claimed by r1/lane/3\n" +
				"the instance is busy right now (a step or another admin call holds it): retry — this is a race, not a failure\n"},
		{name: "not active", args: []string{"cancel", "order-42"},
			api:    problem("POST", "/v1/instances/order-42/cancel", appJSON, "", 409, "SUTRA.RUNTIME.RESUME.NOT_WAITING", "instance order-42 is completed"),
			stderr: "sutractl: SUTRA.RUNTIME.RESUME.NOT_WAITING: instance order-42 is completed\n"},
		{name: "unreachable element", args: []string{"migrate", "order-42", "--to", "4"},
			api: func() exchange {
				x := problem("POST", "/v1/instances/order-42/migrate", appJSON, `{"target_version":4}`, 422, "SUTRA.ADMIN.MIGRATE.UNREACHABLE", "token t1 at pay: the target definition has no element \\\"pay\\\"")
				x.resp = strings.Replace(x.resp, `}`, `,"instance_id":"order-42","element_id":"pay"}`, 1)
				return x
			}(),
			stderr: "sutractl: SUTRA.ADMIN.MIGRATE.UNREACHABLE: token t1 at pay: the target definition has no element \"pay\"\n  instance: order-42\n  element: pay\n"},
		{name: "a migration the preflight finds refused", args: []string{"migrate", "order-42", "--to", "4", "--check"},
			api: ok("POST", "/v1/instances/order-42/migrate/preflight", appJSON, `{"target_version":4}`, 200,
				`{"instance_id":"order-42","from":{"key":"order","version":3},"to":{"key":"order","version":4},"version":7,"ok":false,"status":422,`+
					`"code":"SUTRA.ADMIN.MIGRATE.UNREACHABLE","detail":"token t1 at pay: the target definition has no element \"pay\"","tokens":[]}`),
			stderr: "sutractl: SUTRA.ADMIN.MIGRATE.UNREACHABLE: the migration would be refused: token t1 at pay: the target definition has no element \"pay\"\n  instance: order-42\n"},
		{name: "no such instance", args: []string{"instances", "get", "nope"},
			api:    problem("GET", "/v1/instances/nope", "", "", 404, "SUTRA.RUNTIME.RESUME.NOT_FOUND", "instance nope does not exist"),
			stderr: "sutractl: SUTRA.RUNTIME.RESUME.NOT_FOUND: instance nope does not exist\n"},
		{name: "bad request", args: []string{"instances", "list", "--status", "running"},
			api: func() exchange {
				x := problem("GET", "/v1/instances?status=running", "", "", 400, "SUTRA.API.INVALID_REQUEST", "status \\\"running\\\" is not one of active, completed, terminated, cancelled")
				x.offSpec = true // the spec refuses this request too
				return x
			}(),
			stderr: "sutractl: SUTRA.API.INVALID_REQUEST: status \"running\" is not one of active, completed, terminated, cancelled\n"},
		{name: "wrong token", args: []string{"incidents", "list"},
			api: func() exchange {
				x := problem("GET", "/v1/incidents", "", "", 401, "SUTRA.API.UNAUTHORIZED", "a valid token is required")
				x.header = http.Header{"Www-Authenticate": {`Bearer realm="sutra", Basic realm="sutra"`}}
				return x
			}(),
			stderr: "sutractl: SUTRA.API.UNAUTHORIZED: a valid token is required\nthe token is missing or wrong: set SUTRA_ADMIN_TOKEN to the worker's admin token\n"},
		{name: "the task workers' token", args: []string{"incidents", "list"},
			api: problem("GET", "/v1/incidents", "", "", 403, "SUTRA.API.FORBIDDEN", "this token opens the task API, not this route"),
			stderr: "sutractl: SUTRA.API.FORBIDDEN: this token opens the task API, not this route\n" +
				"this token is the task workers' (SUTRA_API_TOKEN): set SUTRA_ADMIN_TOKEN to the worker's admin token\n"},
		{name: "admin API off", args: []string{"incidents", "list"},
			api: problem("GET", "/v1/incidents", "", "", 403, "SUTRA.ADMIN.DISABLED", "the admin API is off"),
			stderr: "sutractl: SUTRA.ADMIN.DISABLED: the admin API is off\n" +
				"the worker has no SUTRA_ADMIN_TOKEN, so its admin API is off: give it one (or SUTRA_ADMIN_INSECURE=true on a trusted network)\n"},
		{name: "outage", args: []string{"incidents", "list"},
			api: func() exchange {
				x := problem("GET", "/v1/incidents", "", "", 503, "SUTRA.RUNTIME.UNAVAILABLE", "the database is unreachable")
				x.header = http.Header{"Retry-After": {"2"}}
				return x
			}(),
			stderr: "sutractl: SUTRA.RUNTIME.UNAVAILABLE: the database is unreachable\nthe worker cannot serve right now: retry in 2 s\n"},
		{name: "a proxy's answer", args: []string{"incidents", "list"},
			api:    exchange{method: "GET", uri: "/v1/incidents", status: 502, rtype: "text/html", resp: "<html>\n<body>bad gateway</body>\n</html>\n", offSpec: true},
			stderr: "sutractl: HTTP 502 Bad Gateway: <html> <body>bad gateway</body> </html>\n"},
		{name: "an answer that is not the API's", args: []string{"instances", "get", "x"},
			api:    exchange{method: "GET", uri: "/v1/instances/x", status: 200, rtype: "text/html", resp: "<html></html>", offSpec: true},
			stderr: "sutractl: the API's answer is not what docs/openapi.yaml describes: invalid character '<' looking for beginning of value\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := sutractl(t, newFakeAPI(t, c.api), nil, c.args...)
			if code != exitRefused || stdout != "" || stderr != c.stderr {
				t.Errorf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, c.stderr)
			}
		})
	}
}

// SUTRA_API_TOKEN is the task workers' token: sutractl never sends it, and
// says so when it is all the environment has.
func TestTheTaskTokenIsNeverSentAndARefusalSaysToSetTheAdminToken(t *testing.T) {
	x := problem("GET", "/v1/incidents", "", "", 401, "SUTRA.API.UNAUTHORIZED", "a valid token is required")
	x.header = http.Header{"Www-Authenticate": {`Bearer realm="sutra"`}}
	api := newFakeAPI(t, x)
	api.auth = ""
	code, _, stderr := sutractl(t, api, map[string]string{"SUTRA_ADMIN_TOKEN": "", "SUTRA_API_TOKEN": "task"}, "incidents", "list")
	if code != exitRefused || !strings.Contains(stderr, "SUTRA_ADMIN_TOKEN is not set: sutractl sends the worker's admin token, not SUTRA_API_TOKEN") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func TestAnUnreachableServerExits3(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	code, stdout, stderr := sutractl(t, nil, map[string]string{"SUTRA_API_URL": dead.URL}, "instances", "get", "order-42")
	if code != exitUnreachable || stdout != "" || !strings.HasPrefix(stderr, "sutractl: cannot reach the Sutra API at "+dead.URL+": ") {
		t.Errorf("exit %d, want 3\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// A usage error exits 2 and sends nothing.
func TestUsageErrorsExit2AndSendNothing(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		stderr string // its first line
		env    map[string]string
	}{
		{"no command", nil, "sutractl: no command", nil},
		{"unknown command", []string{"instance", "get", "x"}, `sutractl: unknown command "instance get"`, nil},
		{"a group alone", []string{"instances"}, "sutractl: instances needs one of: get, list, history, start", nil},
		{"unknown subcommand", []string{"user-tasks", "claim", "18"}, "sutractl: user-tasks needs one of: list, get, assign, update, complete", nil},
		{"missing argument", []string{"cancel"}, "sutractl: wrong number of arguments", nil},
		{"extra argument", []string{"instances", "get", "a", "b"}, "sutractl: wrong number of arguments", nil},
		{"unknown flag", []string{"cancel", "x", "--force"}, "sutractl: flag provided but not defined: -force", nil},
		{"bad output", []string{"-o", "yaml", "cancel", "x"}, `sutractl: -o "yaml": want table or json`, nil},
		{"variable not JSON", []string{"variables", "set", "x", "name=bob"}, `sutractl: the value of name is not JSON (a string needs quotes: name='"text"')`, nil},
		{"variable without a name", []string{"variables", "set", "x", "=1"}, `sutractl: "=1": want name=json`, nil},
		{"no variables", []string{"variables", "set", "x"}, "sutractl: wrong number of arguments", nil},
		{"--var not JSON", []string{"incidents", "retry", "5", "--var", "card=4242x"}, `sutractl: invalid value "card=4242x" for flag -var: the value of card is not JSON (a string needs quotes: card='"text"')`, nil},
		{"bad mapping", []string{"migrate", "x", "--to", "2", "--map", "pay"}, `sutractl: invalid value "pay" for flag -map: "pay": want OldElementId=NewElementId`, nil},
		{"migrate without --to", []string{"migrate", "x"}, "sutractl: --to is required", nil},
		{"--to not a number", []string{"migrate", "x", "--to", "four"}, `sutractl: invalid value "four" for flag -to: want a whole number`, nil},
		{"bulk migration without --from", []string{"migrations", "start", "--definition", "order", "--to", "3"}, "sutractl: --definition, --from and --to are required", nil},
		{"message without a name", []string{"messages", "publish", "--key", "k"}, "sutractl: --message is required", nil},
		{"message by key and to an instance", []string{"messages", "publish", "--message", "m", "--key", "k", "--instance", "i"}, "sutractl: --key and --instance exclude each other", nil},
		{"start without definition", []string{"instances", "start"}, "sutractl: --definition is required", nil},
		{"assign nobody", []string{"user-tasks", "assign", "18"}, "sutractl: name the USER, or --unassign", nil},
		{"update nothing", []string{"user-tasks", "update", "18"}, "sutractl: name at least one field to change", nil},
		{"assign and unassign", []string{"user-tasks", "assign", "18", "bob", "--unassign"}, "sutractl: USER and --unassign exclude each other", nil},
		{"deploy a missing file", []string{"deploy", "/nonexistent/order.bpmn"}, "sutractl: open /nonexistent/order.bpmn: no such file or directory", nil},
		{"version not a number", []string{"definitions", "get", "order", "latest"}, `sutractl: VERSION "latest" is not a number`, nil},
		{"--has-incident with a value", []string{"instances", "list", "--has-incident=maybe"}, `sutractl: invalid boolean value "maybe" for -has-incident: want true or false`, nil},
		{"a URL without a scheme", []string{"cancel", "x"}, `sutractl: SUTRA_API_URL "localhost:8080": want http://host:port or https://host:port`,
			map[string]string{"SUTRA_API_URL": "localhost:8080"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := sutractl(t, newFakeAPI(t), c.env, c.args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != exitUsage || stdout != "" || first != c.stderr {
				t.Errorf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s\nwant first line:\n%s", code, stdout, stderr, c.stderr)
			}
		})
	}
}

// A usage error names the command's usage.
func TestAUsageErrorShowsTheCommandsUsage(t *testing.T) {
	code, _, stderr := sutractl(t, newFakeAPI(t), nil, "migrate", "x")
	want := "sutractl: --to is required\nusage: sutractl migrate ID --to VERSION [--map OLD=NEW ...] [--check]\n(run 'sutractl migrate --help' for details)\n"
	if code != exitUsage || stderr != want {
		t.Errorf("exit %d\nstderr:\n%s\nwant:\n%s", code, stderr, want)
	}
}

// Every command answers --help (and -h, and "help COMMAND") on stdout with
// its usage and every flag it takes, and sends nothing.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, cmd := range commands {
		words := strings.Fields(cmd.name)
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.setup(fs)
		for _, args := range [][]string{
			append(slices.Clone(words), "--help"),
			append(slices.Clone(words), "x", "-h"),
			append([]string{"help"}, words...),
		} {
			code, stdout, stderr := sutractl(t, newFakeAPI(t), nil, args...)
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: sutractl "+cmd.name+" "+cmd.synopsis+"\n\n"+cmd.summary+"\n") {
				t.Errorf("%q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
				continue
			}
			fs.VisitAll(func(f *flag.Flag) {
				if !strings.Contains(stdout, "\n  --"+f.Name) {
					t.Errorf("%q: no --%s in\n%s", args, f.Name, stdout)
				}
			})
			for _, common := range []string{"\n  -o FORMAT\n", "\n  --caller NAME\n"} {
				if !strings.Contains(stdout, common) {
					t.Errorf("%q: no %q in\n%s", args, common, stdout)
				}
			}
		}
	}
}

func TestTheMainHelpListsEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		code, stdout, stderr := sutractl(t, newFakeAPI(t), nil, args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: sutractl [-o table|json] [--caller NAME] COMMAND [ARGS]\n") {
			t.Fatalf("%q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
		for _, cmd := range commands {
			if !strings.Contains(stdout, "\n"+cmd.name+" ") {
				t.Errorf("%q: %s is not listed", args, cmd.name)
			}
		}
	}
	code, stdout, _ := sutractl(t, newFakeAPI(t), nil, "user-tasks", "--help")
	if code != 0 || !strings.HasPrefix(stdout, "Usage: sutractl user-tasks COMMAND\n") || !strings.Contains(stdout, "\nuser-tasks assign ID (USER | --unassign)  ") {
		t.Errorf("group help: exit %d\n%s", code, stdout)
	}
}

// Instance ids may hold any character: each is one escaped path segment.
func TestIDsAreEscaped(t *testing.T) {
	api := newFakeAPI(t, exchange{method: "GET", uri: "/v1/instances/a%2Fb%20c%3F", status: 200, rtype: appJSON,
		resp: strings.Replace(instanceJSON, `"order-42"`, `"a/b c?"`, 1), offSpec: true}) // kin-openapi's router matches %2F as "/"
	if code, _, stderr := sutractl(t, api, nil, "instances", "get", "a/b c?"); code != 0 {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// Without SUTRA_CALLER or --caller the OS user calls; without a token no
// Authorization is sent; a trailing slash on the URL is harmless.
func TestCallerDefaultsToTheOSUserAndTheTokenIsOptional(t *testing.T) {
	api := newFakeAPI(t, ok("POST", "/v1/instances/x/cancel", appJSON, "", 200, `{"instance_id":"x","status":"cancelled"}`))
	api.auth, api.caller = "", osUser(os.Getenv)
	env := map[string]string{"SUTRA_CALLER": "", "SUTRA_ADMIN_TOKEN": "", "SUTRA_API_URL": api.srv.URL + "/"}
	if code, _, stderr := sutractl(t, api, env, "cancel", "x"); code != 0 {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if api.caller == "" || api.caller == "unknown" {
		t.Errorf("caller %q: the OS user has no name here", api.caller)
	}
}
