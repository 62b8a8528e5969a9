// Package admin serves the admin API under /v1 on the API listener:
// operators read instances and act on them, and the tools people work user
// tasks with list, assign and complete them. Its bodies are declared once,
// in api/admin/wire, for the server and its clients; its errors are RFC 9457
// problem documents.
//
// The admin routes take SUTRA_ADMIN_TOKEN (api.Admin) alone; the user-task
// routes take SUTRA_API_TOKEN too (api.Tasks), the credential of task
// workers, since working a user task is a task worker's job.
//
// Every call that changes an instance runs as a step through the lanes under
// the replica's admin owner, refused with 409 SUTRA.ADMIN.<OP>.CLAIM_HELD,
// having read and written nothing, when another owner holds the instance.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/admin/wire"
	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clip"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/iso8601"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/operations"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// Store is what the admin API needs from the database (*store.Store).
type Store interface {
	Deploy(ctx context.Context, xml []byte) ([]store.Deployed, error)
	DefinitionXML(ctx context.Context, key string, version int) (string, error)
	FindDecision(ctx context.Context, ref store.DecisionRef) (store.FoundDecision, error)
	DecisionXML(ctx context.Context, id string, version int) (string, error)
	InstanceKeys(ctx context.Context, id string, vars bool) (store.KeyedInstance, error)
	CreateMigration(ctx context.Context, id, definition string, from, to int, mapping map[string]string) error
	MigrationStatus(ctx context.Context, id string) (store.MigrationProgress, error)
	CreateBatch(ctx context.Context, b store.Batch) error
	BatchStatus(ctx context.Context, id string) (store.BatchProgress, error)
	Process(ctx context.Context, key string, version int) (*bpmn.Process, error)
	ListParkedOutbox(ctx context.Context, f store.ParkedFilter) ([]store.ParkedMessage, error)
	RetryParkedOutbox(ctx context.Context, id string) error
	DiscardParkedOutbox(ctx context.Context, id string) error
	RecordAndBroadcastSignal(ctx context.Context, id, name string, vars map[string]any) (store.SignalReach, error)
	StepHistory(ctx context.Context, id string, before int64, limit int) ([]store.HistoryStep, error)
	ReadInstance(ctx context.Context, id string) (store.Instance, error)
}

// Config configures the admin API.
type Config struct {
	// Replica names the admin owner in logs (claims.AdminOwner).
	Replica string
	// OpenAPI is the document served at /v1/openapi.yaml.
	OpenAPI []byte
	// MaxBody caps the body of the calls that carry variables (default
	// 1 MiB).
	MaxBody int64
	// MaxDeployBody caps a deploy's body (default 4 MiB).
	MaxDeployBody int64
	// MaxScan is the most instances one instance list page walks to check
	// the filters no index serves, and one statistics page counts (default
	// 5,000).
	MaxScan int
}

