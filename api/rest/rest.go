// Package rest serves Camunda 8's REST API v2 under /v2 on the API
// listener, so that the clients Camunda 8.8 ships REST-first — the Java
// client and the Spring starter, the TypeScript, Python and C# SDKs,
// c8ctl — work against Sutra unchanged (docs/rest.md). Like every protocol
// it only decodes a call, calls a use case (package usecase) and maps the
// fault codes it answers, in one table (problems.go), to Camunda's
// application/problem+json; nothing here claims an instance.
//
// Keys travel as strings: definitions and instances have a zeebe_key, and
// the ids of tasks (jobs, user tasks) and incidents are their keys, as for
// the Zeebe gateway. The credentials are the gateway's: the task token
// (SUTRA_API_TOKEN) opens jobs, user tasks, messages and the topology; the
// admin token (SUTRA_ADMIN_TOKEN) opens everything.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// Base is where the API is served.
const Base = "/v2"

// defaultTenant is the one tenant Sutra has, as Camunda names it.
const defaultTenant = "<default>"

// Version is the Camunda version whose REST API this package serves:
// clients read it from the topology.
const Version = "8.8.0"

// Config configures /v2.
type Config struct {
	// MaxBody caps the body of a call (default 1 MiB); MaxDeployBody a
	// deployment's (default 4 MiB).
	MaxBody, MaxDeployBody int64
	// MaxLongPolls caps the job activations waiting at once on this
	// replica (default 256); one over it is refused, 503
	// RESOURCE_EXHAUSTED naming SUTRA_API_MAX_LONG_POLLS.
	MaxLongPolls int
	// MaxJobsToActivate caps an activation's maxJobsToActivate (default
	// 1000).
	MaxJobsToActivate int
	// MaxLockDuration caps a job's activation timeout
	// (SUTRA_API_MAX_LOCK_DURATION, default 24h).
	MaxLockDuration time.Duration
	// MaxPageSize caps a search's page.limit (default 1000).
	MaxPageSize int
}

func (c *Config) setDefaults() {
	defaults.Set(&c.MaxBody, 1<<20)
	defaults.Set(&c.MaxDeployBody, 4<<20)
	defaults.Set(&c.MaxLongPolls, 256)
	defaults.Set(&c.MaxJobsToActivate, 1000)
	defaults.Set(&c.MaxLockDuration, 24*time.Hour)
	defaults.Set(&c.MaxPageSize, 1000)
}

// DefaultConfig is the configuration New fills unset fields from.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Store is what /v2 reads from the database (*store.Store); every change
// goes through the use cases.
type Store interface {
	DefinitionByKey(ctx context.Context, zeebeKey int64) (key string, version int, err error)
	DefinitionXML(ctx context.Context, key string, version int) (string, error)
	InstanceByKey(ctx context.Context, key int64, vars bool) (store.KeyedInstance, error)
	InstanceKeys(ctx context.Context, id string, vars bool) (store.KeyedInstance, error)
	Process(ctx context.Context, key string, version int) (*bpmn.Process, error)
	UserTaskByID(ctx context.Context, id int64) (store.UserTask, error)
	NextKey(ctx context.Context) (int64, error)
}

// Deps are /v2's collaborators.
type Deps struct {
	Store    Store
	UseCases *usecase.UseCases
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
}

// API is /v2, served on an api.Server.
type API struct {
	cfg   Config
	deps  Deps
	slots *taskwait.Slots
	// stopping is closed when the listener stops: long polls answer.
	stopping chan struct{}
	// waiting, when set, hears the job type of every activation that
	// starts to wait (tests' signals: OnWaiting).
	waiting atomic.Pointer[func(typ string)]
}

// OnWaiting makes f hear the job type of every activation that starts to
// wait (tests' signals).
func (a *API) OnWaiting(f func(typ string)) { a.waiting.Store(&f) }

