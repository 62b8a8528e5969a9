package zeebe_test

import (
	"bytes"
	"testing"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

func TestCallsNeedTheRightToken(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	for _, tok := range []string{"", "wrong"} {
		_, err := dial(t, b.w.GatewayAddr(), tok).NewTopologyCommand().Send(ctx)
		wantStatus(t, err, codes.Unauthenticated, fault.APIUnauthorized, "Bearer")
	}
	// A job worker's token does not deploy, start or cancel.
	worker := dial(t, b.w.GatewayAddr(), taskToken)
	_, err := worker.NewDeployResourceCommand().AddResourceFile("testdata/payment.bpmn").Send(ctx)
	wantStatus(t, err, codes.PermissionDenied, fault.APIForbidden)
	_, err = worker.NewCancelInstanceCommand().ProcessInstanceKey(1).Send(ctx)
	wantStatus(t, err, codes.PermissionDenied, fault.APIForbidden)
}

func TestUnimplementedRPCsNameThemselves(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	_, err := b.client.NewDeleteResourceCommand().ResourceKey(1).Send(ctx)
	wantStatus(t, err, codes.Unimplemented, "DeleteResource")
}

func TestOversizeRequestIsResourceExhausted(t *testing.T) {
	b := setup(t, func(c *app.Config) { c.Gateway.MaxMessageSize = 64 << 10 })
	big := bytes.Repeat([]byte("x"), 100<<10)
	_, err := b.raw(t).DeployResource(ctxAs(t, adminToken), &pb.DeployResourceRequest{Resources: []*pb.Resource{{Name: "big.bpmn", Content: big}}})
	wantStatus(t, err, codes.ResourceExhausted, "larger than max", "65536")
}
