package zeebe

import (
	"bytes"
	"context"
	"strings"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/fault"
)

// DeployResource deploys each resource as POST /v1/definitions deploys a
// file (store.Deploy): each executable process becomes the next version of
// its id, and a file identical to a deployed one keeps that version. A
// refused file answers InvalidArgument, its message starting with the
// SUTRA.BPMN.* code and naming the element.
//
// The resources are deployed one after the other, not in one transaction:
// when one is refused, those before it stay deployed (deploying them again
// changes nothing, identical content keeping its version).
func (g *Gateway) DeployResource(ctx context.Context, req *pb.DeployResourceRequest) (*pb.DeployResourceResponse, error) {
	if err := checkTenant(req.TenantId); err != nil {
		return nil, err
	}
	if len(req.Resources) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "%s: no resources to deploy", fault.APIInvalid)
	}
	resp := &pb.DeployResourceResponse{TenantId: defaultTenant}
	for _, r := range req.Resources {
		ds, err := g.deployResource(ctx, r)
		if err != nil {
			return nil, err
		}
		resp.Deployments = append(resp.Deployments, ds...)
	}
	key, err := g.deps.Store.NextKey(ctx)
	if err != nil {
		return nil, statusOf(err)
	}
	resp.Key = key
	return resp, nil
}

// deployResource deploys one resource by its kind: the one place where a
// resource is routed to what deploys it.
func (g *Gateway) deployResource(ctx context.Context, r *pb.Resource) ([]*pb.Deployment, error) {
	if isDMN(r) {
		return nil, status.Errorf(codes.InvalidArgument, "%s: resource %q: deploying DMN decisions through the Zeebe gateway is not yet supported",
			fault.DMNUnsupported, r.Name)
	}
	ds, err := g.deps.Store.Deploy(ctx, r.Content)
	if err != nil {
		if code := fault.Code(err); code != "" {
			err = fault.New(code, "resource %q: %s", r.Name, fault.Reason(err))
		}
		return nil, statusOf(err)
	}
	out := make([]*pb.Deployment, 0, len(ds))
	for _, d := range ds {
		out = append(out, &pb.Deployment{Metadata: &pb.Deployment_Process{Process: &pb.ProcessMetadata{
			BpmnProcessId: d.Key, Version: int32(d.Version), ProcessDefinitionKey: d.ZeebeKey,
			ResourceName: r.Name, TenantId: defaultTenant,
		}}})
	}
	return out, nil
}

// isDMN tells a DMN file by its name, as Zeebe does, or by its namespace.
func isDMN(r *pb.Resource) bool {
	return strings.HasSuffix(strings.ToLower(r.Name), ".dmn") || bytes.Contains(r.Content, []byte("www.omg.org/spec/DMN/"))
}
