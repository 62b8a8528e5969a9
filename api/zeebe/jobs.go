package zeebe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// jobQuery is a validated activation: ActivateJobs or a job stream.
type jobQuery struct {
	worker string
	ask    store.TopicLock
	only   []string // fetchVariable; none: every variable
}

func (g *Gateway) newJobQuery(typ, worker string, timeout int64, fetch []string, tenants []string) (jobQuery, error) {
	if err := checkTenant(tenants...); err != nil {
		return jobQuery{}, err
	}
	if typ == "" {
		return jobQuery{}, invalid("type is required")
	}
	// The type and the worker are stored with every job locked: ids, not
	// documents.
	for _, f := range []struct{ what, v string }{{"type", typ}, {"worker", worker}} {
		if err := api.CheckText(f.what, f.v); err != nil {
			return jobQuery{}, statusOf(err)
		}
	}
	if err := g.checkTimeout(timeout); err != nil {
		return jobQuery{}, err
	}
	return jobQuery{worker: worker, ask: store.TopicLock{Topic: typ, LockDuration: time.Duration(timeout) * time.Millisecond}, only: fetch}, nil
}

// checkTimeout refuses a lock that is not positive or longer than
// SUTRA_API_MAX_LOCK_DURATION, as /engine-rest does: no client locks a job
// for ever.
func (g *Gateway) checkTimeout(ms int64) error {
	if ms <= 0 || ms > g.cfg.MaxLockDuration.Milliseconds() {
		return invalid("timeout %d ms: a job's lock is between 1 and %d ms (SUTRA_API_MAX_LOCK_DURATION)", ms, g.cfg.MaxLockDuration.Milliseconds())
	}
	return nil
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", fault.APIInvalid, fmt.Sprintf(format, args...))
}

// exhausted refuses a call over a limit, naming it.
func exhausted(format string, args ...any) error {
	return status.Errorf(codes.ResourceExhausted, "%s: %s", fault.APIBusy, fmt.Sprintf(format, args...))
}

// useDB takes one of the database connections API calls may use
// (SUTRA_API_MAX_DB_CONNS, api.Server.AcquireDB), as an /engine-rest call
// does, so that the gateway never takes a lane's: a job call that finds
// none within a second is refused, ResourceExhausted (Zeebe's clients back
// off and retry).
func (g *Gateway) useDB(ctx context.Context) (release func(), err error) {
	release, err = g.deps.AcquireDB(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, statusOf(ctx.Err())
		}
		return nil, exhausted("the API's calls use every database connection they may (SUTRA_API_MAX_DB_CONNS); retry")
	}
	return release, nil
}

// activation is q's fetch through the one wait (usecase.Activate), with
// one of the API's database connections around each fetch statement.
func (g *Gateway) activation(q jobQuery, max int) usecase.Activation {
	return usecase.Activation{Protocol: taskwait.Zeebe, Worker: usecase.JobHolderPrefix + q.worker, Asks: []store.TopicLock{q.ask}, Max: max,
		Slots: g.slots, Stopping: g.stopping, Conn: usecase.Conn{Use: g.useDB},
		Full: func() error {
			return exhausted("%d job streams and long polls are open on this replica: SUTRA_GATEWAY_MAX_STREAMS", g.cfg.MaxStreams)
		}}
}

