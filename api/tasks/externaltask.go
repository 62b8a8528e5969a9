package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clip"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// fetchRequest is Camunda's FetchExternalTasksDto. Every field Camunda has is
// accepted (an unknown one is refused); what Sutra has no use for is said in
// docs/tasks.md.
type fetchRequest struct {
	WorkerID             *string        `json:"workerId"`
	MaxTasks             *int           `json:"maxTasks"`
	UsePriority          bool           `json:"usePriority"`
	AsyncResponseTimeout *int64         `json:"asyncResponseTimeout"`
	Topics               []topicRequest `json:"topics"`
	Sorting              []struct {
		SortBy    string `json:"sortBy"`
		SortOrder string `json:"sortOrder"`
	} `json:"sorting"`
}

type topicRequest struct {
	TopicName                   string         `json:"topicName"`
	LockDuration                *int64         `json:"lockDuration"`
	Variables                   []string       `json:"variables"`
	LocalVariables              bool           `json:"localVariables"`
	BusinessKey                 *string        `json:"businessKey"`
	ProcessDefinitionID         *string        `json:"processDefinitionId"`
	ProcessDefinitionIDIn       []string       `json:"processDefinitionIdIn"`
	ProcessDefinitionKey        *string        `json:"processDefinitionKey"`
	ProcessDefinitionKeyIn      []string       `json:"processDefinitionKeyIn"`
	ProcessDefinitionVersionTag *string        `json:"processDefinitionVersionTag"`
	ProcessVariables            map[string]any `json:"processVariables"`
	WithoutTenantID             bool           `json:"withoutTenantId"`
	TenantIDIn                  []string       `json:"tenantIdIn"`
	DeserializeValues           bool           `json:"deserializeValues"`
	IncludeExtensionProperties  bool           `json:"includeExtensionProperties"`
}

// lockedTask is Camunda's LockedExternalTaskDto.
type lockedTask struct {
	ActivityID                  string                `json:"activityId"`
	ActivityInstanceID          string                `json:"activityInstanceId"`
	ErrorMessage                *string               `json:"errorMessage"`
	ErrorDetails                *string               `json:"errorDetails"`
	ExecutionID                 string                `json:"executionId"`
	ID                          string                `json:"id"`
	LockExpirationTime          string                `json:"lockExpirationTime"`
	CreateTime                  string                `json:"createTime"`
	ProcessDefinitionID         string                `json:"processDefinitionId"`
	ProcessDefinitionKey        string                `json:"processDefinitionKey"`
	ProcessDefinitionVersionTag *string               `json:"processDefinitionVersionTag"`
	ProcessInstanceID           string                `json:"processInstanceId"`
	Retries                     int                   `json:"retries"`
	Suspended                   bool                  `json:"suspended"`
	WorkerID                    string                `json:"workerId"`
	TopicName                   string                `json:"topicName"`
	TenantID                    *string               `json:"tenantId"`
	Variables                   map[string]typedValue `json:"variables"`
	Priority                    int                   `json:"priority"`
	BusinessKey                 *string               `json:"businessKey"`
	ExtensionProperties         map[string]string     `json:"extensionProperties"`
}

// camundaTime is Camunda's date format (yyyy-MM-dd'T'HH:mm:ss.SSSZ).
const camundaTime = "2006-01-02T15:04:05.000-0700"

// fail answers err with Camunda's status and error body.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var inv api.Invalid
	var lock *store.LockError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &inv):
		writeError(w, http.StatusBadRequest, "InvalidRequestException", fault.APIInvalid, inv.Msg)
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "InvalidRequestException", fault.APITooLarge,
			fmt.Sprintf("the body is larger than %d bytes", tooLarge.Limit))
	case errors.As(err, &lock):
		writeError(w, http.StatusBadRequest, "BadUserRequestException", fault.TaskLockLost, lock.Error())
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "InvalidRequestException", fault.TaskNotFound,
			fmt.Sprintf("External task with id %s does not exist", r.PathValue("id")))
	case fault.Code(err) == fault.Unavailable || fault.Code(err) == fault.Transient || r.Context().Err() != nil:
		writeError(w, http.StatusServiceUnavailable, "RestException", fault.Unavailable, fault.Reason(err))
	default:
		a.deps.Logger.Error("task API call failed", "path", clip.String(r.URL.Path), "code", fault.Code(err), "err", err)
		writeError(w, http.StatusInternalServerError, "RestException", fault.StepFailed, "the call failed; the worker's log has the reason")
	}
}