func (c *Config) setDefaults() {
	defaults.Set(&c.MaxBody, 1<<20)
	defaults.Set(&c.MaxDeployBody, 4<<20)
	defaults.Set(&c.MaxScan, 5000)
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Deps are the admin API's collaborators.
type Deps struct {
	Store   Store
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// MigrationCreated, when set, wakes the bulk migration runner.
	MigrationCreated func()
	// BatchCreated, when set, wakes the batch runner.
	BatchCreated func()
	// UseCases are the operations the admin API shares with the other
	// protocols.
	UseCases *usecase.UseCases
}

// API is the admin API, served on an api.Server.
type API struct {
	cfg  Config
	deps Deps
}

// protocol writes the listener's refusals as problems. A 401 challenges
// with Bearer only: a Basic challenge makes a browser ask for credentials
// and then send them with every call to the origin, a form posted from
// another page included.
var protocol = api.Protocol{
	Refuse: func(w http.ResponseWriter, status int, code, msg string) {
		api.WriteProblem(w, status, api.Problem{Code: code, Detail: msg})
	},
	Challenge: `Bearer realm="sutra"`,
}

// New registers the admin API's routes on srv.
func New(srv *api.Server, deps Deps, cfg Config) *API {
	cfg.setDefaults()
	s := &API{cfg: cfg, deps: deps}
	adminRoute := func(pattern, op string, h func(c *adminCall) (answer, error)) {
		srv.Handle(protocol, api.Route{Pattern: pattern, Scopes: api.Admin, BodyLimit: cfg.MaxBody, Handler: s.admin(op, h)})
	}
	userTaskRoute := func(pattern, op string, h func(c *adminCall) (answer, error)) {
		srv.Handle(protocol, api.Route{Pattern: pattern, Scopes: api.Tasks | api.Admin, BodyLimit: cfg.MaxBody, Handler: s.admin(op, h)})
	}
	adminRoute("GET /v1/openapi.yaml", "openapi", s.openapi)
	userTaskRoute("GET /v1/whoami", "whoami", s.whoami)
	srv.Handle(protocol, api.Route{Pattern: "POST /v1/definitions", Scopes: api.Admin, BodyLimit: cfg.MaxDeployBody,
		BodyTypes: []string{"application/xml", "text/xml", "application/octet-stream"}, Handler: s.admin("deploy", s.deploy)})
	adminRoute("GET /v1/definitions", "definitions", s.definitions)
	adminRoute("GET /v1/definitions/{key}/versions/{version}", "definition", s.definitionXML)
	adminRoute("GET /v1/decisions", "decisions", s.listDecisions)
	adminRoute("GET /v1/decisions/{id}/versions/{version}", "decision", s.decisionXML)
	adminRoute("POST /v1/decisions/{id}/evaluation", "evaluate", s.evaluate)
	adminRoute("GET /v1/definitions/{key}/versions/{version}/statistics", "statistics", s.statistics)
	adminRoute("POST /v1/instances", operations.OpStart, s.startInstance)
	adminRoute("GET /v1/instances", "instances", s.listInstances)
	adminRoute("GET /v1/instances/{id}", "instance", s.getInstance)
	adminRoute("POST /v1/instances/{id}/cancel", operations.OpCancel, s.cancel)
	adminRoute("PATCH /v1/instances/{id}/variables", operations.OpVariables, s.setVariables)
	adminRoute("POST /v1/instances/{id}/migrate", operations.OpMigrate, s.migrate)
	adminRoute("POST /v1/instances/{id}/migrate/preflight", "migrate_preflight", s.migratePreflight)
	adminRoute("GET /v1/instances/{id}/history", "history", s.history)
	adminRoute("POST /v1/instances/{id}/modification", operations.OpModify, s.modify)
	adminRoute("POST /v1/instances/{id}/modification/preflight", "modify_preflight", s.modifyPreflight)
	adminRoute("POST /v1/migrations", "migrations", s.startMigration)
	adminRoute("GET /v1/migrations/{id}", "migration", s.getMigration)
	adminRoute("POST /v1/batches", "batches", s.startBatch)
	adminRoute("GET /v1/batches/{id}", "batch", s.getBatch)
	adminRoute("GET /v1/incidents", "incidents", s.listIncidents)
	adminRoute("POST /v1/incidents/{id}/retry", operations.OpRetry, s.retryIncident)
	adminRoute("POST /v1/messages", "message", s.publishMessage)
	adminRoute("POST /v1/signals", "signal", s.broadcastSignal)
	userTaskRoute("GET /v1/user-tasks", "user_tasks", s.listUserTasks)
	userTaskRoute("GET /v1/user-tasks/{id}", "user_task", s.getUserTask)
	userTaskRoute("GET /v1/user-tasks/{id}/form", "user_task_form", s.getUserTaskForm)
	userTaskRoute("POST /v1/user-tasks/{id}/assignment", "assign", s.assignUserTask)
	userTaskRoute("PATCH /v1/user-tasks/{id}", "update", s.updateUserTask)
	userTaskRoute("POST /v1/user-tasks/{id}/completion", "complete", s.completeUserTask)
	adminRoute("GET /v1/outbox/parked", "outbox_parked", s.listParked)
	adminRoute("POST /v1/outbox/parked/{id}/retry", "outbox_retry", s.retryParked)
	adminRoute("POST /v1/outbox/parked/{id}/discard", "outbox_discard", s.discardParked)
	return s
}

// adminCall is one admin request being served.
type adminCall struct {
	w          http.ResponseWriter
	r          *http.Request
	caller     string
	instanceID string
}

// answer is a successful admin answer: a status and a JSON body (or, with
// raw set, that body as it is).
type answer struct {
	status      int
	body        any
	raw         []byte
	contentType string
}

var callerName = regexp.MustCompile(`^[A-Za-z0-9._@:/ -]{1,64}$`)

// admin wraps an admin handler: the caller's name, the problem answers,
// the metric and the log line every admin action leaves. The listener has
// checked the caller's token.
func (s *API) admin(op string, h func(c *adminCall) (answer, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := &adminCall{w: w, r: r, caller: "anonymous"}
		if api.ScopeOf(r) != 0 {
			c.caller = "token"
		}
		if name := r.Header.Get("X-Sutra-Caller"); callerName.MatchString(name) {
			c.caller = name
		}
		ans, err := h(c)
		code := "OK"
		if err != nil {
			p := asProblem(err)
			if p.status >= http.StatusInternalServerError { // the answer left the cause out
				s.deps.Logger.Error("admin call failed", "op", op, "path", clip.String(r.URL.Path), "code", fault.Code(err), "err", err)
			}
			code = p.p.Code
			if p.p.InstanceID == "" {
				p.p.InstanceID = c.instanceID
			}
			api.WriteProblem(w, p.status, p.p)
		} else if ans.raw != nil {
			w.Header().Set("Content-Type", ans.contentType)
			w.WriteHeader(ans.status)
			_, _ = w.Write(ans.raw)
		} else if ans.body != nil {
			api.WriteJSON(w, ans.status, ans.body)
		} else {
			w.WriteHeader(ans.status)
		}
		s.deps.Metrics.AdminRequests.WithLabelValues(op, code).Inc()
		if r.Method != http.MethodGet {
			s.deps.Logger.Info("admin call", "op", op, "instance_id", c.instanceID, "owner", claims.AdminOwner(s.cfg.Replica),
				"code", code, "caller", c.caller, "path", r.URL.Path)
		}
	}
}

// claimHeld answers op's refusal by a held claim 409
// SUTRA.ADMIN.<OP>.CLAIM_HELD: a race to retry, never a wait.
func claimHeld(op string, err error) error {
	if code := fault.Code(err); code == operations.ClaimHeld(op) {
		return refuse(http.StatusConflict, code, fault.Reason(err))
	}
	return err
}

// conn is how use cases hold c's database connection: the one the listener
// took for it. A step runs on the admin lane with the lanes' connections:
// the call gives its body bytes and its API connection back while it
// waits, so that admin steps slow up to the step deadline cannot starve
// the task API.
func (s *API) conn(c *adminCall) usecase.Conn {
	if cl := api.CallOf(c.r); cl != nil {
		return usecase.Conn{Idle: cl.Idle}
	}
	return usecase.Conn{}
}

// decodeAdmin reads a JSON body into v (see decode); an empty body leaves v.
func (s *API) decodeAdmin(c *adminCall, v any) error {
	if c.r.ContentLength == 0 {
		return nil
	}
	return api.Decode(c.r, v)
}

func (s *API) openapi(*adminCall) (answer, error) {
	return answer{status: http.StatusOK, raw: s.cfg.OpenAPI, contentType: "application/yaml"}, nil
}

func (s *API) deploy(c *adminCall) (answer, error) {
	xml, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, s.cfg.MaxDeployBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return answer{}, err
	case err != nil:
		return answer{}, api.Invalidf("reading the file: %v", err)
	}
	ds, err := s.deps.Store.Deploy(c.r.Context(), xml)
	if err != nil {
		return answer{}, err
	}
	body := wire.Deployment{Kind: ds[0].Kind, Definitions: []wire.Deployed{}, Decisions: []wire.DeployedDecision{}}
	status := http.StatusOK
	for _, d := range ds {
		if d.Kind == store.KindDMN {
			body.Decisions = append(body.Decisions, wire.DeployedDecision{DecisionID: d.Key, Name: d.Name, Version: d.Version,
				VersionTag: d.VersionTag, Unchanged: !d.Created})
		} else {
			body.Definitions = append(body.Definitions, wire.Deployed{Key: d.Key, Version: d.Version, ZeebeKey: d.ZeebeKey, Unchanged: !d.Created})
		}
		if d.Created {
			status = http.StatusCreated
		}
	}
	body.Deployed = wire.Deployed{Key: ds[0].Key, Version: ds[0].Version, ZeebeKey: ds[0].ZeebeKey, Unchanged: status == http.StatusOK}
	return answer{status: status, body: body}, nil
}