// activatedJobs is what a Zeebe client reads of the tasks q locked.
func activatedJobs(got []store.LockedTask, q jobQuery) ([]*pb.ActivatedJob, error) {
	out := make([]*pb.ActivatedJob, 0, len(got))
	for _, t := range got {
		j, err := activatedJob(t, q)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// activatedJob is what a Zeebe client reads of a locked task. A task is one
// element instance: its key is the element instance's too.
func activatedJob(t store.LockedTask, q jobQuery) (*pb.ActivatedJob, error) {
	vars, headers := t.VariablesNamed(q.only), t.HeadersOrEmpty()
	v, err := json.Marshal(vars)
	if err != nil {
		return nil, fmt.Errorf("job %d: its variables: %w", t.ID, err)
	}
	h, err := json.Marshal(headers)
	if err != nil {
		return nil, fmt.Errorf("job %d: its headers: %w", t.ID, err)
	}
	return &pb.ActivatedJob{
		Key: t.ID, Type: t.Topic, ProcessInstanceKey: t.InstanceKey, BpmnProcessId: t.DefinitionKey,
		ProcessDefinitionVersion: int32(t.DefinitionVersion), ProcessDefinitionKey: t.DefinitionZeebeKey,
		ElementId: t.Element, ElementInstanceKey: t.ID, CustomHeaders: string(h), Worker: q.worker,
		Retries: int32(t.Retries), Deadline: t.LockExpires.UnixMilli(), Variables: string(v), TenantId: defaultTenant,
	}, nil
}

// ActivateJobs locks up to maxJobsToActivate jobs of a type to worker for
// timeout, waiting for them up to requestTimeout (0: 10 s, negative: no
// wait, at most taskwait.MaxLongPoll): a long poll that holds no database connection while it waits.
func (g *Gateway) ActivateJobs(req *pb.ActivateJobsRequest, stream pb.Gateway_ActivateJobsServer) error {
	q, err := g.newJobQuery(req.Type, req.Worker, req.Timeout, req.FetchVariable, req.TenantIds)
	if err != nil {
		return err
	}
	max := int(req.MaxJobsToActivate)
	switch {
	case max <= 0:
		return invalid("maxJobsToActivate %d: at least 1", max)
	case max > g.cfg.MaxJobsToActivate:
		return exhausted("maxJobsToActivate %d is over SUTRA_GATEWAY_MAX_JOBS (%d)", max, g.cfg.MaxJobsToActivate)
	}
	// Compared in milliseconds: converted first, a huge one overflows (to
	// a negative wait: no wait at all).
	wait := taskwait.MaxLongPoll
	switch {
	case req.RequestTimeout == 0:
		wait = usecase.DefaultJobLongPoll
	case req.RequestTimeout < taskwait.MaxLongPoll.Milliseconds():
		wait = time.Duration(req.RequestTimeout) * time.Millisecond
	}
	a := g.activation(q, max)
	a.Wait = wait
	a.Waiting = func(*taskwait.Waiter) { g.TestSignals.Waiting.Signal(q.ask.Topic) }
	return statusOf(g.deps.UseCases.Activate(stream.Context(), a, func(got []store.LockedTask) error {
		jobs, err := activatedJobs(got, q)
		if err != nil {
			return err
		}
		g.TestSignals.Answered.Signal(len(jobs))
		return g.sendJobs(stream, jobs)
	}))
}

// sendJobs answers an ActivateJobs with got in as many responses as keep
// each within SUTRA_GATEWAY_MAX_MESSAGE_SIZE, as Zeebe's gateway splits
// them: its clients read 4 MiB a message by default. A job larger than that
// goes alone.
func (g *Gateway) sendJobs(stream pb.Gateway_ActivateJobsServer, got []*pb.ActivatedJob) error {
	var batch []*pb.ActivatedJob
	size := 0
	for _, j := range got {
		n := proto.Size(j) + 8 // the field's tag and length
		if len(batch) > 0 && size+n > g.cfg.MaxMessageSize {
			if err := stream.Send(&pb.ActivateJobsResponse{Jobs: batch}); err != nil {
				return err
			}
			batch, size = nil, 0
		}
		batch, size = append(batch, j), size+n
	}
	return stream.Send(&pb.ActivateJobsResponse{Jobs: batch})
}

// StreamActivatedJobs pushes jobs of a type to the worker as they become
// activatable, until the client goes or the gateway stops: a job created on
// this replica wakes a waiting stream at once, the look finds the others.
func (g *Gateway) StreamActivatedJobs(req *pb.StreamActivatedJobsRequest, stream pb.Gateway_StreamActivatedJobsServer) error {
	q, err := g.newJobQuery(req.Type, req.Worker, req.Timeout, req.FetchVariable, req.TenantIds)
	if err != nil {
		return err
	}
	// A stream takes one job a fetch, then passes a wake-up on to one of
	// the streams and long polls of its type (maybe itself) and waits: a
	// backlog spreads over the workers, not queued behind the first one's
	// (a stream has no flow control but gRPC's window).
	a := g.activation(q, 1)
	a.Stream = true
	a.Waiting = func(*taskwait.Waiter) { g.TestSignals.Streaming.Signal(q.ask.Topic) }
	err = g.deps.UseCases.Activate(stream.Context(), a, func(got []store.LockedTask) error {
		jobs, err := activatedJobs(got, q)
		for _, j := range jobs {
			if err := stream.Send(j); err != nil {
				return err // the job stays locked until its timeout, as in Zeebe
			}
		}
		return err
	})
	return statusOf(err)
}

// jobVariables reads a job call's variables: a JSON object, or nothing.
func jobVariables(text string) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var vars map[string]any
	if err := json.Unmarshal([]byte(text), &vars); err != nil {
		return nil, invalid("variables are not a JSON object: %v", err)
	}
	return vars, nil
}

// record records a job's outcome durably, with the relay that applies it,
// fenced on a Zeebe worker holding the job, and answers only then. Never a
// claim in the request.
func (g *Gateway) record(ctx context.Context, o store.TaskReport) error {
	o.HolderPrefix = usecase.JobHolderPrefix
	if _, err := g.deps.UseCases.RecordTaskOutcome(ctx, usecase.Conn{Use: g.useDB}, o); err != nil {
		return jobStatus(o.TaskID, err)
	}
	return nil
}

// jobStatus answers a job call's store error as Zeebe does: no such job (or
// one already completed) is NotFound; a job no Zeebe worker holds (its lock
// expired and another took it, or an /engine-rest worker holds it) is
// FailedPrecondition with SUTRA.TASK.LOCK_LOST.
func jobStatus(key int64, err error) error {
	var lock *store.LockError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s: job %d does not exist or is finished", fault.TaskNotFound, key)
	case errors.As(err, &lock) && lock.Holder == "":
		return status.Errorf(codes.FailedPrecondition, "%s: job %d is not activated", fault.TaskLockLost, key)
	case errors.As(err, &lock) && lock.Expired:
		return status.Errorf(codes.FailedPrecondition, "%s: job %d: its activation timed out", fault.TaskLockLost, key)
	case errors.As(err, &lock) && strings.HasPrefix(lock.Holder, usecase.JobHolderPrefix):
		return status.Errorf(codes.FailedPrecondition, "%s: job %d is activated by worker %q", fault.TaskLockLost, key, strings.TrimPrefix(lock.Holder, usecase.JobHolderPrefix))
	case errors.As(err, &lock):
		return status.Errorf(codes.FailedPrecondition, "%s: job %d is locked by /engine-rest worker %q", fault.TaskLockLost, key, lock.Holder)
	}
	return statusOf(err)
}