func (a *API) fetchAndLock(w http.ResponseWriter, r *http.Request) {
	var req fetchRequest
	if err := api.Decode(r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	q, err := a.lockQuery(req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	tasks, err := a.fetch(r, q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, tasks)
}

// lockQuery is a validated fetchAndLock request.
type lockQuery struct {
	worker      string
	max         int
	byPriority  bool
	newestFirst bool
	wait        time.Duration
	topics      []store.TopicLock
	answers     map[string]topicAnswer
}

// topicAnswer is what a topic's request asks of the answer: all a long
// poll keeps of it besides the store's ask.
type topicAnswer struct {
	variables  []string
	extensions bool
}

func (a *API) lockQuery(req fetchRequest) (lockQuery, error) {
	q := lockQuery{byPriority: req.UsePriority, answers: map[string]topicAnswer{}}
	switch {
	case req.WorkerID == nil || *req.WorkerID == "":
		return q, api.Invalidf("workerId is required")
	case req.MaxTasks == nil:
		return q, api.Invalidf("maxTasks is required")
	case *req.MaxTasks < 0 || *req.MaxTasks > a.cfg.MaxTasks:
		return q, api.Invalidf("maxTasks %d is not between 0 and %d (SUTRA_API_MAX_TASKS)", *req.MaxTasks, a.cfg.MaxTasks)
	case len(req.Topics) > a.cfg.MaxTopics:
		return q, api.Invalidf("%d topics: a fetch asks for at most %d (SUTRA_API_MAX_TOPICS)", len(req.Topics), a.cfg.MaxTopics)
	}
	q.worker, q.max = *req.WorkerID, *req.MaxTasks
	if t := req.AsyncResponseTimeout; t != nil {
		q.wait = time.Duration(*t) * time.Millisecond
		if *t < 0 || q.wait > a.cfg.MaxAsyncResponseTimeout {
			return q, api.Invalidf("asyncResponseTimeout %d ms is not between 0 and %d", *t, a.cfg.MaxAsyncResponseTimeout.Milliseconds())
		}
	}
	for _, so := range req.Sorting {
		if so.SortBy != "createTime" || (so.SortOrder != "asc" && so.SortOrder != "desc") {
			return q, api.Invalidf("sorting by %q %q is not supported: sortBy createTime, sortOrder asc or desc", so.SortBy, so.SortOrder)
		}
		q.newestFirst = so.SortOrder == "desc"
	}
	for _, t := range req.Topics {
		switch {
		case t.TopicName == "":
			return q, api.Invalidf("a topic has no topicName")
		case t.LockDuration == nil:
			return q, api.Invalidf("topic %q has no lockDuration", t.TopicName)
		case *t.LockDuration <= 0 || time.Duration(*t.LockDuration)*time.Millisecond > a.cfg.MaxLockDuration:
			return q, api.Invalidf("lockDuration %d ms of topic %q is not between 1 and %d", *t.LockDuration, t.TopicName, a.cfg.MaxLockDuration.Milliseconds())
		case len(t.ProcessVariables) > 0:
			return q, api.Invalidf("topic %q: filtering by processVariables is not supported", t.TopicName)
		case t.ProcessDefinitionVersionTag != nil:
			return q, api.Invalidf("topic %q: filtering by processDefinitionVersionTag is not supported", t.TopicName)
		}
		if _, dup := q.answers[t.TopicName]; dup {
			return q, api.Invalidf("topic %q is asked for twice", t.TopicName)
		}
		q.answers[t.TopicName] = topicAnswer{variables: t.Variables, extensions: t.IncludeExtensionProperties}
		keys := t.ProcessDefinitionKeyIn
		if t.ProcessDefinitionKey != nil {
			keys = append(keys, *t.ProcessDefinitionKey)
		}
		for _, id := range append(t.ProcessDefinitionIDIn, deref(t.ProcessDefinitionID)...) {
			key, _, _ := cutVersion(id)
			keys = append(keys, key)
		}
		if t.BusinessKey != nil || (len(t.TenantIDIn) > 0 && !t.WithoutTenantID) {
			continue // Sutra has no business keys or tenants: this topic matches no task
		}
		q.topics = append(q.topics, store.TopicLock{Topic: t.TopicName, LockDuration: time.Duration(*t.LockDuration) * time.Millisecond, DefinitionKeys: keys})
	}
	return q, nil
}

func deref(s *string) []string {
	if s == nil {
		return nil
	}
	return []string{*s}
}

// cutVersion splits a definition id "key:version".
func cutVersion(id string) (string, int, bool) {
	i := bytes.LastIndexByte([]byte(id), ':')
	if i < 0 {
		return id, 0, false
	}
	v, err := strconv.Atoi(id[i+1:])
	return id[:i], v, err == nil
}

// errNoConn ends a long poll woken when the API's calls use every database
// connection they may: it answers what it has, nothing, and the wake-up is
// passed on.
var errNoConn = errors.New("no database connection for the API")

// fetch locks tasks for q through the one wait (usecase.Activate), waiting
// for them up to q.wait (a long poll). A long poll over
// SUTRA_API_MAX_LONG_POLLS does not wait: it answers what one fetch locked,
// maybe nothing. While it waits, a long poll holds neither its body's bytes
// nor a database connection (api.Call.Idle).
func (a *API) fetch(r *http.Request, q lockQuery) ([]lockedTask, error) {
	c := api.CallOf(r)
	out := []lockedTask{}
	err := a.deps.UseCases.Activate(r.Context(), usecase.Activation{
		Protocol: taskwait.EngineRest, Worker: q.worker, Asks: q.topics, Max: q.max, ByPriority: q.byPriority, Wait: q.wait,
		Slots: a.slots, Full: func() error { a.deps.Metrics.APILongPollsOver.Inc(); return nil },
		Stopping: a.stopping,
		Conn: usecase.Conn{Idle: c.Idle, Use: func(ctx context.Context) (func(), error) {
			if c.UseDB(ctx) != nil {
				return nil, errNoConn
			}
			return func() {}, nil
		}},
		Waiting: func(w *taskwait.Waiter) { a.TestSignals.Waiting.Signal(w.Topics()) },
	}, func(got []store.LockedTask) (err error) {
		out, err = a.answer(q, got)
		return err
	})
	if errors.Is(err, errNoConn) {
		return []lockedTask{}, nil
	}
	return out, err
}

// answer builds Camunda's answer of the tasks a fetch locked.
func (a *API) answer(q lockQuery, got []store.LockedTask) ([]lockedTask, error) {
	if q.newestFirst {
		slices.Reverse(got)
	}
	out := make([]lockedTask, 0, len(got))
	for _, t := range got {
		ans := q.answers[t.Topic]
		vars, err := toTyped(t.Variables, ans.variables)
		if err != nil {
			return nil, err
		}
		id := strconv.FormatInt(t.ID, 10)
		lt := lockedTask{
			ActivityID: t.Element, ActivityInstanceID: t.Element + ":" + t.TokenID, ExecutionID: t.TokenID,
			ID: id, LockExpirationTime: t.LockExpires.Format(camundaTime), CreateTime: t.CreatedAt.Format(camundaTime),
			ProcessDefinitionID:  fmt.Sprintf("%s:%d", t.DefinitionKey, t.DefinitionVersion),
			ProcessDefinitionKey: t.DefinitionKey, ProcessInstanceID: t.InstanceID,
			Retries: t.Retries, WorkerID: q.worker, TopicName: t.Topic, Variables: vars, Priority: t.Priority,
			ErrorMessage: t.ErrorMessage, ErrorDetails: t.ErrorDetails, ExtensionProperties: map[string]string{},
		}
		if ans.extensions && t.Headers != nil {
			lt.ExtensionProperties = t.Headers
		}
		out = append(out, lt)
	}
	return out, nil
}

// taskID reads the path's task id.
func taskID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, store.ErrNotFound // not an id this worker ever gave out
	}
	return id, nil
}