// listDecisions lists deployed decisions by id, then version; the cursor
// of a page is its last decision's id and version ("id:version").
func (s *API) listDecisions(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	f := store.DecisionFilter{Limit: limit}
	if after != "" {
		i := strings.LastIndexByte(after, ':')
		v, err := strconv.Atoi(after[i+1:])
		if i < 1 || err != nil {
			return answer{}, api.Invalidf("after %q is not a decision cursor (id:version)", after)
		}
		if err := api.CheckInt32("after's version", v); err != nil {
			return answer{}, err
		}
		f.AfterID, f.AfterVersion = after[:i], v
	}
	list, err := s.deps.UseCases.Decisions(c.r.Context(), f)
	if err != nil {
		return answer{}, err
	}
	return pageOf("decisions", mapAll(list, decisionOf), limit, func(d wire.Decision) string { return d.DecisionID + ":" + strconv.Itoa(d.Version) }), nil
}

// pathVersion is the version a path names: 404 when it is no number, 400
// when it is out of the store's range.
func pathVersion(c *adminCall) (int, error) {
	v, err := strconv.Atoi(c.r.PathValue("version"))
	if err != nil {
		return 0, refuse(http.StatusNotFound, fault.AdminNotFound, "no such version")
	}
	return v, api.CheckInt32("version", v)
}

func (s *API) definitions(c *adminCall) (answer, error) {
	defs, err := s.deps.UseCases.Definitions(c.r.Context())
	return answer{status: http.StatusOK, body: wire.Definitions{Definitions: mapAll(defs, definitionVersionsOf)}}, err
}

func (s *API) definitionXML(c *adminCall) (answer, error) {
	v, err := pathVersion(c)
	if err != nil {
		return answer{}, err
	}
	xml, err := s.deps.Store.DefinitionXML(c.r.Context(), c.r.PathValue("key"), v)
	return answer{status: http.StatusOK, raw: []byte(xml), contentType: "application/xml"}, err
}

// whoami tells a client (the console) what its token opens, so that it
// shows an operator the admin pages and a task worker's user the user tasks
// alone.
func (s *API) whoami(c *adminCall) (answer, error) {
	scope := "open"
	switch api.ScopeOf(c.r) {
	case api.Admin:
		scope = "admin"
	case api.Tasks:
		scope = "tasks"
	}
	return answer{status: http.StatusOK, body: wire.WhoAmI{Scope: scope}}, nil
}

// statisticsPage is the active instances one statistics call counts by
// default (store.ElementStatistics).
const statisticsPage = 500

func (s *API) statistics(c *adminCall) (answer, error) {
	v, err := pathVersion(c)
	if err != nil {
		return answer{}, err
	}
	limit := min(statisticsPage, s.cfg.MaxScan)
	if l := c.r.URL.Query().Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > s.cfg.MaxScan {
			return answer{}, api.Invalidf("limit %q is not between 1 and %d (SUTRA_API_MAX_SCAN)", l, s.cfg.MaxScan)
		}
	}
	list, walked, next, err := s.deps.UseCases.ElementStatistics(c.r.Context(), c.r.PathValue("key"), v, c.r.URL.Query().Get("after"), limit)
	if err != nil {
		return answer{}, err
	}
	st := wire.Statistics{Elements: mapAll(list, elementStatisticsOf), Instances: walked}
	if next != "" {
		st.Next = &next
	}
	return answer{status: http.StatusOK, body: st}, nil
}

