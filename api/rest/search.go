package rest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// routeSearches registers the searches and the reads.
func (a *API) routeSearches(route func(scopes api.Scope, pattern string, h handler, types ...string)) {
	worker, admin := api.Tasks|api.Admin, api.Admin
	route(admin, "POST /v2/process-instances/search", a.searchInstances)
	route(admin, "GET /v2/process-instances/{key}", a.getInstance)
	route(admin, "POST /v2/incidents/search", a.searchIncidents)
	route(worker, "POST /v2/user-tasks/search", a.searchUserTasks)
	route(admin, "POST /v2/variables/search", a.searchVariables)
}

// searchRequest is a search's body: {filter, sort, page}. The filter's
// fields are each search's; a field may be a value or {"$eq": value}.
// Items come in the order of their ids unless sort names one a search
// serves (sortBy); a page is page.limit items (default 100, at most
// MaxPageSize) after page.after, the endCursor of the page before.
type searchRequest struct {
	Filter map[string]json.RawMessage `json:"filter"`
	Sort   []struct {
		Field string `json:"field"`
		Order string `json:"order"`
	} `json:"sort"`
	Page struct {
		Limit int    `json:"limit"`
		After string `json:"after"`
		From  int    `json:"from"`
	} `json:"page"`
	// order and desc are the sort read from Sort (sortBy).
	order string
	desc  bool
}

// Cursors travel base64-encoded, as Camunda's.
func encodeCursor(c string) string { return base64.StdEncoding.EncodeToString([]byte(c)) }

// search reads a search's body: its filter may name only fields, its sort
// only a key of sorts (read into order and desc).
func (a *API) search(c *call, sorts map[string]string, fields ...string) (searchRequest, error) {
	var req searchRequest
	if err := c.decode(&req); err != nil {
		return req, err
	}
	if err := req.filterOnly(fields...); err != nil {
		return req, err
	}
	var err error
	if req.order, req.desc, err = req.sortBy(sorts); err != nil {
		return req, err
	}
	after, err := base64.StdEncoding.DecodeString(req.Page.After)
	if err != nil {
		return req, api.Invalidf("page.after %q is not a cursor this search answered", req.Page.After)
	}
	req.Page.After = string(after)
	switch {
	case req.Page.Limit == 0:
		req.Page.Limit = 100
	case req.Page.Limit < 0 || req.Page.Limit > a.cfg.MaxPageSize:
		return req, api.Invalidf("page.limit %d is not between 1 and %d", req.Page.Limit, a.cfg.MaxPageSize)
	case req.Page.From != 0:
		return req, api.Invalidf("page.from is not served: page with page.after, the endCursor of the page before")
	}
	return req, nil
}

// sortBy reads the request's sort: one field of served (each to the order
// it names for the search), ascending unless "DESC"; "" when the request
// names none. Any other sort is refused rather than ignored, so that a
// client never reads a page in an order it did not get.
func (r searchRequest) sortBy(served map[string]string) (order string, desc bool, err error) {
	switch {
	case len(r.Sort) == 0:
		return "", false, nil
	case len(r.Sort) > 1:
		return "", false, api.Invalidf("sort by %d fields is not served: sort by one", len(r.Sort))
	}
	f := r.Sort[0]
	order, ok := served[f.Field]
	if !ok {
		fields := slices.Sorted(maps.Keys(served))
		if len(fields) == 0 {
			return "", false, api.Invalidf("sort is not served on this search: its items come in the order of their keys")
		}
		return "", false, api.Invalidf("sort by %q is not served: sort by one of %s", f.Field, strings.Join(fields, ", "))
	}
	switch strings.ToUpper(f.Order) {
	case "", "ASC":
		return order, false, nil
	case "DESC":
		return order, true, nil
	}
	return "", false, api.Invalidf("sort order %q is not ASC or DESC", f.Order)
}

// filterOnly refuses a filter field other than fields (and tenantId, when
// it names the one tenant): a filter that is not applied is refused rather
// than ignored, so that a client never reads items it filtered out.
func (r searchRequest) filterOnly(fields ...string) error {
	for name := range r.Filter {
		if slices.Contains(fields, name) {
			continue
		}
		if name == "tenantId" {
			var tenant string
			if ok, err := r.value(name, &tenant); err != nil || !ok || tenant == defaultTenant {
				continue
			}
			return api.Invalidf("filter.tenantId: Sutra has one tenant, %q", defaultTenant)
		}
		return api.Invalidf("filter.%s is not served on this search: filter by %s", name, strings.Join(fields, ", "))
	}
	return nil
}

