package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/sutra-run/worker/admin"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/store"
)

// The admin API under /v1: operators read instances and act on them. Every
// call that changes an instance runs as a step through the lanes under the
// replica's admin owner, refused with 409 SUTRA.ADMIN.<OP>.CLAIM_HELD, having
// read and written nothing, when another owner holds the instance.

func (s *Server) adminRoutes() {
	s.handle("GET /v1/openapi.yaml", s.admin("openapi", s.openapi))
	s.handle("POST /v1/definitions", s.admin("deploy", s.deploy))
	s.handle("GET /v1/definitions", s.admin("definitions", s.definitions))
	s.handle("GET /v1/definitions/{key}/versions/{version}", s.admin("definition", s.definitionXML))
	s.handle("POST /v1/instances", s.admin(admin.OpStart, s.startInstance))
	s.handle("GET /v1/instances", s.admin("instances", s.listInstances))
	s.handle("GET /v1/instances/{id}", s.admin("instance", s.getInstance))
	s.handle("POST /v1/instances/{id}/cancel", s.admin(admin.OpCancel, s.cancel))
	s.handle("PATCH /v1/instances/{id}/variables", s.admin(admin.OpVariables, s.setVariables))
	s.handle("POST /v1/instances/{id}/migrate", s.admin(admin.OpMigrate, s.migrate))
	s.handle("POST /v1/migrations", s.admin("migrations", s.startMigration))
	s.handle("GET /v1/migrations/{id}", s.admin("migration", s.getMigration))
	s.handle("GET /v1/incidents", s.admin("incidents", s.listIncidents))
	s.handle("POST /v1/incidents/{id}/retry", s.admin(admin.OpRetry, s.retryIncident))
	s.handle("POST /v1/messages", s.admin("message", s.publishMessage))
	s.handle("GET /v1/user-tasks", s.admin("user_tasks", s.listUserTasks))
	s.handle("GET /v1/user-tasks/{id}", s.admin("user_task", s.getUserTask))
	s.handle("POST /v1/user-tasks/{id}/assignment", s.admin("assign", s.assignUserTask))
	s.handle("POST /v1/user-tasks/{id}/completion", s.admin("complete", s.completeUserTask))
	s.handle("GET /v1/outbox/parked", s.admin("outbox_parked", s.listParked))
	s.handle("POST /v1/outbox/parked/{id}/retry", s.admin("outbox_retry", s.retryParked))
	s.handle("POST /v1/outbox/parked/{id}/discard", s.admin("outbox_discard", s.discardParked))
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

// admin wraps an admin handler: the token (or the explicit insecure mode),
// the caller's name, the problem answers, the metric and the log line every
// admin action leaves.
func (s *Server) admin(op string, h func(c *adminCall) (answer, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := &adminCall{w: w, r: r, caller: "anonymous"}
		if s.cfg.Token != "" {
			c.caller = "token"
		}
		if name := r.Header.Get("X-Sutra-Caller"); callerName.MatchString(name) {
			c.caller = name
		}
		var ans answer
		err := error(refuse(http.StatusForbidden, fault.AdminDisabled,
			"the admin API is off: set SUTRA_API_TOKEN (or SUTRA_ADMIN_INSECURE=true on a trusted network)"))
		if s.cfg.Token != "" || s.cfg.AdminInsecure {
			ans, err = h(c)
		}
		code := "OK"
		if err != nil {
			p := asProblem(err)
			if p.status == http.StatusInternalServerError {
				s.deps.Logger.Error("admin call failed", "op", op, "path", r.URL.Path, "code", fault.Code(err), "err", err)
			}
			code = p.p.Code
			if p.p.InstanceID == "" {
				p.p.InstanceID = c.instanceID
			}
			writeProblem(w, p)
		} else if ans.raw != nil {
			w.Header().Set("Content-Type", ans.contentType)
			w.WriteHeader(ans.status)
			_, _ = w.Write(ans.raw)
		} else if ans.body != nil {
			writeJSON(w, ans.status, ans.body)
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

// step runs an administrative resume through the lanes and waits for its
// outcome: a held claim is 409 SUTRA.ADMIN.<OP>.CLAIM_HELD, never a wait.
func (s *Server) step(c *adminCall, op string, res lanes.Resume) error {
	// The step runs on the admin lane with the lanes' connections: the call
	// gives its body bytes and its API connection back while it waits, so
	// that admin steps slow up to the step deadline cannot starve the task
	// API. What it reads afterwards is one statement.
	if cl := callOf(c.r); cl != nil {
		cl.idle()
	}
	done := make(chan lanes.Outcome, 1)
	res.Done = func(o lanes.Outcome) { done <- o }
	s.deps.Lanes.Dispatch(res)
	var o lanes.Outcome
	select {
	case o = <-done:
	case <-c.r.Context().Done():
		return c.r.Context().Err()
	}
	switch o.Kind {
	case lanes.Applied:
		return nil
	case lanes.Refused:
		return refuse(http.StatusConflict, "SUTRA.ADMIN."+upper(op)+".CLAIM_HELD",
			fmt.Sprintf("%s: retry — another step or admin call holds the instance right now (a race, not a failure)", fault.Reason(o.Err)))
	case lanes.Retry:
		return refuse(http.StatusServiceUnavailable, fault.Unavailable, fmt.Sprintf("%s: retry", o.Reason))
	}
	if o.Err == nil {
		return refuse(http.StatusConflict, fault.NotWaiting, o.Kind.String())
	}
	return o.Err
}

func upper(op string) string {
	b := []byte(op)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// decodeAdmin reads a JSON body into v (see decode); an empty body leaves v.
func (s *Server) decodeAdmin(c *adminCall, v any) error {
	if c.r.ContentLength == 0 {
		return nil
	}
	return s.decode(c.w, c.r, v)
}

func (s *Server) openapi(*adminCall) (answer, error) {
	return answer{status: http.StatusOK, raw: s.cfg.OpenAPI, contentType: "application/yaml"}, nil
}

type deployed struct {
	Key       string `json:"key"`
	Version   int    `json:"version"`
	Unchanged bool   `json:"unchanged"`
}

func (s *Server) deploy(c *adminCall) (answer, error) {
	xml, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, s.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return answer{}, err
	case err != nil:
		return answer{}, invalidf("reading the BPMN file: %v", err)
	}
	ds, err := s.deps.Store.Deploy(c.r.Context(), xml)
	if err != nil {
		return answer{}, err
	}
	body := struct {
		deployed
		Definitions []deployed `json:"definitions"`
	}{}
	status := http.StatusOK
	for _, d := range ds {
		body.Definitions = append(body.Definitions, deployed{Key: d.Key, Version: d.Version, Unchanged: !d.Created})
		if d.Created {
			status = http.StatusCreated
		}
	}
	body.deployed = body.Definitions[0]
	body.Unchanged = status == http.StatusOK
	return answer{status: status, body: body}, nil
}

func (s *Server) definitions(c *adminCall) (answer, error) {
	defs, err := s.deps.Store.ListDefinitions(c.r.Context())
	if defs == nil {
		defs = []store.DefinitionVersions{}
	}
	return answer{status: http.StatusOK, body: map[string]any{"definitions": defs}}, err
}

func (s *Server) definitionXML(c *adminCall) (answer, error) {
	v, err := strconv.Atoi(c.r.PathValue("version"))
	if err != nil {
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, "no such version")
	}
	xml, err := s.deps.Store.DefinitionXML(c.r.Context(), c.r.PathValue("key"), v)
	return answer{status: http.StatusOK, raw: []byte(xml), contentType: "application/xml"}, err
}

type startRequest struct {
	Definition string         `json:"definition"`
	Version    int            `json:"version"`
	InstanceID string         `json:"instance_id"`
	Variables  map[string]any `json:"variables"`
}

func (s *Server) startInstance(c *adminCall) (answer, error) {
	var req startRequest
	if err := s.decode(c.w, c.r, &req); err != nil {
		return answer{}, err
	}
	if req.Definition == "" || req.Version < 0 {
		return answer{}, invalidf("definition is required and version, when set, positive")
	}
	if err := checkText("instance_id", req.InstanceID); err != nil {
		return answer{}, err
	}
	if req.InstanceID == "" {
		req.InstanceID = newID()
	}
	c.instanceID = req.InstanceID
	if err := s.step(c, admin.OpStart, admin.Start(req.InstanceID, req.Definition, req.Version, req.Variables)); err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusCreated, body: map[string]string{"instance_id": req.InstanceID}}, nil
}

// newID is a random UUID (version 4).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (s *Server) getInstance(c *adminCall) (answer, error) {
	c.instanceID = c.r.PathValue("id")
	d, err := s.deps.Store.Instance(c.r.Context(), c.instanceID)
	if err != nil {
		if isNotFound(err) {
			return answer{}, refuse(http.StatusNotFound, fault.NotFound, "instance "+c.instanceID+" does not exist")
		}
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: d}, nil
}

// page reads limit (default 50, at most 500) and the cursor after.
func page(c *adminCall) (int, string, error) {
	q := c.r.URL.Query()
	limit := 50
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			return 0, "", invalidf("limit %q is not between 1 and 500", l)
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
		return nil, invalidf("%s %q is not true or false", name, v)
	}
	return &b, nil
}