func (s *API) startInstance(c *adminCall) (answer, error) {
	var req wire.StartRequest
	if err := api.Decode(c.r, &req); err != nil {
		return answer{}, err
	}
	if err := api.CheckInt32("version", req.Version); err != nil {
		return answer{}, err
	}
	if req.Definition == "" || req.Version < 0 {
		return answer{}, api.Invalidf("definition is required and version, when set, positive")
	}
	if err := api.CheckText("instance_id", req.InstanceID); err != nil {
		return answer{}, err
	}
	if req.InstanceID == "" {
		req.InstanceID = api.NewID()
	}
	c.instanceID = req.InstanceID
	if err := claimHeld(operations.OpStart, s.deps.UseCases.StartInstance(c.r.Context(), s.conn(c), req.InstanceID, req.Definition, req.Version, req.Variables)); err != nil {
		return answer{}, err
	}
	in, err := s.deps.Store.InstanceKeys(c.r.Context(), req.InstanceID, false)
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusCreated, body: wire.Started{InstanceID: req.InstanceID, ZeebeKey: in.Key}}, nil
}

func (s *API) getInstance(c *adminCall) (answer, error) {
	c.instanceID = c.r.PathValue("id")
	d, err := s.deps.UseCases.Instance(c.r.Context(), c.instanceID)
	if err != nil {
		if isNotFound(err) {
			return answer{}, refuse(http.StatusNotFound, fault.NotFound, "instance "+c.instanceID+" does not exist")
		}
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: instanceOf(d)}, nil
}

// page reads limit (default 50, at most 500) and the cursor after.
func page(c *adminCall) (int, string, error) {
	q := c.r.URL.Query()
	limit := 50
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			return 0, "", api.Invalidf("limit %q is not between 1 and 500", l)
		}
		limit = n
	}
	return limit, q.Get("after"), nil
}

func optBool(c *adminCall, name string) (*bool, error) {
	v := c.r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, api.Invalidf("%s %q is not true or false", name, v)
	}
	return &b, nil
}

func (s *API) listInstances(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	inc, err := optBool(c, "has_incident")
	if err != nil {
		return answer{}, err
	}
	q := c.r.URL.Query()
	f := store.InstanceFilter{Definition: q.Get("definition"), Status: q.Get("status"), HasIncident: inc, Limit: limit, After: after}
	if v := q.Get("version"); v != "" {
		if f.Version, err = strconv.Atoi(v); err != nil || f.Version < 1 {
			return answer{}, api.Invalidf("version %q is not a positive number", v)
		}
		if err := api.CheckInt32("version", f.Version); err != nil {
			return answer{}, err
		}
	}
	if f.Variable = q.Get("variable"); f.Variable != "" {
		f.Value = json.RawMessage(q.Get("value"))
		if !json.Valid(f.Value) {
			return answer{}, api.Invalidf("value %q of variable %s is not JSON (a string is quoted)", q.Get("value"), f.Variable)
		}
	} else if q.Has("value") {
		return answer{}, api.Invalidf("value needs variable, the name of the variable it is compared with")
	}
	for name, t := range map[string]*time.Time{"created_after": &f.CreatedAfter, "created_before": &f.CreatedBefore} {
		if v := q.Get(name); v != "" {
			if *t, err = time.Parse(time.RFC3339, v); err != nil {
				return answer{}, api.Invalidf("%s %q is not an RFC 3339 time", name, v)
			}
		}
	}
	f.Key, f.WaitingAt = q.Get("key"), q.Get("waiting_at")
	// The times sort newest first unless asked otherwise; ids go up.
	switch f.Sort = q.Get("sort"); f.Sort {
	case "", "id":
		f.Sort = store.SortID
	case store.SortStart, store.SortEnd:
		f.Desc = true
		if after != "" {
			if _, _, err := store.InstanceCursor(after); err != nil {
				return answer{}, api.Invalidf("%v", err)
			}
		}
	default:
		return answer{}, api.Invalidf("sort %q is not id, start or end", f.Sort)
	}
	switch o := q.Get("order"); o {
	case "":
	case "asc", "desc":
		f.Desc = o == "desc"
	default:
		return answer{}, api.Invalidf("order %q is not asc or desc", o)
	}
	total, err := optBool(c, "total")
	if err != nil {
		return answer{}, err
	}
	f.Scan = s.cfg.MaxScan
	p, err := s.deps.UseCases.SearchInstances(c.r.Context(), f)
	if err != nil {
		return answer{}, err
	}
	body := map[string]any{}
	if total != nil && *total {
		n, err := s.deps.UseCases.CountInstances(c.r.Context(), f)
		if err != nil {
			return answer{}, err
		}
		body["total"] = wire.InstanceCount{Count: n.Count, Exact: n.Exact}
	}
	// A page the walk ended may hold fewer instances than the limit, and
	// still name the next one.
	var next *string
	if p.Next != "" {
		next = &p.Next
	}
	body["instances"], body["next"] = mapAll(p.Instances, instanceSummaryOf), next
	return answer{status: http.StatusOK, body: body}, nil
}