// value reads filter field name into v: a value, or {"$eq": value}; false
// when the filter has no such field.
func (r searchRequest) value(name string, v any) (bool, error) {
	raw, ok := r.Filter[name]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	var eq struct {
		Eq json.RawMessage `json:"$eq"`
	}
	if json.Unmarshal(raw, &eq) == nil && eq.Eq != nil {
		raw = eq.Eq
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, api.Invalidf("filter.%s: %s is not served (a value or {\"$eq\": value})", name, raw)
	}
	return true, nil
}

// page answers items as one page: a full one names its last item's cursor.
func page[T any](items []T, limit int, cursor func(T) string) answer {
	p := map[string]any{"totalItems": len(items), "hasMoreTotalItems": len(items) == limit}
	if len(items) > 0 {
		p["startCursor"], p["endCursor"] = encodeCursor(cursor(items[0])), encodeCursor(cursor(items[len(items)-1]))
	}
	if items == nil {
		items = []T{}
	}
	return ok(map[string]any{"items": items, "page": p})
}

func afterID(after string) (int64, error) {
	if after == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil {
		return 0, api.Invalidf("page.after %q is not a cursor this search answered", after)
	}
	return n, nil
}

// instanceID reads filter.processInstanceKey: the id of the instance it
// names; "" when the filter names none; errNoMatch when no instance has
// it.
func (a *API) instanceID(c *call, req searchRequest) (string, error) {
	var key Key
	if ok, err := req.value("processInstanceKey", &key); !ok || err != nil {
		return "", err
	}
	in, err := a.deps.Store.InstanceByKey(c.ctx(), int64(key), false)
	if errors.Is(err, store.ErrNotFound) {
		return "", errNoMatch
	}
	return in.ID, err
}

// errNoMatch is a filter that no item can pass: an empty page.
var errNoMatch = errors.New("no item matches")

// instanceStates are Camunda's states of an instance, by Sutra's status.
var instanceStates = map[string]string{"active": "ACTIVE", "cancelling": "ACTIVE", "completed": "COMPLETED", "cancelled": "TERMINATED",
	"terminated": "TERMINATED", "failed": "TERMINATED"}