// CompleteJob completes a job with variables (a JSON object).
func (g *Gateway) CompleteJob(ctx context.Context, req *pb.CompleteJobRequest) (*pb.CompleteJobResponse, error) {
	vars, err := jobVariables(req.Variables)
	if err != nil {
		return nil, err
	}
	if err := g.record(ctx, store.TaskReport{TaskID: req.JobKey, Kind: store.TaskCompleted, Variables: vars}); err != nil {
		return nil, err
	}
	return &pb.CompleteJobResponse{}, nil
}

// FailJob fails a job: with retries left it is activatable again after
// retryBackOff, with none it stops in an incident
// (SUTRA.INCIDENT.TASK_FAILED). Its variables are read (a malformed object
// is refused) but, as /engine-rest's failure's, not applied.
func (g *Gateway) FailJob(ctx context.Context, req *pb.FailJobRequest) (*pb.FailJobResponse, error) {
	if _, err := jobVariables(req.Variables); err != nil {
		return nil, err
	}
	switch {
	case req.Retries < 0:
		return nil, invalid("retries %d is negative", req.Retries)
	case req.RetryBackOff < 0:
		return nil, invalid("retryBackOff %d ms is negative", req.RetryBackOff)
	}
	o := store.TaskReport{TaskID: req.JobKey, Kind: store.TaskFailed, ErrorMessage: req.ErrorMessage,
		Retries: int(req.Retries), RetryTimeout: time.Duration(req.RetryBackOff) * time.Millisecond}
	if err := g.record(ctx, o); err != nil {
		return nil, err
	}
	return &pb.FailJobResponse{}, nil
}