// cancel cancels an instance: 200 cancelled, or 202 cancelling while user
// tasks in it run their canceling listeners (the instance ends cancelled
// once their jobs are done). A cancel of a cancelling instance answers the
// same 202 and changes nothing.
func (s *API) cancel(c *adminCall) (answer, error) {
	c.instanceID = c.r.PathValue("id")
	if err := claimHeld(operations.OpCancel, s.deps.UseCases.CancelInstance(c.r.Context(), s.conn(c), c.instanceID)); err != nil {
		return answer{}, err
	}
	in, err := s.deps.Store.InstanceKeys(c.r.Context(), c.instanceID, false)
	if err != nil {
		return answer{}, err
	}
	if in.Status == string(engine.StatusCancelling) {
		return answer{status: http.StatusAccepted, body: wire.Cancelled{InstanceID: c.instanceID, Status: in.Status}}, nil
	}
	return answer{status: http.StatusOK, body: wire.Cancelled{InstanceID: c.instanceID, Status: string(engine.StatusCancelled)}}, nil
}

func (s *API) setVariables(c *adminCall) (answer, error) {
	c.instanceID = c.r.PathValue("id")
	var vars map[string]any
	if err := api.Decode(c.r, &vars); err != nil {
		return answer{}, err
	}
	if err := claimHeld(operations.OpVariables, s.deps.UseCases.SetVariables(c.r.Context(), s.conn(c), c.instanceID, vars)); err != nil {
		return answer{}, err
	}
	d, err := s.deps.UseCases.Instance(c.r.Context(), c.instanceID)
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: wire.VariablesSet{InstanceID: c.instanceID, Variables: d.Variables}}, nil
}

// migrateRequest reads the instance and the body of a migration or of its
// preflight, which take the same request.
func migrateRequest(c *adminCall) (wire.MigrateRequest, error) {
	c.instanceID = c.r.PathValue("id")
	var req wire.MigrateRequest
	if err := api.Decode(c.r, &req); err != nil {
		return req, err
	}
	if req.TargetVersion < 1 {
		return req, api.Invalidf("target_version is required")
	}
	if err := api.CheckInt32("target_version", req.TargetVersion); err != nil {
		return req, err
	}
	return req, nil
}

func (s *API) migrate(c *adminCall) (answer, error) {
	req, err := migrateRequest(c)
	if err != nil {
		return answer{}, err
	}
	if err := claimHeld(operations.OpMigrate, s.deps.UseCases.MigrateInstance(c.r.Context(), s.conn(c), c.instanceID, req.TargetVersion, req.Mapping)); err != nil {
		return answer{}, err
	}
	d, err := s.deps.UseCases.Instance(c.r.Context(), c.instanceID)
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: wire.Migrated{InstanceID: c.instanceID,
		Definition: wire.DefinitionRef{Key: d.DefinitionKey, Version: d.DefinitionVersion}}}, nil
}

func (s *API) startMigration(c *adminCall) (answer, error) {
	var req wire.MigrationRequest
	if err := api.Decode(c.r, &req); err != nil {
		return answer{}, err
	}
	for _, f := range [...]struct {
		name string
		v    int
	}{{"from_version", req.FromVersion}, {"to_version", req.ToVersion}} {
		if err := api.CheckInt32(f.name, f.v); err != nil {
			return answer{}, err
		}
	}
	if req.Definition == "" || req.FromVersion < 1 || req.ToVersion < 1 {
		return answer{}, api.Invalidf("definition, from_version and to_version are required")
	}
	id := api.NewID()
	if err := s.deps.Store.CreateMigration(c.r.Context(), id, req.Definition, req.FromVersion, req.ToVersion, req.Mapping); err != nil {
		return answer{}, err
	}
	if s.deps.MigrationCreated != nil {
		s.deps.MigrationCreated()
	}
	return answer{status: http.StatusAccepted, body: wire.MigrationStarted{ID: id}}, nil
}

func (s *API) getMigration(c *adminCall) (answer, error) {
	m, err := s.deps.Store.MigrationStatus(c.r.Context(), c.r.PathValue("id"))
	return answer{status: http.StatusOK, body: migrationOf(m)}, err
}

// startBatch records a batch operation (202 with its id); the batch runner
// works it, each instance through the same admin operation as a single
// call.
func (s *API) startBatch(c *adminCall) (answer, error) {
	var req wire.BatchRequest
	if err := api.Decode(c.r, &req); err != nil {
		return answer{}, err
	}
	b := store.Batch{ID: api.NewID(), Operation: req.Operation, IDs: req.IDs, TargetVersion: req.TargetVersion, Mapping: req.Mapping}
	switch req.Operation {
	case operations.OpCancel, operations.OpRetry:
		if req.TargetVersion != 0 || req.Mapping != nil {
			return answer{}, api.Invalidf("target_version and mapping are for a migrate batch")
		}
	case operations.OpMigrate:
		if req.TargetVersion < 1 {
			return answer{}, api.Invalidf("target_version is required to migrate")
		}
	default:
		return answer{}, api.Invalidf("operation %q is none of cancel, retry, migrate", req.Operation)
	}
	switch {
	case (req.Filter == nil) == (req.IDs == nil):
		return answer{}, api.Invalidf("name the instances by filter or by ids, one of the two")
	case req.IDs != nil && (len(req.IDs) == 0 || len(req.IDs) > wire.MaxBatchIDs):
		return answer{}, api.Invalidf("ids names %d instances: name 1 to %d, or use a filter", len(req.IDs), wire.MaxBatchIDs)
	case req.Filter != nil:
		f, err := batchFilter(*req.Filter)
		if err != nil {
			return answer{}, err
		}
		if req.Operation == operations.OpRetry {
			yes := true // a retry has nothing to do on the others
			f.HasIncident = &yes
		}
		b.Filter = &f
	}
	for _, id := range req.IDs {
		if id == "" {
			return answer{}, api.Invalidf("ids holds an empty id")
		}
	}
	if err := s.deps.Store.CreateBatch(c.r.Context(), b); err != nil {
		return answer{}, err
	}
	if s.deps.BatchCreated != nil {
		s.deps.BatchCreated()
	}
	return answer{status: http.StatusAccepted, body: wire.BatchStarted{ID: b.ID}}, nil
}