type instanceItem struct {
	ProcessDefinitionID      string  `json:"processDefinitionId"`
	ProcessDefinitionName    string  `json:"processDefinitionName"`
	ProcessDefinitionVersion int     `json:"processDefinitionVersion"`
	StartDate                string  `json:"startDate"`
	EndDate                  *string `json:"endDate,omitempty"`
	State                    string  `json:"state"`
	HasIncident              bool    `json:"hasIncident"`
	TenantID                 string  `json:"tenantId"`
	ProcessInstanceKey       Key     `json:"processInstanceKey"`
	ProcessDefinitionKey     Key     `json:"processDefinitionKey"`
	cursor                   string
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func instanceOf(s usecase.InstanceSummary) instanceItem {
	state := instanceStates[s.Status]
	if state == "" {
		state = "ACTIVE"
	}
	it := instanceItem{ProcessDefinitionID: s.Definition, ProcessDefinitionName: s.DefinitionName, ProcessDefinitionVersion: s.DefinitionVersion,
		StartDate: stamp(s.CreatedAt), State: state, HasIncident: s.HasIncident, TenantID: defaultTenant,
		ProcessInstanceKey: Key(s.Key), ProcessDefinitionKey: Key(s.DefinitionKey), cursor: s.ID}
	if s.EndedAt != nil {
		end := stamp(*s.EndedAt)
		it.EndDate = &end
	}
	if it.ProcessDefinitionName == "" {
		it.ProcessDefinitionName = s.Definition
	}
	return it
}

// searchInstances lists process instances (usecase.SearchProcessInstances) by
// processDefinitionId, processDefinitionVersion, state, hasIncident or
// processInstanceKey.
func (a *API) searchInstances(c *call) (answer, error) {
	req, err := a.search(c, map[string]string{"startDate": store.SortStart, "endDate": store.SortEnd},
		"processInstanceKey", "processDefinitionId", "processDefinitionVersion", "state", "hasIncident")
	if err != nil {
		return answer{}, err
	}
	var key Key
	if ok, err := req.value("processInstanceKey", &key); err != nil {
		return answer{}, err
	} else if ok {
		s, err := a.deps.UseCases.ProcessInstance(c.ctx(), int64(key))
		if errors.Is(err, store.ErrNotFound) {
			return page([]instanceItem{}, req.Page.Limit, nil), nil
		}
		if err != nil {
			return answer{}, err
		}
		return page([]instanceItem{instanceOf(s)}, req.Page.Limit, func(i instanceItem) string { return i.cursor }), nil
	}
	f := store.InstanceFilter{Limit: req.Page.Limit, After: req.Page.After, Scan: 5000}
	f.Sort, f.Desc = req.order, req.desc
	if f.Sort != store.SortID && f.After != "" {
		if _, _, err := store.InstanceCursor(f.After); err != nil {
			return answer{}, api.Invalidf("page.after %q is not a cursor this search answered", f.After)
		}
	}
	var state string
	var inc bool
	for name, v := range map[string]any{"processDefinitionId": &f.Definition, "processDefinitionVersion": &f.Version, "state": &state,
		"hasIncident": &inc} {
		ok, err := req.value(name, v)
		if err != nil {
			return answer{}, err
		}
		if ok && name == "hasIncident" {
			f.HasIncident = &inc
		}
	}
	switch state {
	case "":
	case "ACTIVE":
		f.Status = "active"
	case "COMPLETED":
		f.Status = "completed"
	case "TERMINATED":
		f.Status = "cancelled"
	default:
		return answer{}, api.Invalidf("filter.state %q is not ACTIVE, COMPLETED or TERMINATED", state)
	}
	list, _, err := a.deps.UseCases.SearchProcessInstances(c.ctx(), f)
	if err != nil {
		return answer{}, err
	}
	items := make([]instanceItem, len(list))
	for i, s := range list {
		items[i] = instanceOf(s)
		switch t := s.EndedAt; {
		case f.Sort == store.SortStart:
			items[i].cursor = s.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + s.ID
		case f.Sort == store.SortEnd && t != nil:
			items[i].cursor = t.UTC().Format(time.RFC3339Nano) + "|" + s.ID
		}
	}
	return page(items, req.Page.Limit, func(i instanceItem) string { return i.cursor }), nil
}

func (a *API) getInstance(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	s, err := a.deps.UseCases.ProcessInstance(c.ctx(), key)
	if errors.Is(err, store.ErrNotFound) {
		return answer{}, refuse(http.StatusNotFound, fault.NotFound, "no process instance with key "+itoa(key))
	}
	if err != nil {
		return answer{}, err
	}
	return ok(instanceOf(s)), nil
}

// errorTypes are Camunda's incident error types, by Sutra's incident codes.
var errorTypes = map[string]string{
	fault.IncidentTaskFailed: "JOB_NO_RETRIES", fault.IncidentListener: "EXECUTION_LISTENER_NO_RETRIES",
	fault.IncidentExpression: "EXTRACT_VALUE_ERROR", fault.IncidentNoFlow: "CONDITION_ERROR", fault.IncidentError: "UNHANDLED_ERROR_EVENT",
	fault.IncidentCalledElement: "CALLED_ELEMENT_ERROR", fault.IncidentDecisionFailed: "DECISION_EVALUATION_ERROR",
	fault.IncidentAdHocResult: "AD_HOC_SUB_PROCESS_NO_RETRIES",
}

type incidentItem struct {
	ProcessDefinitionID  string `json:"processDefinitionId,omitempty"`
	ErrorType            string `json:"errorType"`
	ErrorMessage         string `json:"errorMessage"`
	ElementID            string `json:"elementId"`
	CreationTime         string `json:"creationTime"`
	State                string `json:"state"`
	TenantID             string `json:"tenantId"`
	IncidentKey          Key    `json:"incidentKey"`
	ProcessDefinitionKey *Key   `json:"processDefinitionKey,omitempty"`
	ProcessInstanceKey   *Key   `json:"processInstanceKey,omitempty"`
}

// searchIncidents lists incidents (usecase.SearchIncidents) by
// processInstanceKey and state (ACTIVE, RESOLVED).
func (a *API) searchIncidents(c *call) (answer, error) {
	req, err := a.search(c, nil, "processInstanceKey", "state")
	if err != nil {
		return answer{}, err
	}
	after, err := afterID(req.Page.After)
	if err != nil {
		return answer{}, err
	}
	f := store.IncidentFilter{Limit: req.Page.Limit, After: after}
	if f.InstanceID, err = a.instanceID(c, req); errors.Is(err, errNoMatch) {
		return page([]incidentItem{}, req.Page.Limit, nil), nil
	} else if err != nil {
		return answer{}, err
	}
	var state string
	if _, err := req.value("state", &state); err != nil {
		return answer{}, err
	}
	switch state {
	case "":
	case "ACTIVE", "RESOLVED":
		open := state == "ACTIVE"
		f.Open = &open
	default:
		return answer{}, api.Invalidf("filter.state %q is not ACTIVE or RESOLVED", state)
	}
	list, err := a.deps.UseCases.SearchIncidents(c.ctx(), f)
	if err != nil {
		return answer{}, err
	}
	items := make([]incidentItem, len(list))
	for i, inc := range list {
		it := incidentItem{ErrorType: errorTypes[inc.Code], ErrorMessage: inc.Message, ElementID: inc.Element,
			CreationTime: stamp(inc.CreatedAt), State: "ACTIVE", TenantID: defaultTenant, IncidentKey: Key(inc.ID)}
		if it.ErrorType == "" {
			it.ErrorType = "UNKNOWN"
		}
		if inc.ErrorMessage != nil {
			it.ErrorMessage = *inc.ErrorMessage
		}
		if inc.ResolvedAt != nil {
			it.State = "RESOLVED"
		}
		if inc.DefinitionKey != nil {
			it.ProcessDefinitionID = *inc.DefinitionKey
		}
		if inc.InstanceKey != 0 {
			ik, dk := Key(inc.InstanceKey), Key(inc.DefinitionZeebeKey)
			it.ProcessInstanceKey, it.ProcessDefinitionKey = &ik, &dk
		}
		items[i] = it
	}
	return page(items, req.Page.Limit, func(i incidentItem) string { return itoa(int64(i.IncidentKey)) }), nil
}

type userTaskItem struct {
	Name                     string         `json:"name,omitempty"`
	State                    string         `json:"state"`
	Assignee                 *string        `json:"assignee,omitempty"`
	ElementID                string         `json:"elementId"`
	CandidateGroups          []string       `json:"candidateGroups"`
	CandidateUsers           []string       `json:"candidateUsers"`
	ProcessDefinitionID      string         `json:"processDefinitionId"`
	CreationDate             string         `json:"creationDate"`
	FollowUpDate             *string        `json:"followUpDate,omitempty"`
	DueDate                  *string        `json:"dueDate,omitempty"`
	TenantID                 string         `json:"tenantId"`
	ExternalFormReference    *string        `json:"externalFormReference,omitempty"`
	ProcessDefinitionVersion int            `json:"processDefinitionVersion"`
	CustomHeaders            map[string]any `json:"customHeaders"`
	Priority                 int            `json:"priority"`
	UserTaskKey              Key            `json:"userTaskKey"`
	ElementInstanceKey       Key            `json:"elementInstanceKey"`
	ProcessName              string         `json:"processName,omitempty"`
	ProcessDefinitionKey     Key            `json:"processDefinitionKey"`
	ProcessInstanceKey       Key            `json:"processInstanceKey"`
}

// userTaskStates are Camunda's states of a user task, by Sutra's.
var userTaskStates = map[string]string{"created": "CREATED", "assigning": "ASSIGNING", "updating": "UPDATING", "completing": "COMPLETING"}

// dateTime writes an ISO 8601 date the model gave as Camunda's UTC
// date-time; nil when there is none or it is not one.
func dateTime(d *string) *string {
	if d == nil || *d == "" {
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z07:00"} {
		if t, err := time.Parse(layout, *d); err == nil {
			s := stamp(t)
			return &s
		}
	}
	return nil
}

func userTaskOf(t usecase.KeyedUserTask) userTaskItem {
	it := userTaskItem{Name: t.Name, State: userTaskStates[t.State], Assignee: t.Assignee, ElementID: t.Element,
		CandidateGroups: t.CandidateGroups, CandidateUsers: t.CandidateUsers, ProcessDefinitionID: t.DefinitionKey,
		CreationDate: stamp(t.CreatedAt), FollowUpDate: dateTime(t.FollowUpDate), DueDate: dateTime(t.DueDate), TenantID: defaultTenant,
		ExternalFormReference: t.FormID, ProcessDefinitionVersion: t.DefinitionVersion, CustomHeaders: map[string]any{},
		Priority: t.Priority, UserTaskKey: Key(t.ID), ElementInstanceKey: Key(t.ID), ProcessName: t.ProcessName,
		ProcessDefinitionKey: Key(t.DefinitionZeebeKey), ProcessInstanceKey: Key(t.InstanceKey)}
	if it.CandidateGroups == nil {
		it.CandidateGroups = []string{}
	}
	if it.CandidateUsers == nil {
		it.CandidateUsers = []string{}
	}
	if it.Assignee != nil && *it.Assignee == "" {
		it.Assignee = nil
	}
	return it
}

// searchUserTasks lists user tasks (usecase.SearchUserTasks) by assignee,
// state, candidateGroup, candidateUser or processInstanceKey.
func (a *API) searchUserTasks(c *call) (answer, error) {
	req, err := a.search(c, nil, "processInstanceKey", "assignee", "candidateGroup", "candidateUser", "state")
	if err != nil {
		return answer{}, err
	}
	after, err := afterID(req.Page.After)
	if err != nil {
		return answer{}, err
	}
	f := store.UserTaskFilter{Limit: req.Page.Limit, After: after}
	if f.InstanceID, err = a.instanceID(c, req); errors.Is(err, errNoMatch) {
		return page([]userTaskItem{}, req.Page.Limit, nil), nil
	} else if err != nil {
		return answer{}, err
	}
	var state string
	for name, v := range map[string]*string{"assignee": &f.Assignee, "candidateGroup": &f.CandidateGroup, "candidateUser": &f.CandidateUser,
		"state": &state} {
		if _, err := req.value(name, v); err != nil {
			return answer{}, err
		}
	}
	if state != "" {
		for sutra, camunda := range userTaskStates {
			if camunda == state {
				f.State = sutra
			}
		}
		if f.State == "" {
			// A completed or cancelled task is no longer kept.
			return page([]userTaskItem{}, req.Page.Limit, nil), nil
		}
	}
	list, err := a.deps.UseCases.SearchUserTasks(c.ctx(), f)
	if err != nil {
		return answer{}, err
	}
	items := make([]userTaskItem, len(list))
	for i, t := range list {
		items[i] = userTaskOf(t)
	}
	return page(items, req.Page.Limit, func(i userTaskItem) string { return itoa(int64(i.UserTaskKey)) }), nil
}

// userTask reads the user task the path names: 404 SUTRA.TASK.NOT_FOUND
// when there is none.
func (a *API) userTask(c *call) (usecase.KeyedUserTask, error) {
	key, err := c.pathKey()
	if err != nil {
		return usecase.KeyedUserTask{}, err
	}
	t, err := a.deps.UseCases.UserTask(c.ctx(), key)
	if errors.Is(err, store.ErrNotFound) {
		return t, refuse(http.StatusNotFound, fault.TaskNotFound, "user task "+itoa(key)+" does not exist")
	}
	return t, err
}

func (a *API) getUserTask(c *call) (answer, error) {
	t, err := a.userTask(c)
	if err != nil {
		return answer{}, err
	}
	return ok(userTaskOf(t)), nil
}

// getUserTaskForm answers the Camunda Form the BPMN file embeds for the
// task (zeebe:userTaskForm); 204 when the task names none.
func (a *API) getUserTaskForm(c *call) (answer, error) {
	t, err := a.userTask(c)
	if err != nil {
		return answer{}, err
	}
	if t.FormKey == nil {
		return noContent(), nil
	}
	file, err := a.deps.Store.DefinitionXML(c.ctx(), t.DefinitionKey, t.DefinitionVersion)
	if err != nil {
		return answer{}, err
	}
	form, found, err := bpmn.EmbeddedForm([]byte(file), *t.FormKey)
	switch {
	case err != nil:
		return answer{}, err
	case !found || !json.Valid([]byte(form)):
		return answer{}, refuse(http.StatusNotFound, fault.AdminNotFound, fmt.Sprintf("form %s of user task %d is not embedded in its BPMN file", *t.FormKey, t.ID))
	}
	var schema struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(form), &schema)
	return ok(map[string]any{"tenantId": defaultTenant, "formId": schema.ID, "schema": form, "version": 1, "formKey": Key(t.ID)}), nil
}

