package zeebe

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// The instance RPCs run the admin operations' use cases (usecase.StartInstance
// and the others) on the admin lane, as POST /v1/instances, POST /v1/instances/{id}/cancel and
// PATCH /v1/instances/{id}/variables do; a held claim answers Unavailable
// with SUTRA.ADMIN.<OP>.CLAIM_HELD, a race to retry.

// CreateProcessInstance starts an instance of a definition named by
// bpmnProcessId and version (-1: the latest) or by processDefinitionKey.
func (g *Gateway) CreateProcessInstance(ctx context.Context, req *pb.CreateProcessInstanceRequest) (*pb.CreateProcessInstanceResponse, error) {
	s, err := g.resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := g.deps.UseCases.StartInstance(ctx, usecase.Conn{}, s.ID, s.Definition, s.Version, s.Vars); err != nil {
		return nil, statusOf(err)
	}
	in, err := g.deps.Store.InstanceKeys(ctx, s.ID, false)
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.CreateProcessInstanceResponse{ProcessDefinitionKey: in.DefinitionKey, BpmnProcessId: in.Definition,
		Version: int32(in.DefinitionVersion), ProcessInstanceKey: in.Key, TenantId: defaultTenant}, nil
}

// defaultRequestTimeout bounds CreateProcessInstanceWithResult's wait when
// the request names none: Zeebe's gateway default.
const defaultRequestTimeout = 15 * time.Second

// CreateProcessInstanceWithResult starts an instance and answers when it
// completes (usecase.StartInstanceWithResult), with its variables (those
// named in fetchVariables, or all): DeadlineExceeded when it has not
// within requestTimeout (the instance runs on), FailedPrecondition when it
// ended otherwise (cancelled, or terminated by an uncaught error).
func (g *Gateway) CreateProcessInstanceWithResult(ctx context.Context, req *pb.CreateProcessInstanceWithResultRequest) (*pb.CreateProcessInstanceWithResultResponse, error) {
	timeout := defaultRequestTimeout
	if req.RequestTimeout > 0 {
		timeout = time.Duration(req.RequestTimeout) * time.Millisecond
	}
	s, err := g.resolve(ctx, req.Request)
	if err != nil {
		return nil, err
	}
	s.Timeout, s.Stopping, s.Limit = timeout, g.stopping, "SUTRA_GATEWAY_MAX_STREAMS"
	in, err := g.deps.UseCases.StartInstanceWithResult(ctx, usecase.Conn{}, s)
	switch {
	case errors.Is(err, usecase.ErrResultsFull):
		return nil, status.Error(codes.ResourceExhausted, fault.Code(err)+": "+fault.Reason(err))
	case errors.Is(err, usecase.ErrNoResultYet):
		return nil, status.Error(codes.DeadlineExceeded, fault.Code(err)+": "+fault.Reason(err))
	case errors.Is(err, usecase.ErrNotCompleted):
		return nil, status.Error(codes.FailedPrecondition, fault.Code(err)+": "+fault.Reason(err))
	case err != nil:
		return nil, statusOf(err)
	}
	vars := in.Variables
	if len(req.FetchVariables) > 0 {
		vars = make(map[string]any, len(req.FetchVariables))
		for _, name := range req.FetchVariables {
			if v, ok := in.Variables[name]; ok {
				vars[name] = v
			}
		}
	}
	doc, err := json.Marshal(vars)
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.CreateProcessInstanceWithResultResponse{ProcessDefinitionKey: in.DefinitionKey, BpmnProcessId: in.Definition,
		Version: int32(in.DefinitionVersion), ProcessInstanceKey: in.Key, Variables: string(doc), TenantId: defaultTenant}, nil
}

