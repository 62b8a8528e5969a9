package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

type activationRequest struct {
	Type              string   `json:"type"`
	Worker            string   `json:"worker"`
	Timeout           Long     `json:"timeout"`
	MaxJobsToActivate int      `json:"maxJobsToActivate"`
	FetchVariable     []string `json:"fetchVariable"`
	RequestTimeout    Long     `json:"requestTimeout"`
	TenantIDs         []string `json:"tenantIds"`
}

type activatedJob struct {
	Type                     string            `json:"type"`
	ProcessDefinitionID      string            `json:"processDefinitionId"`
	ProcessDefinitionVersion int               `json:"processDefinitionVersion"`
	ElementID                string            `json:"elementId"`
	CustomHeaders            map[string]string `json:"customHeaders"`
	Worker                   string            `json:"worker"`
	Retries                  int               `json:"retries"`
	Deadline                 int64             `json:"deadline"`
	Variables                map[string]any    `json:"variables"`
	TenantID                 string            `json:"tenantId"`
	JobKey                   Key               `json:"jobKey"`
	ProcessInstanceKey       Key               `json:"processInstanceKey"`
	ProcessDefinitionKey     Key               `json:"processDefinitionKey"`
	ElementInstanceKey       Key               `json:"elementInstanceKey"`
	Kind                     string            `json:"kind"`
	ListenerEventType        string            `json:"listenerEventType"`
}

// errNoConn ends a long poll woken when the API's calls use every database
// connection they may: it answers what it has, nothing.
var errNoConn = errors.New("no database connection for the API")