// userTaskDone answers a change of user task key.
func userTaskDone(key int64, err error) (answer, error) {
	if errors.Is(err, store.ErrNotFound) {
		return answer{}, refuse(http.StatusNotFound, fault.TaskNotFound, "user task "+itoa(key)+" does not exist, or is assigning, updating or completing")
	}
	if err != nil {
		return answer{}, err
	}
	return noContent(), nil
}

// caller is who a user task change records: the caller's name, as the
// admin API's.
func caller(c *call) string {
	if api.ScopeOf(c.r) == 0 {
		return "anonymous"
	}
	return "token"
}

// assignUserTask assigns a user task (usecase.AssignUserTask): at once, or
// after its assigning listeners' jobs.
func (a *API) assignUserTask(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	var req struct {
		Assignee string `json:"assignee"`
	}
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	if req.Assignee == "" {
		return answer{}, api.Invalidf("assignee is required: DELETE /v2/user-tasks/{key}/assignee unassigns")
	}
	_, err = a.deps.UseCases.AssignUserTask(c.ctx(), caller(c), key, &req.Assignee)
	return userTaskDone(key, err)
}

func (a *API) unassignUserTask(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	_, err = a.deps.UseCases.AssignUserTask(c.ctx(), caller(c), key, nil)
	return userTaskDone(key, err)
}

