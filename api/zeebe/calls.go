package zeebe

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// scopes names, per RPC, the credentials that may call it. A job worker's
// token (SUTRA_API_TOKEN) works jobs and publishes messages, as job workers
// do; what deploys, starts, cancels or repairs takes an operator's
// (SUTRA_ADMIN_TOKEN), and so does evaluating a decision, as
// POST /v1/decisions/{id}/evaluation. Topology answers every admitted
// caller. An RPC missing here takes the admin token (the unimplemented ones
// answer Unimplemented after that).
var scopes = map[string]api.Scope{
	"Topology":            api.Tasks | api.Admin,
	"ActivateJobs":        api.Tasks | api.Admin,
	"StreamActivatedJobs": api.Tasks | api.Admin,
	"CompleteJob":         api.Tasks | api.Admin,
	"FailJob":             api.Tasks | api.Admin,
	"ThrowError":          api.Tasks | api.Admin,
	"UpdateJobTimeout":    api.Tasks | api.Admin,
	"PublishMessage":      api.Tasks | api.Admin,
	"EvaluateDecision":    api.Admin,
}

// rpcName is the method's name without its service: "/gateway_protocol.Gateway/Topology" → "Topology".
func rpcName(fullMethod string) string { return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:] }

func (g *Gateway) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rpc := rpcName(info.FullMethod)
	if err := g.admit(ctx, rpc); err != nil {
		g.count(rpc, err)
		return nil, err
	}
	resp, err := handler(ctx, req)
	g.count(rpc, err)
	return resp, err
}

func (g *Gateway) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	rpc := rpcName(info.FullMethod)
	if err := g.admit(ss.Context(), rpc); err != nil {
		g.count(rpc, err)
		return err
	}
	err := handler(srv, ss)
	g.count(rpc, err)
	return err
}

// admit checks the call's `authorization: Bearer <token>` metadata with
// the listener's one credential check (api.Credentials.Admit).
func (g *Gateway) admit(ctx context.Context, rpc string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	return g.admitToken(md, rpc)
}

// admitToken checks the token of md for rpc's scopes.
func (g *Gateway) admitToken(md metadata.MD, rpc string) error {
	allowed, ok := scopes[rpc]
	if !ok {
		allowed = api.Admin
	}
	_, err := g.cfg.Credentials.Admit(bearerOf(md), allowed)
	switch code := fault.Code(err); {
	case err == nil:
		return nil
	case code == fault.APIUnauthorized:
		return status.Errorf(codes.Unauthenticated, "%s: %s (metadata authorization: Bearer <token>)", code, fault.Reason(err))
	default:
		return status.Errorf(codes.PermissionDenied, "%s: %s", code, fault.Reason(err))
	}
}

func (g *Gateway) count(rpc string, err error) {
	g.deps.Metrics.GatewayRequests.WithLabelValues(rpc, status.Code(err).String()).Inc()
	if wc := (withCause{}); errors.As(err, &wc) {
		level := slog.LevelError
		if wc.st.Code() == codes.Unavailable { // an outage: /readyz says so too
			level = slog.LevelWarn
		}
		g.deps.Logger.Log(context.Background(), level, "gateway call failed", "rpc", rpc, "code", fault.Code(wc.cause), "err", wc.cause)
	}
}

// defaultTenant is the one tenant: Zeebe clients send it, or nothing.
const defaultTenant = "<default>"

// checkTenant refuses a tenant other than the default one: Sutra is single
// tenant.
func checkTenant(ids ...string) error {
	for _, id := range ids {
		if id != "" && id != defaultTenant {
			return status.Errorf(codes.InvalidArgument, "%s: tenant %q: this gateway serves only the default tenant (%q or none)", fault.APIInvalid, id, defaultTenant)
		}
	}
	return nil
}

// statusOf turns an error of the store or the lanes into the gRPC status
// Zeebe answers in its place; the message starts with the SUTRA code, so a
// client can branch on it. A status error passes through.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var inv api.Invalid
	switch {
	case errors.As(err, &inv):
		return status.Errorf(codes.InvalidArgument, "%s: %s", fault.APIInvalid, inv.Msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, store.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s: %v", fault.NotFound, err)
	}
	code := fault.Code(err)
	msg := code + ": " + fault.Reason(err)
	switch code {
	case fault.NotFound, fault.AdminNotFound, fault.TaskNotFound, fault.UnknownDefinition:
		return status.Error(codes.NotFound, msg)
	case fault.APIInvalid, fault.BPMNInvalid, fault.BPMNUnsupported, fault.BPMNExpression, fault.DMNInvalid, fault.DMNUnsupported, fault.RelayInvalid,
		fault.NoStartEvent:
		return status.Error(codes.InvalidArgument, msg)
	case fault.APITooLarge, fault.APIBusy, fault.StepTooLarge:
		return status.Error(codes.ResourceExhausted, msg)
	case fault.TaskLockLost, fault.TaskNotAssignee, fault.NotWaiting, fault.InstanceExists:
		return status.Error(codes.FailedPrecondition, msg)
	case fault.ClaimHeld, fault.StepFenced:
		return status.Error(codes.Unavailable, msg)
	case fault.Unavailable, fault.Transient:
		// The cause (the driver's or the broker's words) goes to the log.
		return withCause{status.New(codes.Unavailable, code+": "+fault.Summary(err)+": retry"), err}
	}
	if strings.HasPrefix(code, "SUTRA.ADMIN.") && strings.HasSuffix(code, ".CLAIM_HELD") {
		// admin.ClaimHeld: another step holds the instance, a race to retry.
		return status.Error(codes.Unavailable, msg)
	}
	if code == "" {
		code = fault.StepFailed
	}
	return withCause{status.New(codes.Internal, code+": the call failed; the worker's log has the reason"), err}
}

// withCause is a status answered without its cause, which the call's log
// line keeps (the interceptors log it): a driver's or a server's words
// never reach a caller.
type withCause struct {
	st    *status.Status
	cause error
}

func (e withCause) Error() string              { return e.st.Message() }
func (e withCause) GRPCStatus() *status.Status { return e.st }
func (e withCause) Unwrap() error              { return e.cause }