// ThrowError throws a BPMN error from a job: an error boundary event or
// event subprocess catches it, else it stops in an incident.
func (g *Gateway) ThrowError(ctx context.Context, req *pb.ThrowErrorRequest) (*pb.ThrowErrorResponse, error) {
	if req.ErrorCode == "" {
		return nil, invalid("errorCode is required")
	}
	vars, err := jobVariables(req.Variables)
	if err != nil {
		return nil, err
	}
	o := store.TaskReport{TaskID: req.JobKey, Kind: store.TaskBPMNError, ErrorCode: req.ErrorCode,
		ErrorMessage: req.ErrorMessage, Variables: vars}
	if err := g.record(ctx, o); err != nil {
		return nil, err
	}
	return &pb.ThrowErrorResponse{}, nil
}

// UpdateJobRetries sets the retries of an open job, or of a job that failed
// into an incident: its task, created again when the incident is resolved,
// has them.
func (g *Gateway) UpdateJobRetries(ctx context.Context, req *pb.UpdateJobRetriesRequest) (*pb.UpdateJobRetriesResponse, error) {
	if req.Retries < 1 {
		return nil, invalid("retries %d: at least 1", req.Retries)
	}
	retries := int(req.Retries)
	if err := g.deps.UseCases.UpdateJob(ctx, usecase.Conn{Use: g.useDB}, req.JobKey, usecase.JobChange{Retries: &retries}); err != nil {
		return nil, jobStatus(req.JobKey, err)
	}
	return &pb.UpdateJobRetriesResponse{}, nil
}

// UpdateJobTimeout sets an activated job's lock to expire timeout from now
// (longer or shorter).
func (g *Gateway) UpdateJobTimeout(ctx context.Context, req *pb.UpdateJobTimeoutRequest) (*pb.UpdateJobTimeoutResponse, error) {
	if err := g.checkTimeout(req.Timeout); err != nil {
		return nil, err
	}
	timeout := time.Duration(req.Timeout) * time.Millisecond
	if err := g.deps.UseCases.UpdateJob(ctx, usecase.Conn{Use: g.useDB}, req.JobKey, usecase.JobChange{Timeout: &timeout}); err != nil {
		return nil, jobStatus(req.JobKey, err)
	}
	return &pb.UpdateJobTimeoutResponse{}, nil
}

// ResolveIncident is the admin retry (POST /v1/incidents/{id}/retry): the
// incident's element runs again, a failed job's task is created anew with
// the retries UpdateJobRetries set on the failed job, else its
// definition's. It answers once the step committed.
func (g *Gateway) ResolveIncident(ctx context.Context, req *pb.ResolveIncidentRequest) (*pb.ResolveIncidentResponse, error) {
	_, err := g.deps.UseCases.ResolveIncident(ctx, usecase.Conn{Use: g.useDB}, usecase.IncidentRetry{ID: req.IncidentKey})
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, usecase.ErrIncidentResolved):
		return nil, status.Errorf(codes.NotFound, "%s: incident %d does not exist or is resolved", fault.NotFound, req.IncidentKey)
	case fault.Code(err) == fault.NotWaiting:
		return nil, status.Errorf(codes.FailedPrecondition, "%s: incident %d: %s", fault.NotWaiting, req.IncidentKey, fault.Reason(err))
	case err != nil:
		return nil, statusOf(err)
	}
	return &pb.ResolveIncidentResponse{}, nil
}