// completeUserTask records the completion with its relay, durably
// (usecase.RecordTaskOutcome), and answers 204 then. /v2 names no user, so
// the completion is the override of an assigned task, as Camunda's REST
// API completes a task whoever its assignee is.
func (a *API) completeUserTask(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	var req struct {
		Variables json.RawMessage `json:"variables"`
	}
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	vars, err := variables(req.Variables)
	if err != nil {
		return answer{}, err
	}
	_, err = a.deps.UseCases.RecordTaskOutcome(c.ctx(), c.conn(), store.TaskReport{TaskID: key, Worker: "user:" + caller(c),
		Kind: store.TaskCompleted, Variables: vars, Human: true, Override: true})
	return userTaskDone(key, err)
}

type variableItem struct {
	Name               string `json:"name"`
	Value              string `json:"value"`
	IsTruncated        bool   `json:"isTruncated"`
	TenantID           string `json:"tenantId"`
	VariableKey        Key    `json:"variableKey"`
	ScopeKey           Key    `json:"scopeKey"`
	ProcessInstanceKey Key    `json:"processInstanceKey"`
}

// searchVariables lists the variables of the instance filter's
// processInstanceKey names (required: Sutra keeps variables on their
// instance, with no key of their own), by name when filter.name is set.
// A variable's key is its instance's: a variable is named by both.
func (a *API) searchVariables(c *call) (answer, error) {
	req, err := a.search(c, nil, "processInstanceKey", "name")
	if err != nil {
		return answer{}, err
	}
	var key Key
	var name string
	if ok, err := req.value("processInstanceKey", &key); err != nil {
		return answer{}, err
	} else if !ok {
		return answer{}, api.Invalidf("filter.processInstanceKey is required: Sutra lists an instance's variables")
	}
	if _, err := req.value("name", &name); err != nil {
		return answer{}, err
	}
	in, err := a.deps.UseCases.InstanceVariables(c.ctx(), int64(key))
	if errors.Is(err, store.ErrNotFound) {
		return page([]variableItem{}, req.Page.Limit, nil), nil
	}
	if err != nil {
		return answer{}, err
	}
	names := make([]string, 0, len(in.Variables))
	for n := range in.Variables {
		if (name == "" || n == name) && n > req.Page.After {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if len(names) > req.Page.Limit {
		names = names[:req.Page.Limit]
	}
	items := make([]variableItem, len(names))
	for i, n := range names {
		v, err := json.Marshal(in.Variables[n])
		if err != nil {
			return answer{}, err
		}
		items[i] = variableItem{Name: n, Value: string(v), TenantID: defaultTenant, VariableKey: key, ScopeKey: key, ProcessInstanceKey: key}
	}
	return page(items, req.Page.Limit, func(i variableItem) string { return i.Name }), nil
}