// activateJobs locks up to maxJobsToActivate jobs of a type to worker for
// timeout, waiting for them up to requestTimeout (0: 10 s; negative: no
// wait; at most taskwait.MaxLongPoll): the one wait (usecase.Activate),
// woken by the push job path, holding no database connection while it
// waits.
func (a *API) activateJobs(c *call) (answer, error) {
	var req activationRequest
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	if err := checkTenants(req.TenantIDs...); err != nil {
		return answer{}, err
	}
	switch {
	case req.Type == "":
		return answer{}, api.Invalidf("type is required")
	case req.MaxJobsToActivate < 1:
		return answer{}, api.Invalidf("maxJobsToActivate %d: at least 1", req.MaxJobsToActivate)
	case req.MaxJobsToActivate > a.cfg.MaxJobsToActivate:
		return answer{}, fault.New(fault.APIBusy, "maxJobsToActivate %d is over SUTRA_GATEWAY_MAX_JOBS (%d)", req.MaxJobsToActivate, a.cfg.MaxJobsToActivate)
	}
	if err := a.checkTimeout(int64(req.Timeout)); err != nil {
		return answer{}, err
	}
	for _, f := range []struct{ what, v string }{{"type", req.Type}, {"worker", req.Worker}} {
		if err := api.CheckText(f.what, f.v); err != nil {
			return answer{}, err
		}
	}
	wait := taskwait.MaxLongPoll
	switch {
	case req.RequestTimeout == 0:
		wait = usecase.DefaultJobLongPoll
	case req.RequestTimeout < 0:
		wait = 0
	case int64(req.RequestTimeout) < taskwait.MaxLongPoll.Milliseconds():
		wait = time.Duration(req.RequestTimeout) * time.Millisecond
	}
	cl := api.CallOf(c.r)
	ask := store.TopicLock{Topic: req.Type, LockDuration: time.Duration(req.Timeout) * time.Millisecond}
	jobs := []activatedJob{}
	err := a.deps.UseCases.Activate(c.ctx(), usecase.Activation{
		Protocol: taskwait.REST, Worker: usecase.JobHolderPrefix + req.Worker, Asks: []store.TopicLock{ask}, Max: req.MaxJobsToActivate, Wait: wait,
		Slots: a.slots, Stopping: a.stopping,
		Full: func() error {
			return fault.New(fault.APIBusy, "%d job activations wait on this replica already: SUTRA_API_MAX_LONG_POLLS", a.cfg.MaxLongPolls)
		},
		Conn: usecase.Conn{Idle: cl.Idle, Use: func(ctx context.Context) (func(), error) {
			if cl.UseDB(ctx) != nil {
				return nil, errNoConn
			}
			return func() {}, nil
		}},
		Waiting: func(*taskwait.Waiter) {
			if f := a.waiting.Load(); f != nil {
				(*f)(req.Type)
			}
		},
	}, func(got []store.LockedTask) error {
		for _, t := range got {
			jobs = append(jobs, jobOf(t, req))
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNoConn) {
		return answer{}, err
	}
	return ok(map[string]any{"jobs": jobs}), nil
}

// jobOf is what a Camunda 8 client reads of a locked task. A task is one
// element instance: its key is the element instance's too.
func jobOf(t store.LockedTask, req activationRequest) activatedJob {
	vars, headers := t.VariablesNamed(req.FetchVariable), t.HeadersOrEmpty()
	return activatedJob{Type: t.Topic, ProcessDefinitionID: t.DefinitionKey, ProcessDefinitionVersion: t.DefinitionVersion,
		ElementID: t.Element, CustomHeaders: headers, Worker: req.Worker, Retries: t.Retries, Deadline: t.LockExpires.UnixMilli(),
		Variables: vars, TenantID: defaultTenant, JobKey: Key(t.ID), ProcessInstanceKey: Key(t.InstanceKey),
		ProcessDefinitionKey: Key(t.DefinitionZeebeKey), ElementInstanceKey: Key(t.ID), Kind: "BPMN_ELEMENT", ListenerEventType: "UNSPECIFIED"}
}

// checkTimeout refuses a lock that is not positive or longer than
// SUTRA_API_MAX_LOCK_DURATION: no client locks a job for ever.
func (a *API) checkTimeout(ms int64) error {
	if ms <= 0 || ms > a.cfg.MaxLockDuration.Milliseconds() {
		return api.Invalidf("timeout %d ms: a job's lock is between 1 and %d ms (SUTRA_API_MAX_LOCK_DURATION)", ms, a.cfg.MaxLockDuration.Milliseconds())
	}
	return nil
}

// checkTenants refuses a tenant other than the default one: Sutra has one.
func checkTenants(ids ...string) error {
	for _, id := range ids {
		if id != "" && id != defaultTenant {
			return api.Invalidf("tenant %q: Sutra has one tenant, %s", id, defaultTenant)
		}
	}
	return nil
}

// record records a job's outcome durably (usecase.RecordTaskOutcome),
// fenced on a Camunda 8 worker holding the job, and answers 204 only then.
func (a *API) record(c *call, o store.TaskReport) (answer, error) {
	o.HolderPrefix = usecase.JobHolderPrefix
	if _, err := a.deps.UseCases.RecordTaskOutcome(c.ctx(), c.conn(), o); err != nil {
		return answer{}, jobProblem(o.TaskID, err)
	}
	return noContent(), nil
}

// jobProblem answers a job call's store error: no such job (or one
// finished) is 404 SUTRA.TASK.NOT_FOUND; one no Camunda 8 worker holds is
// 409 SUTRA.TASK.LOCK_LOST.
func jobProblem(key int64, err error) error {
	var lock *store.LockError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return refuse(http.StatusNotFound, fault.TaskNotFound, "job "+itoa(key)+" does not exist or is finished")
	case errors.As(err, &lock):
		return refuse(http.StatusConflict, fault.TaskLockLost, "job "+itoa(key)+": "+lock.Error())
	}
	return err
}

func (a *API) completeJob(c *call) (answer, error) {
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
	return a.record(c, store.TaskReport{TaskID: key, Kind: store.TaskCompleted, Variables: vars})
}

// failJob fails a job: with retries left it is activatable again after
// retryBackOff, with none it stops in an incident (errorType
// JOB_NO_RETRIES). Its variables are read but, as the gateway's, not
// applied.
func (a *API) failJob(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	var req struct {
		Retries      int             `json:"retries"`
		ErrorMessage string          `json:"errorMessage"`
		RetryBackOff Long            `json:"retryBackOff"`
		Variables    json.RawMessage `json:"variables"`
	}
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	if _, err := variables(req.Variables); err != nil {
		return answer{}, err
	}
	switch {
	case req.Retries < 0:
		return answer{}, api.Invalidf("retries %d is negative", req.Retries)
	case req.RetryBackOff < 0:
		return answer{}, api.Invalidf("retryBackOff %d ms is negative", req.RetryBackOff)
	}
	return a.record(c, store.TaskReport{TaskID: key, Kind: store.TaskFailed, ErrorMessage: req.ErrorMessage,
		Retries: req.Retries, RetryTimeout: time.Duration(req.RetryBackOff) * time.Millisecond})
}

// throwError throws a BPMN error from a job: an error boundary event or
// event subprocess catches it, else it stops in an incident.
func (a *API) throwError(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	var req struct {
		ErrorCode    string          `json:"errorCode"`
		ErrorMessage string          `json:"errorMessage"`
		Variables    json.RawMessage `json:"variables"`
	}
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	if req.ErrorCode == "" {
		return answer{}, api.Invalidf("errorCode is required")
	}
	vars, err := variables(req.Variables)
	if err != nil {
		return answer{}, err
	}
	return a.record(c, store.TaskReport{TaskID: key, Kind: store.TaskBPMNError, ErrorCode: req.ErrorCode,
		ErrorMessage: req.ErrorMessage, Variables: vars})
}

// updateJob sets a job's retries (the admin token's, as the gateway's
// UpdateJobRetries) and its lock's timeout from now (usecase.UpdateJob).
func (a *API) updateJob(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	var req struct {
		Changeset struct {
			Retries *int  `json:"retries"`
			Timeout *Long `json:"timeout"`
		} `json:"changeset"`
	}
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	ch := req.Changeset
	switch {
	case ch.Retries == nil && ch.Timeout == nil:
		return answer{}, api.Invalidf("the changeset changes nothing: name retries or timeout")
	case ch.Retries != nil && *ch.Retries < 1:
		return answer{}, api.Invalidf("retries %d: at least 1", *ch.Retries)
	case ch.Retries != nil && api.ScopeOf(c.r) == api.Tasks:
		return answer{}, refuse(http.StatusForbidden, fault.APIForbidden, "a job's retries are the admin token's to change (SUTRA_ADMIN_TOKEN), as UpdateJobRetries")
	}
	change := usecase.JobChange{Retries: ch.Retries}
	if ch.Timeout != nil {
		if err := a.checkTimeout(int64(*ch.Timeout)); err != nil {
			return answer{}, err
		}
		d := time.Duration(*ch.Timeout) * time.Millisecond
		change.Timeout = &d
	}
	if err := a.deps.UseCases.UpdateJob(c.ctx(), c.conn(), key, change); err != nil {
		return answer{}, jobProblem(key, err)
	}
	return noContent(), nil
}
