package zeebe

import (
	"context"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"

	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// DeployResource deploys each resource (usecase.Deploy): each executable
// process becomes the next version of its id, and a file identical to a
// deployed one keeps that version. A refused file answers InvalidArgument,
// its message starting with the SUTRA.BPMN.* code and naming the resource
// and the element; the resources before it stay deployed.
func (g *Gateway) DeployResource(ctx context.Context, req *pb.DeployResourceRequest) (*pb.DeployResourceResponse, error) {
	if err := checkTenant(req.TenantId); err != nil {
		return nil, err
	}
	resources := make([]usecase.Resource, len(req.Resources))
	for i, r := range req.Resources {
		resources[i] = usecase.Resource{Name: r.Name, Content: r.Content}
	}
	d, err := g.deps.UseCases.Deploy(ctx, resources)
	if err != nil {
		return nil, statusOf(err)
	}
	resp := &pb.DeployResourceResponse{Key: d.Key, TenantId: defaultTenant}
	for _, r := range d.Resources {
		resp.Deployments = append(resp.Deployments, deployments(r)...)
	}
	return resp, nil
}

// deployments is what Zeebe clients read of one resource deployed, BPMN or
// DMN alike: a DMN file answers its decision requirements graph, then each
// decision.
func deployments(r usecase.DeployedResource) []*pb.Deployment {
	ds := r.Deployed
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
	return out
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