type completeRequest struct {
	WorkerID       string                `json:"workerId"`
	Variables      map[string]typedValue `json:"variables"`
	LocalVariables map[string]typedValue `json:"localVariables"`
}

func (a *API) complete(w http.ResponseWriter, r *http.Request) {
	var req completeRequest
	if err := api.Decode(r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	vars, err := fromTyped(req.Variables)
	if err == nil {
		var local map[string]any
		if local, err = fromTyped(req.LocalVariables); err == nil {
			for k, v := range local { // a task's local variables are its result too
				vars[k] = v
			}
		}
	}
	if err != nil {
		a.fail(w, r, api.Invalidf("%v", err))
		return
	}
	a.record(w, r, store.TaskReport{Worker: req.WorkerID, Kind: store.TaskCompleted, Variables: vars})
}

type failureRequest struct {
	WorkerID     string `json:"workerId"`
	ErrorMessage string `json:"errorMessage"`
	ErrorDetails string `json:"errorDetails"`
	Retries      *int   `json:"retries"`
	RetryTimeout *int64 `json:"retryTimeout"`
	// Camunda 7.20 lets a failure carry variables; Sutra keeps the
	// instance's variables as they are (accepted, ignored: see docs/tasks.md).
	Variables      map[string]typedValue `json:"variables"`
	LocalVariables map[string]typedValue `json:"localVariables"`
}

func (a *API) failure(w http.ResponseWriter, r *http.Request) {
	var req failureRequest
	if err := api.Decode(r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	switch {
	case req.Retries == nil:
		a.fail(w, r, api.Invalidf("retries is required"))
		return
	case *req.Retries < 0:
		a.fail(w, r, api.Invalidf("retries %d is negative", *req.Retries))
		return
	case req.RetryTimeout != nil && (*req.RetryTimeout < 0 || *req.RetryTimeout > a.cfg.MaxRetryTimeout.Milliseconds()):
		a.fail(w, r, api.Invalidf("retryTimeout %d ms is not between 0 and %d (SUTRA_API_MAX_RETRY_TIMEOUT)",
			*req.RetryTimeout, a.cfg.MaxRetryTimeout.Milliseconds()))
		return
	}
	o := store.TaskReport{Worker: req.WorkerID, Kind: store.TaskFailed, ErrorMessage: req.ErrorMessage,
		ErrorDetails: req.ErrorDetails, Retries: *req.Retries}
	if req.RetryTimeout != nil {
		o.RetryTimeout = time.Duration(*req.RetryTimeout) * time.Millisecond
	}
	a.record(w, r, o)
}

type bpmnErrorRequest struct {
	WorkerID     string                `json:"workerId"`
	ErrorCode    string                `json:"errorCode"`
	ErrorMessage string                `json:"errorMessage"`
	Variables    map[string]typedValue `json:"variables"`
}

func (a *API) bpmnError(w http.ResponseWriter, r *http.Request) {
	var req bpmnErrorRequest
	if err := api.Decode(r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.ErrorCode == "" {
		a.fail(w, r, api.Invalidf("errorCode is required"))
		return
	}
	vars, err := fromTyped(req.Variables)
	if err != nil {
		a.fail(w, r, api.Invalidf("%v", err))
		return
	}
	a.record(w, r, store.TaskReport{Worker: req.WorkerID, Kind: store.TaskBPMNError, ErrorCode: req.ErrorCode,
		ErrorMessage: req.ErrorMessage, Variables: vars})
}

// record records an outcome durably, with the relay that applies it, and
// answers 204 only then, handing the relay to the lanes as it does.
func (a *API) record(w http.ResponseWriter, r *http.Request, o store.TaskReport) {
	id, err := taskID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if o.Worker == "" {
		a.fail(w, r, api.Invalidf("workerId is required"))
		return
	}
	o.TaskID = id
	if _, err := a.deps.UseCases.RecordTaskOutcome(r.Context(), usecase.Conn{}, o); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type extendLockRequest struct {
	WorkerID    string `json:"workerId"`
	NewDuration *int64 `json:"newDuration"`
}

func (a *API) extendLock(w http.ResponseWriter, r *http.Request) {
	var req extendLockRequest
	if err := api.Decode(r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	id, err := taskID(r)
	switch {
	case err != nil:
		a.fail(w, r, err)
		return
	case req.WorkerID == "":
		a.fail(w, r, api.Invalidf("workerId is required"))
		return
	case req.NewDuration == nil || *req.NewDuration <= 0 || time.Duration(*req.NewDuration)*time.Millisecond > a.cfg.MaxLockDuration:
		a.fail(w, r, api.Invalidf("newDuration must be between 1 and %d ms", a.cfg.MaxLockDuration.Milliseconds()))
		return
	}
	if err := a.deps.Store.ExtendLock(r.Context(), id, req.WorkerID, time.Duration(*req.NewDuration)*time.Millisecond); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) unlock(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err == nil {
		err = a.deps.Store.Unlock(r.Context(), id)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
