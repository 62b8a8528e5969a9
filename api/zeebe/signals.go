package zeebe

import (
	"context"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"

	"github.com/sutra-run/worker/api"
)

// BroadcastSignal broadcasts a signal (usecase.BroadcastSignal): every
// instance waiting for it when it is thrown is resumed under its own claim,
// and every process whose start event catches it starts once. It answers
// the broadcast's key once every relay that carries it is durable; the
// instances step as replicas consume them.
func (g *Gateway) BroadcastSignal(ctx context.Context, req *pb.BroadcastSignalRequest) (*pb.BroadcastSignalResponse, error) {
	if err := checkTenant(req.TenantId); err != nil {
		return nil, err
	}
	vars, err := api.DecodeVariables("variables", []byte(req.Variables))
	if err != nil {
		return nil, statusOf(err)
	}
	key, err := g.deps.UseCases.BroadcastSignal(ctx, req.SignalName, vars)
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.BroadcastSignalResponse{Key: key, TenantId: defaultTenant}, nil
}