// batchFilter checks a batch's filter as the instance list checks its own.
func batchFilter(in wire.BatchFilter) (store.InstanceFilter, error) {
	f := store.InstanceFilter{Definition: in.Definition, Version: in.Version, Status: in.Status, HasIncident: in.HasIncident,
		Variable: in.Variable, Value: in.Value}
	if in.Version < 0 {
		return f, api.Invalidf("version %d is not a positive number", in.Version)
	}
	if f.Variable != "" && len(f.Value) == 0 {
		return f, api.Invalidf("variable needs value, the JSON it must equal")
	} else if f.Variable == "" && len(f.Value) > 0 {
		return f, api.Invalidf("value needs variable, the name of the variable it is compared with")
	}
	if in.CreatedAfter != nil {
		f.CreatedAfter = *in.CreatedAfter
	}
	if in.CreatedBefore != nil {
		f.CreatedBefore = *in.CreatedBefore
	}
	return f, nil
}

func (s *API) getBatch(c *adminCall) (answer, error) {
	b, err := s.deps.Store.BatchStatus(c.r.Context(), c.r.PathValue("id"))
	return answer{status: http.StatusOK, body: batchOf(b)}, err
}

func (s *API) listIncidents(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	var from int64
	if after != "" {
		if from, err = strconv.ParseInt(after, 10, 64); err != nil {
			return answer{}, api.Invalidf("after %q is not an incident id", after)
		}
	}
	open, err := optBool(c, "open")
	if err != nil {
		return answer{}, err
	}
	list, err := s.deps.UseCases.Incidents(c.r.Context(), store.IncidentFilter{Open: open, InstanceID: c.r.URL.Query().Get("instance_id"),
		Limit: limit, After: from})
	if err != nil {
		return answer{}, err
	}
	out := mapAll(list, incidentOf)
	for i := range out {
		if d := out[i].Definition; d != nil {
			// The store caches the parsed processes: one parse per version.
			p, err := s.deps.Store.Process(c.r.Context(), d.Key, d.Version)
			if err != nil {
				return answer{}, err
			}
			out[i].ProcessName = p.Name
			if el := p.Element(out[i].Element); el != nil {
				out[i].ElementName = el.Name
			}
		}
	}
	return pageOf("incidents", out, limit, func(i wire.Incident) string { return strconv.FormatInt(i.ID, 10) }), nil
}

func (s *API) retryIncident(c *adminCall) (answer, error) {
	var req wire.RetryRequest
	if err := s.decodeAdmin(c, &req); err != nil {
		return answer{}, err
	}
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil || req.Retries < 0 {
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, "no such incident")
	}
	if err := api.CheckInt32("retries", req.Retries); err != nil {
		return answer{}, err
	}
	inc, err := s.deps.UseCases.ResolveIncident(c.r.Context(), s.conn(c), usecase.IncidentRetry{ID: id, Variables: req.Variables, Retries: &req.Retries})
	c.instanceID = inc.InstanceID
	if err != nil {
		return answer{}, claimHeld(operations.OpRetry, err)
	}
	return answer{status: http.StatusOK, body: wire.IncidentRetried{IncidentID: id, InstanceID: inc.InstanceID, Resolved: true}}, nil
}

// publishMessage publishes a relay to the relay exchange with confirms: a
// caller with no AMQP client still goes through the spine.
func (s *API) publishMessage(c *adminCall) (answer, error) {
	var req wire.MessageRequest
	if err := api.Decode(c.r, &req); err != nil {
		return answer{}, err
	}
	id, err := s.deps.UseCases.PublishMessage(c.r.Context(), usecase.Message(req))
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusAccepted, body: wire.MessagePublished{MessageID: id}}, nil
}

// broadcastSignal broadcasts a signal: it answers once a relay to every
// waiting instance and every definition the signal starts is durable in the
// outbox; the steps run after, each under its own claim.
func (s *API) broadcastSignal(c *adminCall) (answer, error) {
	var req wire.SignalRequest
	if err := api.Decode(c.r, &req); err != nil {
		return answer{}, err
	}
	if req.Name == "" {
		return answer{}, api.Invalidf("name is required")
	}
	for _, f := range [...]struct{ name, v string }{{"name", req.Name}, {"signal_id", req.SignalID}} {
		if err := api.CheckText(f.name, f.v); err != nil {
			return answer{}, err
		}
	}
	id := req.SignalID
	if id == "" {
		id = api.NewID()
	}
	// Recorded before the answer: a broadcast cut short by a crash is
	// finished after it, and a retry with the same signal_id writes
	// nothing twice.
	reach, err := s.deps.Store.RecordAndBroadcastSignal(c.r.Context(), id, req.Name, req.Variables)
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: wire.SignalBroadcast{SignalID: id, Subscriptions: reach.Subscriptions, Starts: reach.Starts}}, nil
}

func userTaskID(c *adminCall) (int64, error) {
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, refuse(http.StatusNotFound, fault.TaskNotFound, "no such user task")
	}
	return id, nil
}

