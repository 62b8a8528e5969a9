package zeebe

import (
	"context"
	"strconv"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
)

// BroadcastSignal broadcasts a signal as POST /v1/signals does
// (store.RecordAndBroadcastSignal): every instance waiting for it when it is thrown
// is resumed under its own claim, and every process whose start event
// catches it starts once. It answers the broadcast's key once every relay
// that carries it is durable; the instances step as replicas consume them.
func (g *Gateway) BroadcastSignal(ctx context.Context, req *pb.BroadcastSignalRequest) (*pb.BroadcastSignalResponse, error) {
	if err := checkTenant(req.TenantId); err != nil {
		return nil, err
	}
	if req.SignalName == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s: signalName is required", fault.APIInvalid)
	}
	if err := api.CheckText("signalName", req.SignalName); err != nil {
		return nil, statusOf(err)
	}
	vars, err := api.DecodeVariables("variables", []byte(req.Variables))
	if err != nil {
		return nil, statusOf(err)
	}
	key, err := g.deps.Store.NextKey(ctx)
	if err != nil {
		return nil, statusOf(err)
	}
	// The key, unique, is the broadcast's id: a relay redelivered after a
	// crash writes nothing twice.
	if _, err := g.deps.Store.RecordAndBroadcastSignal(ctx, strconv.FormatInt(key, 10), req.SignalName, vars); err != nil {
		return nil, statusOf(err)
	}
	return &pb.BroadcastSignalResponse{Key: key, TenantId: defaultTenant}, nil
}