// New registers /v2's routes on srv.
func New(srv *api.Server, deps Deps, cfg Config) *API {
	cfg.setDefaults()
	a := &API{cfg: cfg, deps: deps, slots: taskwait.NewSlots(cfg.MaxLongPolls, deps.Metrics.RESTLongPolls.Set), stopping: make(chan struct{})}
	route := func(scopes api.Scope, pattern string, h handler, types ...string) {
		limit := cfg.MaxBody
		if types != nil {
			limit = cfg.MaxDeployBody
		}
		_, path, _ := strings.Cut(pattern, " ")
		srv.Handle(protocolAt(path), api.Route{Pattern: pattern, Scopes: scopes, BodyLimit: limit, BodyTypes: types, Handler: a.serve(h)})
	}
	worker, admin := api.Tasks|api.Admin, api.Admin
	route(worker, "GET /v2/topology", a.topology)
	route(worker, "GET /v2/status", a.status)
	route(admin, "POST /v2/deployments", a.deploy, "multipart/form-data")
	route(admin, "POST /v2/process-instances", a.createInstance)
	route(admin, "POST /v2/process-instances/{key}/cancellation", a.cancelInstance)
	route(admin, "PUT /v2/element-instances/{key}/variables", a.setVariables)
	route(worker, "POST /v2/jobs/activation", a.activateJobs)
	route(worker, "POST /v2/jobs/{key}/completion", a.completeJob)
	route(worker, "POST /v2/jobs/{key}/failure", a.failJob)
	route(worker, "POST /v2/jobs/{key}/error", a.throwError)
	route(worker, "PATCH /v2/jobs/{key}", a.updateJob)
	route(worker, "POST /v2/messages/publication", a.publishMessage)
	route(worker, "POST /v2/messages/correlation", a.correlateMessage)
	route(admin, "POST /v2/signals/broadcast", a.broadcastSignal)
	route(admin, "POST /v2/incidents/{key}/resolution", a.resolveIncident)
	route(worker, "GET /v2/user-tasks/{key}", a.getUserTask)
	route(worker, "GET /v2/user-tasks/{key}/form", a.getUserTaskForm)
	route(worker, "POST /v2/user-tasks/{key}/assignment", a.assignUserTask)
	route(worker, "DELETE /v2/user-tasks/{key}/assignee", a.unassignUserTask)
	route(worker, "POST /v2/user-tasks/{key}/completion", a.completeUserTask)
	route(admin, "GET /v2/process-definitions/{key}/xml", a.definitionXML)
	route(admin, "POST /v2/decision-definitions/evaluation", a.evaluateDecision)
	a.routeSearches(route)
	// Any other path under /v2: a problem naming it, whoever asks.
	srv.Public(Base+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r.URL.Path, refuse(http.StatusNotFound, notFoundCode, "no such /v2 path: "+r.Method+" "+r.URL.Path))
	}))
	srv.Serves(taskwait.MaxLongPoll)
	srv.Go(func(soft context.Context) {
		<-soft.Done()
		close(a.stopping)
	})
	return a
}

// handler serves one call: an answer, or an error the problem table maps.
type handler func(c *call) (answer, error)

// call is one /v2 request being served.
type call struct {
	w http.ResponseWriter
	r *http.Request
}

// answer is a successful answer: a status and a JSON body (none for 204),
// or raw bytes of contentType.
type answer struct {
	status      int
	body        any
	raw         []byte
	contentType string
}

func ok(body any) answer             { return answer{status: http.StatusOK, body: body} }
func noContent() answer              { return answer{status: http.StatusNoContent} }
func (c *call) ctx() context.Context { return c.r.Context() }

// serve runs h and writes its answer or its problem.
func (a *API) serve(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ans, err := h(&call{w: w, r: r})
		switch {
		case err != nil:
			p := problemOf(err)
			// A call its client gave up on (a long poll's) is no failure.
			if p.Status >= http.StatusInternalServerError && p.Status != http.StatusServiceUnavailable && r.Context().Err() == nil {
				a.deps.Logger.Error("/v2 call failed", "path", r.URL.Path, "code", p.Code, "err", err)
			}
			writeProblem(w, r.URL.Path, p)
		case ans.raw != nil:
			w.Header().Set("Content-Type", ans.contentType)
			w.WriteHeader(ans.status)
			_, _ = w.Write(ans.raw)
		case ans.body != nil:
			api.WriteJSON(w, ans.status, ans.body)
		default:
			w.WriteHeader(ans.status)
		}
	}
}

// decode reads a JSON body into v; an empty body leaves v as it is. As
// Camunda's gateway, it ignores the fields it does not know: its clients
// send the fields of newer versions, and defaults of those /v2 does not
// serve (each handler refuses one it cannot honour, as startInstructions).
func (c *call) decode(v any) error {
	body, err := io.ReadAll(c.r.Body)
	if err != nil {
		return api.Invalidf("reading the body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return api.Invalidf("the body is not a valid request: %v", err)
	}
	if dec.More() {
		return api.Invalidf("the body has data after its JSON object")
	}
	return nil
}

// pathKey reads the path's key: a decimal int64.
func (c *call) pathKey() (int64, error) {
	v := c.r.PathValue("key")
	k, err := strconv.ParseInt(v, 10, 64)
	if err != nil || k < 1 {
		return 0, api.Invalidf("key %q is not a key (a positive decimal number)", v)
	}
	return k, nil
}

// Key is a key as /v2 writes and reads it: a decimal string.
type Key int64

func (k Key) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatInt(int64(k), 10) + `"`), nil
}

func (k *Key) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return api.Invalidf("%s is not a key (a decimal number, as a string)", b)
	}
	*k = Key(n)
	return nil
}

// conn is how use cases hold c's database connection: the one the
// listener took for it, given back while a step runs on the lanes.
func (c *call) conn() usecase.Conn {
	if cl := api.CallOf(c.r); cl != nil {
		return usecase.Conn{Idle: cl.Idle, Use: func(ctx context.Context) (func(), error) {
			return func() {}, cl.UseDB(ctx)
		}}
	}
	return usecase.Conn{}
}

// variables is a variables document: a JSON object or null.
func variables(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	return api.DecodeVariables("variables", raw)
}

// Long is a Java long as Camunda's clients send one: a JSON number, or a
// decimal string (the TypeScript client's bigints).
type Long int64

func (l *Long) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	if err != nil {
		return api.Invalidf("%s is not a whole number", b)
	}
	*l = Long(n)
	return nil
}