func (s *Server) listInstances(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	inc, err := optBool(c, "has_incident")
	if err != nil {
		return answer{}, err
	}
	q := c.r.URL.Query()
	list, err := s.deps.Store.ListInstances(c.r.Context(), store.InstanceFilter{Definition: q.Get("definition"), Status: q.Get("status"),
		HasIncident: inc, Limit: limit, After: after})
	if err != nil {
		return answer{}, err
	}
	return pageOf("instances", list, limit, func(i store.InstanceSummary) string { return i.ID }), nil
}

func (s *Server) cancel(c *adminCall) (answer, error) {
	c.instanceID = c.r.PathValue("id")
	if err := s.step(c, admin.OpCancel, admin.Cancel(c.instanceID)); err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: map[string]string{"instance_id": c.instanceID, "status": "cancelled"}}, nil
}

func (s *Server) setVariables(c *adminCall) (answer, error) {
	c.instanceID = c.r.PathValue("id")
	var vars map[string]any
	if err := s.decode(c.w, c.r, &vars); err != nil {
		return answer{}, err
	}
	if err := s.step(c, admin.OpVariables, admin.Variables(c.instanceID, vars)); err != nil {
		return answer{}, err
	}
	d, err := s.deps.Store.Instance(c.r.Context(), c.instanceID)
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: map[string]any{"instance_id": c.instanceID, "variables": d.Variables}}, nil
}