func (s *API) listUserTasks(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	var from int64
	if after != "" {
		if from, err = strconv.ParseInt(after, 10, 64); err != nil {
			return answer{}, api.Invalidf("after %q is not a user task id", after)
		}
	}
	q := c.r.URL.Query()
	if st := q.Get("state"); st != "" && st != "created" && st != "assigning" && st != "updating" && st != "completing" {
		return answer{}, api.Invalidf("state %q is not created, assigning, updating or completing", st)
	}
	assigned, err := optBool(c, "assigned")
	if err != nil {
		return answer{}, err
	}
	list, err := s.deps.UseCases.SearchUserTasks(c.r.Context(), store.UserTaskFilter{Assignee: q.Get("assignee"),
		CandidateGroup: q.Get("candidate_group"), CandidateUser: q.Get("candidate_user"), State: q.Get("state"), Assigned: assigned,
		Limit: limit, After: from})
	if err != nil {
		return answer{}, err
	}
	out := make([]wire.UserTask, len(list))
	for i, t := range list {
		out[i] = userTaskOf(t)
	}
	return pageOf("user_tasks", out, limit, func(t wire.UserTask) string { return t.ID }), nil
}

// userTaskOf is what the admin API shows of a user task.
func userTaskOf(t usecase.KeyedUserTask) wire.UserTask {
	id := strconv.FormatInt(t.ID, 10)
	return wire.UserTask{ID: id, ZeebeKey: id, InstanceID: t.InstanceID, Element: t.Element, Name: t.Name, ProcessName: t.ProcessName,
		Definition: wire.DefinitionRef{Key: t.DefinitionKey, Version: t.DefinitionVersion}, Assignee: t.Assignee,
		CandidateGroups: t.CandidateGroups, CandidateUsers: t.CandidateUsers, FormKey: t.FormKey, FormID: t.FormID, DueDate: t.DueDate,
		FollowUpDate: t.FollowUpDate, Priority: t.Priority, Variables: t.Variables, State: t.State, CreatedAt: t.CreatedAt}
}

// pageOf answers one page of a list under key: a full page names the cursor of
// the next one (the last item's id); an empty list is [], never null.
func pageOf[T any](key string, list []T, limit int, id func(T) string) answer {
	var next *string
	if len(list) == limit {
		n := id(list[len(list)-1])
		next = &n
	}
	if list == nil {
		list = []T{}
	}
	return answer{status: http.StatusOK, body: map[string]any{key: list, "next": next}}
}

// userTask reads the user task the call's path names: 404
// SUTRA.TASK.NOT_FOUND when there is none.
func (s *API) userTask(c *adminCall) (wire.UserTask, error) {
	id, err := userTaskID(c)
	if err != nil {
		return wire.UserTask{}, err
	}
	u, err := s.deps.UseCases.UserTask(c.r.Context(), id)
	if isNotFound(err) {
		return wire.UserTask{}, refuse(http.StatusNotFound, fault.TaskNotFound, fmt.Sprintf("user task %d does not exist", id))
	}
	if err != nil {
		return wire.UserTask{}, err
	}
	return userTaskOf(u), nil
}

func (s *API) getUserTask(c *adminCall) (answer, error) {
	u, err := s.userTask(c)
	return answer{status: http.StatusOK, body: u}, err
}

// getUserTaskForm answers the Camunda Form a user task names, when the
// BPMN file embeds it (zeebe:userTaskForm): what a task list renders. A
// task with no form, or one deployed apart (formId), is a 404.
func (s *API) getUserTaskForm(c *adminCall) (answer, error) {
	u, err := s.userTask(c)
	if err != nil {
		return answer{}, err
	}
	if u.FormKey == nil {
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, fmt.Sprintf("user task %s names no embedded form", u.ID))
	}
	file, err := s.deps.Store.DefinitionXML(c.r.Context(), u.Definition.Key, u.Definition.Version)
	if err != nil {
		return answer{}, err
	}
	form, ok, err := bpmn.EmbeddedForm([]byte(file), *u.FormKey)
	switch {
	case err != nil:
		return answer{}, err
	case !ok || !json.Valid([]byte(form)):
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, fmt.Sprintf("form %s of user task %s is not embedded in its BPMN file", *u.FormKey, u.ID))
	}
	return answer{status: http.StatusOK, raw: []byte(form), contentType: "application/json"}, nil
}

func (s *API) assignUserTask(c *adminCall) (answer, error) {
	id, err := userTaskID(c)
	if err != nil {
		return answer{}, err
	}
	var req wire.AssignmentRequest
	if err := api.Decode(c.r, &req); err != nil {
		return answer{}, err
	}
	deferred, err := s.deps.UseCases.AssignUserTask(c.r.Context(), c.caller, id, req.Assignee)
	return userTaskChanged(id, deferred, wire.AssignmentAccepted{State: "assigning"}, err)
}

// userTaskChanged answers a change of user task id: 202 with accepted when
// it waits for the task's listeners, else 204.
func userTaskChanged(id int64, deferred bool, accepted any, err error) (answer, error) {
	switch {
	case isNotFound(err):
		return answer{}, userTaskGone(id)
	case err != nil:
		return answer{}, err
	case deferred:
		return answer{status: http.StatusAccepted, body: accepted}, nil
	}
	return answer{status: http.StatusNoContent}, nil
}

// userTaskGone refuses a call on user task id that is missing or busy.
func userTaskGone(id int64) error {
	return refuse(http.StatusNotFound, fault.TaskNotFound, fmt.Sprintf("user task %d does not exist, or is assigning, updating or completing", id))
}

