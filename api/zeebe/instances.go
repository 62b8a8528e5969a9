package zeebe

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
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
	in, err := g.start(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	return &pb.CreateProcessInstanceResponse{ProcessDefinitionKey: in.DefinitionKey, BpmnProcessId: in.Definition,
		Version: int32(in.DefinitionVersion), ProcessInstanceKey: in.Key, TenantId: defaultTenant}, nil
}

// defaultRequestTimeout bounds CreateProcessInstanceWithResult's wait when
// the request names none: Zeebe's gateway default.
const defaultRequestTimeout = 15 * time.Second

// CreateProcessInstanceWithResult starts an instance and answers when it
// completes, with its variables (those named in fetchVariables, or all):
// DeadlineExceeded when it has not within requestTimeout (the instance runs
// on), FailedPrecondition when it ended otherwise (cancelled, or
// terminated by an uncaught error).
func (g *Gateway) CreateProcessInstanceWithResult(ctx context.Context, req *pb.CreateProcessInstanceWithResultRequest) (*pb.CreateProcessInstanceWithResultResponse, error) {
	if !g.ends.reserve() {
		return nil, status.Errorf(codes.ResourceExhausted, "%s: %d CreateProcessInstanceWithResult calls wait on this replica already (SUTRA_GATEWAY_MAX_STREAMS); retry later, or create without a result",
			fault.APIBusy, g.cfg.MaxStreams)
	}
	defer g.ends.release()
	timeout := defaultRequestTimeout
	if req.RequestTimeout > 0 {
		timeout = time.Duration(req.RequestTimeout) * time.Millisecond
	}
	// The clock starts with the call, as Zeebe's does, so the start counts.
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// Registered before the start, so no end is missed (start records the
	// instance id in w before it dispatches the step).
	w := &endWaiter{ended: make(chan struct{}, 1)}
	defer g.ends.remove(w)
	in, err := g.start(ctx, req.Request, w)
	if err != nil {
		return nil, err
	}
	for {
		in, err = g.deps.Store.InstanceKeys(ctx, in.ID, true)
		if err != nil {
			return nil, statusOf(err)
		}
		if !engine.Status(in.Status).Live() {
			break
		}
		select {
		case <-w.ended:
		case <-deadline.C:
			return nil, status.Errorf(codes.DeadlineExceeded, "%s: instance %d has not completed within the request timeout of %s; it runs on",
				fault.Unavailable, in.Key, timeout)
		case <-g.stopping:
			return nil, status.Errorf(codes.Unavailable, "%s: the gateway is stopping; instance %d runs on", fault.Unavailable, in.Key)
		case <-ctx.Done():
			return nil, statusOf(ctx.Err())
		}
	}
	if in.Status != string(engine.StatusCompleted) {
		return nil, status.Errorf(codes.FailedPrecondition, "%s: instance %d ended %s, not completed", fault.NotWaiting, in.Key, in.Status)
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

// start starts the instance req asks for, as POST /v1/instances does, and
// reads its keys. w, when set, waits for the instance's end from before the
// step.
func (g *Gateway) start(ctx context.Context, req *pb.CreateProcessInstanceRequest, w *endWaiter) (store.KeyedInstance, error) {
	if req == nil {
		return store.KeyedInstance{}, status.Errorf(codes.InvalidArgument, "%s: request is required", fault.APIInvalid)
	}
	if err := checkTenant(req.TenantId); err != nil {
		return store.KeyedInstance{}, err
	}
	if len(req.StartInstructions) > 0 {
		return store.KeyedInstance{}, status.Errorf(codes.InvalidArgument,
			"%s: startInstructions are not supported: an instance starts at its none start event", fault.APIInvalid)
	}
	vars, err := api.DecodeVariables("variables", []byte(req.Variables))
	if err != nil {
		return store.KeyedInstance{}, statusOf(err)
	}
	definition, version := req.BpmnProcessId, int(req.Version)
	switch {
	case req.ProcessDefinitionKey != 0:
		definition, version, err = g.deps.Store.DefinitionByKey(ctx, req.ProcessDefinitionKey)
		if errors.Is(err, store.ErrNotFound) {
			return store.KeyedInstance{}, status.Errorf(codes.NotFound, "%s: no process definition with key %d",
				fault.UnknownDefinition, req.ProcessDefinitionKey)
		}
		if err != nil {
			return store.KeyedInstance{}, statusOf(err)
		}
	case definition == "":
		return store.KeyedInstance{}, status.Errorf(codes.InvalidArgument, "%s: bpmnProcessId or processDefinitionKey is required", fault.APIInvalid)
	case version == -1:
		version = 0 // the latest (operations.Start)
	case version < 1:
		return store.KeyedInstance{}, status.Errorf(codes.NotFound, "%s: process %q has no version %d (-1 names the latest)",
			fault.UnknownDefinition, definition, version)
	}
	id := api.NewID()
	if w != nil {
		g.ends.add(id, w)
	}
	if err := g.deps.UseCases.StartInstance(ctx, usecase.Conn{}, id, definition, version, vars); err != nil {
		return store.KeyedInstance{}, statusOf(err)
	}
	in, err := g.deps.Store.InstanceKeys(ctx, id, false)
	return in, statusOf(err)
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

// ends are the calls waiting for instances to end, by instance id. A
// step of this replica that ends an instance wakes its waiters at once
// (Ended, which the lanes call); pollEnds finds, every poll interval, the
// ends other replicas committed, with one statement for every waiter.
type ends struct {
	mu      sync.Mutex
	waiting map[string]map[*endWaiter]struct{}
	// calls and max cap the calls waiting at once (SUTRA_GATEWAY_MAX_STREAMS,
	// counted apart from the job streams): each holds a goroutine and a
	// place in the look for ends until its requestTimeout.
	calls, max int
}

// endWaiter is one waiting call. ended (capacity 1) holds a wake-up when
// its instance may have ended since the waiter last looked: a wake-up
// between a look and the wait stays there, so none is lost.
type endWaiter struct {
	id    string
	ended chan struct{}
}

func newEnds(max int) *ends { return &ends{waiting: map[string]map[*endWaiter]struct{}{}, max: max} }

// reserve admits one more waiting call, or answers false when max wait.
func (e *ends) reserve() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.calls >= e.max {
		return false
	}
	e.calls++
	return true
}

func (e *ends) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls--
}

func (e *ends) add(id string, w *endWaiter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w.id = id
	if e.waiting[id] == nil {
		e.waiting[id] = map[*endWaiter]struct{}{}
	}
	e.waiting[id][w] = struct{}{}
}

func (e *ends) remove(w *endWaiter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ws := e.waiting[w.id]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(e.waiting, w.id)
		}
	}
}

func (e *ends) wake(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for w := range e.waiting[id] {
		w.wake()
	}
}

func (e *ends) ids() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.waiting))
	for id := range e.waiting {
		ids = append(ids, id)
	}
	return ids
}

func (w *endWaiter) wake() {
	select {
	case w.ended <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// Ended wakes the calls waiting for instance id's end: the lanes call it
// for each instance a step of this replica ended. It never blocks.
func (g *Gateway) Ended(id string) { g.ends.wake(id) }

// pollEnds looks for the ends of waited-for instances that other replicas
// committed, every poll interval, until ctx ends.
func (g *Gateway) pollEnds(ctx context.Context) {
	t := time.NewTicker(g.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := g.ends.ids()
		if len(ids) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, g.cfg.PollInterval+5*time.Second)
		ended, err := g.deps.Store.Ended(cctx, ids)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				g.deps.Logger.Warn("looking for ended instances failed; looking again next interval", "code", fault.Code(err), "err", err)
			}
			continue
		}
		for _, id := range ended {
			g.ends.wake(id)
		}
	}
}