type migrateRequest struct {
	TargetVersion int               `json:"target_version"`
	Mapping       map[string]string `json:"mapping"`
}

func (s *Server) migrate(c *adminCall) (answer, error) {
	c.instanceID = c.r.PathValue("id")
	var req migrateRequest
	if err := s.decode(c.w, c.r, &req); err != nil {
		return answer{}, err
	}
	if req.TargetVersion < 1 {
		return answer{}, invalidf("target_version is required")
	}
	if err := s.step(c, admin.OpMigrate, admin.Migrate(c.instanceID, req.TargetVersion, req.Mapping)); err != nil {
		return answer{}, err
	}
	d, err := s.deps.Store.Instance(c.r.Context(), c.instanceID)
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: map[string]any{"instance_id": c.instanceID, "definition": d.Definition}}, nil
}

type migrationRequest struct {
	Definition  string            `json:"definition"`
	FromVersion int               `json:"from_version"`
	ToVersion   int               `json:"to_version"`
	Mapping     map[string]string `json:"mapping"`
}

func (s *Server) startMigration(c *adminCall) (answer, error) {
	var req migrationRequest
	if err := s.decode(c.w, c.r, &req); err != nil {
		return answer{}, err
	}
	if req.Definition == "" || req.FromVersion < 1 || req.ToVersion < 1 {
		return answer{}, invalidf("definition, from_version and to_version are required")
	}
	id := newID()
	if err := s.deps.Store.CreateMigration(c.r.Context(), id, req.Definition, req.FromVersion, req.ToVersion, req.Mapping); err != nil {
		return answer{}, err
	}
	if s.deps.MigrationCreated != nil {
		s.deps.MigrationCreated()
	}
	return answer{status: http.StatusAccepted, body: map[string]string{"id": id}}, nil
}

func (s *Server) getMigration(c *adminCall) (answer, error) {
	m, err := s.deps.Store.MigrationStatus(c.r.Context(), c.r.PathValue("id"))
	return answer{status: http.StatusOK, body: m}, err
}

func (s *Server) listIncidents(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	var from int64
	if after != "" {
		if from, err = strconv.ParseInt(after, 10, 64); err != nil {
			return answer{}, invalidf("after %q is not an incident id", after)
		}
	}
	open, err := optBool(c, "open")
	if err != nil {
		return answer{}, err
	}
	list, err := s.deps.Store.ListIncidents(c.r.Context(), store.IncidentFilter{Open: open, InstanceID: c.r.URL.Query().Get("instance_id"),
		Limit: limit, After: from})
	if err != nil {
		return answer{}, err
	}
	return pageOf("incidents", list, limit, func(i store.Incident) string { return strconv.FormatInt(i.ID, 10) }), nil
}

