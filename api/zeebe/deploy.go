package zeebe

import (
	"context"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
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

// deployResource deploys one resource, BPMN or DMN alike (store.Deploy
// tells them by their root element): a DMN file answers its decision
// requirements graph, then each decision.
func (g *Gateway) deployResource(ctx context.Context, r *pb.Resource) ([]*pb.Deployment, error) {
	ds, err := g.deps.Store.Deploy(ctx, r.Content)
	if err != nil {
		if code := fault.Code(err); code != "" {
			err = fault.New(code, "resource %q: %s", r.Name, fault.Reason(err))
		}
		return nil, statusOf(err)
	}
	out := make([]*pb.Deployment, 0, len(ds)+1)
	for i, d := range ds {
		if d.Kind != store.KindDMN {
			out = append(out, &pb.Deployment{Metadata: &pb.Deployment_Process{Process: &pb.ProcessMetadata{
				BpmnProcessId: d.Key, Version: int32(d.Version), ProcessDefinitionKey: d.ZeebeKey,
				ResourceName: r.Name, TenantId: defaultTenant,
			}}})
			continue
		}
		if i == 0 {
			// A graph has no versions of its own here: it takes its first
			// decision's.
			out = append(out, &pb.Deployment{Metadata: &pb.Deployment_DecisionRequirements{DecisionRequirements: &pb.DecisionRequirementsMetadata{
				DmnDecisionRequirementsId: d.DRG.ID, DmnDecisionRequirementsName: d.DRG.Name, Version: int32(d.Version),
				DecisionRequirementsKey: d.DRG.Key, ResourceName: r.Name, TenantId: defaultTenant,
			}}})
		}
		out = append(out, &pb.Deployment{Metadata: &pb.Deployment_Decision{Decision: &pb.DecisionMetadata{
			DmnDecisionId: d.Key, DmnDecisionName: d.Name, Version: int32(d.Version), DecisionKey: d.ZeebeKey,
			DmnDecisionRequirementsId: d.DRG.ID, DecisionRequirementsKey: d.DRG.Key, TenantId: defaultTenant,
		}}})
	}
	return out, nil
}

// DeployProcess is the deprecated form of DeployResource that zbctl 8.4's
// plain `zbctl deploy FILE` and older clients still send: it deploys each
// file as DeployResource does and answers the processes deployed. A DMN file
// is deployed too, but this answer has no place for decisions (Zeebe's
// has none either).
func (g *Gateway) DeployProcess(ctx context.Context, req *pb.DeployProcessRequest) (*pb.DeployProcessResponse, error) {
	resources := make([]*pb.Resource, len(req.Processes))
	for i, p := range req.Processes {
		resources[i] = &pb.Resource{Name: p.Name, Content: p.Definition}
	}
	deployed, err := g.DeployResource(ctx, &pb.DeployResourceRequest{Resources: resources})
	if err != nil {
		return nil, err
	}
	resp := &pb.DeployProcessResponse{Key: deployed.Key}
	for _, d := range deployed.Deployments {
		if p := d.GetProcess(); p != nil {
			resp.Processes = append(resp.Processes, p)
		}
	}
	return resp, nil
}