// resolve reads the start req asks for, as POST /v1/instances does: a new
// instance id, the definition and version to start, the variables.
func (g *Gateway) resolve(ctx context.Context, req *pb.CreateProcessInstanceRequest) (usecase.Result, error) {
	if req == nil {
		return usecase.Result{}, status.Errorf(codes.InvalidArgument, "%s: request is required", fault.APIInvalid)
	}
	if err := checkTenant(req.TenantId); err != nil {
		return usecase.Result{}, err
	}
	if len(req.StartInstructions) > 0 {
		return usecase.Result{}, status.Errorf(codes.InvalidArgument,
			"%s: startInstructions are not supported: an instance starts at its none start event", fault.APIInvalid)
	}
	vars, err := api.DecodeVariables("variables", []byte(req.Variables))
	if err != nil {
		return usecase.Result{}, statusOf(err)
	}
	definition, version := req.BpmnProcessId, int(req.Version)
	switch {
	case req.ProcessDefinitionKey != 0:
		definition, version, err = g.deps.Store.DefinitionByKey(ctx, req.ProcessDefinitionKey)
		if errors.Is(err, store.ErrNotFound) {
			return usecase.Result{}, status.Errorf(codes.NotFound, "%s: no process definition with key %d",
				fault.UnknownDefinition, req.ProcessDefinitionKey)
		}
		if err != nil {
			return usecase.Result{}, statusOf(err)
		}
	case definition == "":
		return usecase.Result{}, status.Errorf(codes.InvalidArgument, "%s: bpmnProcessId or processDefinitionKey is required", fault.APIInvalid)
	case version == -1:
		version = 0 // the latest (operations.Start)
	case version < 1:
		return usecase.Result{}, status.Errorf(codes.NotFound, "%s: process %q has no version %d (-1 names the latest)",
			fault.UnknownDefinition, definition, version)
	}
	return usecase.Result{ID: api.NewID(), Definition: definition, Version: version, Vars: vars}, nil
}

// CancelProcessInstance cancels the instance: every wait closed, its
// children cancelled, its open incidents resolved. User tasks with
// canceling listeners run them first: the instance is cancelling until
// their jobs are done, and a cancel of it meanwhile changes nothing. An
// instance that does not exist or has ended is NotFound, as in Zeebe,
// whose state holds no ended instance.
func (g *Gateway) CancelProcessInstance(ctx context.Context, req *pb.CancelProcessInstanceRequest) (*pb.CancelProcessInstanceResponse, error) {
	in, err := g.activeInstance(ctx, req.ProcessInstanceKey)
	if err != nil {
		return nil, err
	}
	if err := g.runOn(in, g.deps.UseCases.CancelInstance(ctx, usecase.Conn{}, in.ID)); err != nil {
		return nil, err
	}
	return &pb.CancelProcessInstanceResponse{}, nil
}

// SetVariables merges variables into an instance's, as PATCH
// /v1/instances/{id}/variables does. elementInstanceKey names a process
// instance: Sutra keeps variables at the process level only, so local and
// not local mean the same there, as in Zeebe for the process instance's
// own scope. Any other key is NotFound. The answer's key is a fresh key
// naming this update.
func (g *Gateway) SetVariables(ctx context.Context, req *pb.SetVariablesRequest) (*pb.SetVariablesResponse, error) {
	vars, err := api.DecodeVariables("variables", []byte(req.Variables))
	if err != nil {
		return nil, statusOf(err)
	}
	in, err := g.activeInstance(ctx, req.ElementInstanceKey)
	if err != nil {
		return nil, err
	}
	if err := g.runOn(in, g.deps.UseCases.SetVariables(ctx, usecase.Conn{}, in.ID, vars)); err != nil {
		return nil, err
	}
	key, err := g.deps.Store.NextKey(ctx)
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.SetVariablesResponse{Key: key}, nil
}

// activeInstance reads the instance whose key is key: NotFound when there is
// none or it has ended (a cancelling one has not).
func (g *Gateway) activeInstance(ctx context.Context, key int64) (store.KeyedInstance, error) {
	in, err := g.deps.Store.InstanceByKey(ctx, key, false)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return in, status.Errorf(codes.NotFound, "%s: no process instance with key %d", fault.NotFound, key)
	case err != nil:
		return in, statusOf(err)
	case !engine.Status(in.Status).Live():
		return in, status.Errorf(codes.NotFound, "%s: process instance %d has ended (%s)", fault.NotFound, key, in.Status)
	}
	return in, nil
}

// runOn answers the error of an admin operation on instance in; an
// instance that ended meanwhile is NotFound, as activeInstance answers.
func (g *Gateway) runOn(in store.KeyedInstance, err error) error {
	if fault.Code(err) == fault.NotWaiting {
		return status.Errorf(codes.NotFound, "%s: process instance %d: %s", fault.NotFound, in.Key, fault.Reason(err))
	}
	return statusOf(err)
}