type retryRequest struct {
	Variables map[string]any `json:"variables"`
	Retries   int            `json:"retries"`
}

func (s *Server) retryIncident(c *adminCall) (answer, error) {
	var req retryRequest
	if err := s.decodeAdmin(c, &req); err != nil {
		return answer{}, err
	}
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil || req.Retries < 0 {
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, "no such incident")
	}
	inc, err := s.deps.Store.IncidentByID(c.r.Context(), id)
	if err != nil {
		return answer{}, err
	}
	c.instanceID = inc.InstanceID
	if inc.ResolvedAt != nil {
		return answer{}, refuse(http.StatusConflict, fault.NotWaiting, fmt.Sprintf("incident %d is resolved", id))
	}
	if inc.Code == fault.IncidentTimerFailed {
		if err := s.retryTimer(c, inc, req); err != nil {
			return answer{}, err
		}
	} else if err := s.step(c, admin.OpRetry, admin.Retry(inc.InstanceID, inc.Token, req.Variables, req.Retries)); err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: map[string]any{"incident_id": id, "instance_id": inc.InstanceID, "resolved": true}}, nil
}

// retryTimer arms the timer parked in incident inc to fire now: the fire
// then runs as any timer's does, through the claim. Nothing of the instance
// is read or written here, so no claim is taken.
func (s *Server) retryTimer(c *adminCall, inc store.Incident, req retryRequest) error {
	if len(req.Variables) > 0 || req.Retries > 0 {
		return invalidf("a timer incident's retry arms the timer again and takes no variables or retries: set variables with PATCH /v1/instances/{id}/variables first")
	}
	err := s.deps.Store.RetryTimer(c.r.Context(), inc.ID)
	if isNotFound(err) {
		return refuse(http.StatusConflict, fault.NotWaiting, fmt.Sprintf("incident %d is resolved", inc.ID))
	}
	return err
}

type messageRequest struct {
	Message        string         `json:"message"`
	CorrelationKey string         `json:"correlation_key,omitempty"`
	InstanceID     string         `json:"instance_id,omitempty"`
	Variables      map[string]any `json:"variables,omitempty"`
	TTL            string         `json:"ttl,omitempty"`
	MessageID      string         `json:"message_id,omitempty"`
}

// publishMessage publishes a relay to the relay exchange with confirms: a
// caller with no AMQP client still goes through the spine.
func (s *Server) publishMessage(c *adminCall) (answer, error) {
	var req messageRequest
	if err := s.decode(c.w, c.r, &req); err != nil {
		return answer{}, err
	}
	switch {
	case req.Message == "":
		return answer{}, invalidf("message is required")
	case req.CorrelationKey != "" && req.InstanceID != "":
		return answer{}, invalidf("name correlation_key or instance_id, not both")
	case s.deps.PublishRelay == nil:
		return answer{}, refuse(http.StatusServiceUnavailable, fault.Unavailable, "no broker publisher")
	}
	for name, id := range map[string]string{"instance_id": req.InstanceID, "message_id": req.MessageID, "correlation_key": req.CorrelationKey} {
		if err := checkText(name, id); err != nil {
			return answer{}, err
		}
	}
	if req.MessageID == "" {
		req.MessageID = newID()
	}
	id := req.MessageID
	req.MessageID = ""
	body, err := json.Marshal(req)
	if err != nil {
		return answer{}, err
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), 30*time.Second)
	defer cancel()
	if err := s.deps.PublishRelay(ctx, req.Message, id, body); err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusAccepted, body: map[string]string{"message_id": id}}, nil
}

func userTaskID(c *adminCall) (int64, error) {
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, refuse(http.StatusNotFound, fault.TaskNotFound, "no such user task")
	}
	return id, nil
}

