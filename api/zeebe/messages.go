package zeebe

import (
	"context"
	"errors"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/usecase"
)

// PublishMessage publishes a message as POST /v1/messages does, as a relay
// (usecase.PublishMessage), so it has the relay path's semantics: it
// correlates to the subscription waiting with its name and correlation key,
// or starts the definitions with a message start event of its name, or,
// with a timeToLive and a correlation key, stays buffered that long for a
// subscription to open. (A message without a correlation key is not
// buffered: the relay contract buffers by key only.)
//
// Its key is drawn from the key sequence when it is published. A message
// without messageId is published under its key (in decimal) as its relay
// message id; one whose messageId was applied or is still buffered is
// refused with AlreadyExists, as Zeebe refuses a message id it holds (two
// racing publishes of one id both pass that look; the relay's inbox then
// applies it once).
func (g *Gateway) PublishMessage(ctx context.Context, req *pb.PublishMessageRequest) (*pb.PublishMessageResponse, error) {
	if err := checkTenant(req.TenantId); err != nil {
		return nil, err
	}
	vars, err := api.DecodeVariables("variables", []byte(req.Variables))
	if err != nil {
		return nil, statusOf(err)
	}
	// Compared in milliseconds: converted first, a huge one overflows.
	ttl := time.Duration(req.TimeToLive) * time.Millisecond
	if req.TimeToLive > lanes.MaxMessageTTL.Milliseconds() {
		ttl = lanes.MaxMessageTTL + time.Millisecond
	} else if req.TimeToLive < 0 {
		ttl = -time.Millisecond
	}
	key, err := g.deps.UseCases.PublishKeyedMessage(ctx, usecase.Message{Message: req.Name, CorrelationKey: req.CorrelationKey,
		Variables: vars, MessageID: req.MessageId}, ttl)
	if errors.Is(err, usecase.ErrMessageSeen) {
		return nil, status.Errorf(codes.AlreadyExists, "%s: %s", fault.APIInvalid, fault.Reason(err))
	}
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.PublishMessageResponse{Key: key, TenantId: defaultTenant}, nil
}