// updateUserTask changes the candidates, dates or priority of a user task:
// at once (204) without updating listeners; with some, the update is
// recorded and answered 202, to take effect once their jobs are done.
func (s *API) updateUserTask(c *adminCall) (answer, error) {
	id, err := userTaskID(c)
	if err != nil {
		return answer{}, err
	}
	var req wire.UserTaskUpdate
	if err := api.Decode(c.r, &req); err != nil {
		return answer{}, err
	}
	if err := checkUserTaskUpdate(req); err != nil {
		return answer{}, err
	}
	deferred, err := s.deps.UseCases.UpdateUserTask(c.r.Context(), c.caller, id, engine.UserTaskChanges(req))
	return userTaskChanged(id, deferred, wire.UpdateAccepted{State: "updating"}, err)
}

// checkUserTaskUpdate refuses an update that changes nothing, names an
// empty candidate, a date that is not RFC 3339 with a zone, or a priority
// outside 0 to 100 (what the engine accepts from the model).
func checkUserTaskUpdate(u wire.UserTaskUpdate) error {
	if u == (wire.UserTaskUpdate{}) {
		return api.Invalidf("the update changes nothing: name candidate_groups, candidate_users, due_date, follow_up_date or priority")
	}
	for name, list := range map[string]*[]string{"candidate_groups": u.CandidateGroups, "candidate_users": u.CandidateUsers} {
		if list == nil {
			continue
		}
		for _, v := range *list {
			if strings.TrimSpace(v) == "" {
				return api.Invalidf("%s holds an empty name", name)
			}
		}
	}
	for name, d := range map[string]*string{"due_date": u.DueDate, "follow_up_date": u.FollowUpDate} {
		if d == nil || *d == "" {
			continue
		}
		if _, err := iso8601.ParseDateTime(*d); err != nil {
			return api.Invalidf("%s %q: %s", name, *d, fault.Reason(err))
		}
	}
	if u.Priority != nil {
		if _, err := bpmn.UserTaskPriority(float64(*u.Priority)); err != nil {
			return api.Invalidf("%v", err)
		}
	}
	return nil
}

// completeUserTask records the completion with its relay, durably, and
// answers 204 then: the completion re-enters the instance as a fresh
// delivery, exactly like an external task's (handed to the lanes at once,
// the outbox relay its fallback).
func (s *API) completeUserTask(c *adminCall) (answer, error) {
	id, err := userTaskID(c)
	if err != nil {
		return answer{}, err
	}
	var req wire.CompletionRequest
	if err := s.decodeAdmin(c, &req); err != nil {
		return answer{}, err
	}
	// The user is who the call names (X-Sutra-Caller), as in Camunda's
	// Tasklist: only the assignee completes an assigned task.
	user := c.r.Header.Get("X-Sutra-Caller")
	if !callerName.MatchString(user) {
		user = ""
	}
	_, err = s.deps.UseCases.RecordTaskOutcome(c.r.Context(), usecase.Conn{}, store.TaskReport{TaskID: id, Worker: "user:" + c.caller,
		Kind: store.TaskCompleted, Variables: req.Variables, Human: true, User: user, Override: req.Override})
	var notAssignee *store.NotAssigneeError
	switch {
	case isNotFound(err):
		return answer{}, userTaskGone(id)
	case errors.As(err, &notAssignee):
		return answer{}, refuse(http.StatusForbidden, fault.TaskNotAssignee, fmt.Sprintf(
			"%s; this call names %q (X-Sutra-Caller): complete it as the assignee, assign it first, or set \"override\": true", notAssignee, user))
	}
	if err != nil {
		return answer{}, err
	}
	if req.Override {
		s.deps.Logger.Info("user task completed with override: its assignee, if any, was not asked", "task_id", id, "caller", c.caller)
	}
	return answer{status: http.StatusNoContent}, nil
}

// listParked lists the outbox rows parked after the broker returned them on
// every attempt (SUTRA.OUTBOX.UNROUTABLE), in id order.
func (s *API) listParked(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	list, err := s.deps.Store.ListParkedOutbox(c.r.Context(), store.ParkedFilter{InstanceID: c.r.URL.Query().Get("instance_id"),
		After: after, Limit: limit})
	if err != nil {
		return answer{}, err
	}
	return pageOf("parked", mapAll(list, parkedMessageOf), limit, func(p wire.ParkedMessage) string { return p.ID }), nil
}

// retryParked puts a parked row back in the outbox, behind every row of its
// class written since: any replica's publisher publishes it within
// SUTRA_OUTBOX_POLL_INTERVAL, and parks it again if it is still returned
// SUTRA_OUTBOX_MAX_ATTEMPTS times.
func (s *API) retryParked(c *adminCall) (answer, error) {
	return s.settleParked(c, "requeued", s.deps.Store.RetryParkedOutbox)
}

// discardParked deletes a parked row: its message is never published.
func (s *API) discardParked(c *adminCall) (answer, error) {
	return s.settleParked(c, "discarded", s.deps.Store.DiscardParkedOutbox)
}

func (s *API) settleParked(c *adminCall, status string, act func(ctx context.Context, id string) error) (answer, error) {
	id := c.r.PathValue("id")
	err := act(c.r.Context(), id)
	if isNotFound(err) {
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, fmt.Sprintf("no parked outbox row %q", id))
	}
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: wire.ParkedSettled{ID: id, Status: status}}, nil
}