func (s *Server) listUserTasks(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	var from int64
	if after != "" {
		if from, err = strconv.ParseInt(after, 10, 64); err != nil {
			return answer{}, invalidf("after %q is not a user task id", after)
		}
	}
	q := c.r.URL.Query()
	if st := q.Get("state"); st != "" && st != "created" && st != "completing" {
		return answer{}, invalidf("state %q is not created or completing", st)
	}
	list, err := s.deps.Store.ListUserTasks(c.r.Context(), store.UserTaskFilter{Assignee: q.Get("assignee"),
		CandidateGroup: q.Get("candidate_group"), CandidateUser: q.Get("candidate_user"), State: q.Get("state"), Limit: limit, After: from})
	if err != nil {
		return answer{}, err
	}
	return pageOf("user_tasks", list, limit, func(t store.UserTask) string { return t.ID }), nil
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

func (s *Server) getUserTask(c *adminCall) (answer, error) {
	id, err := userTaskID(c)
	if err != nil {
		return answer{}, err
	}
	u, err := s.deps.Store.UserTaskByID(c.r.Context(), id)
	if isNotFound(err) {
		return answer{}, refuse(http.StatusNotFound, fault.TaskNotFound, fmt.Sprintf("user task %d does not exist", id))
	}
	return answer{status: http.StatusOK, body: u}, err
}

func (s *Server) assignUserTask(c *adminCall) (answer, error) {
	id, err := userTaskID(c)
	if err != nil {
		return answer{}, err
	}
	var req struct {
		Assignee *string `json:"assignee"`
	}
	if err := s.decode(c.w, c.r, &req); err != nil {
		return answer{}, err
	}
	err = s.deps.Store.AssignUserTask(c.r.Context(), id, req.Assignee)
	if isNotFound(err) {
		return answer{}, refuse(http.StatusNotFound, fault.TaskNotFound, fmt.Sprintf("user task %d does not exist or is completing", id))
	}
	return answer{status: http.StatusNoContent}, err
}

// completeUserTask records the completion with its relay, durably, and
// answers 204 then: the completion re-enters the instance as a fresh
// delivery, exactly like an external task's.
func (s *Server) completeUserTask(c *adminCall) (answer, error) {
	id, err := userTaskID(c)
	if err != nil {
		return answer{}, err
	}
	var req struct {
		Variables map[string]any `json:"variables"`
		// Override completes a task assigned to someone else.
		Override bool `json:"override"`
	}
	if err := s.decodeAdmin(c, &req); err != nil {
		return answer{}, err
	}
	// The user is who the call names (X-Sutra-Caller), as in Camunda's
	// Tasklist: only the assignee completes an assigned task.
	user := c.r.Header.Get("X-Sutra-Caller")
	if !callerName.MatchString(user) {
		user = ""
	}
	topic, err := s.deps.Store.RecordOutcome(c.r.Context(), store.Outcome{TaskID: id, Worker: "user:" + c.caller,
		Kind: store.TaskCompleted, Variables: req.Variables, Human: true, User: user, Override: req.Override})
	var notAssignee *store.NotAssigneeError
	switch {
	case isNotFound(err):
		return answer{}, refuse(http.StatusNotFound, fault.TaskNotFound, fmt.Sprintf("user task %d does not exist or is completing", id))
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
	s.deps.Metrics.TasksCompleted.WithLabelValues(topic, store.TaskCompleted).Inc()
	return answer{status: http.StatusNoContent}, nil
}

// listParked lists the outbox rows parked after the broker returned them on
// every attempt (SUTRA.OUTBOX.UNROUTABLE), in id order.
func (s *Server) listParked(c *adminCall) (answer, error) {
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	list, err := s.deps.Store.ListParkedOutbox(c.r.Context(), store.ParkedFilter{InstanceID: c.r.URL.Query().Get("instance_id"),
		After: after, Limit: limit})
	if err != nil {
		return answer{}, err
	}
	return pageOf("parked", list, limit, func(p store.ParkedOutboxRow) string { return p.ID }), nil
}

// retryParked puts a parked row back in the outbox, behind every row of its
// class written since: any replica's publisher publishes it within
// SUTRA_OUTBOX_POLL_INTERVAL, and parks it again if it is still returned
// SUTRA_OUTBOX_MAX_ATTEMPTS times.
func (s *Server) retryParked(c *adminCall) (answer, error) {
	return s.settleParked(c, "requeued", s.deps.Store.RetryParkedOutbox)
}

// discardParked deletes a parked row: its message is never published.
func (s *Server) discardParked(c *adminCall) (answer, error) {
	return s.settleParked(c, "discarded", s.deps.Store.DiscardParkedOutbox)
}

func (s *Server) settleParked(c *adminCall, status string, act func(ctx context.Context, id string) error) (answer, error) {
	id := c.r.PathValue("id")
	err := act(c.r.Context(), id)
	if isNotFound(err) {
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, fmt.Sprintf("no parked outbox row %q", id))
	}
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: map[string]string{"id": id, "status": status}}, nil
}
