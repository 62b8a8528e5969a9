package usecase

import (
	"context"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// Resource is one file of a deployment, BPMN or DMN alike.
type Resource struct {
	Name    string
	Content []byte
}

// DeployedResource is what one resource deployed: a process per
// executable process of a BPMN file, a decision per decision of a DMN
// file (store.Deploy).
type DeployedResource struct {
	Name     string
	Deployed []store.Deployed
}

// Deployment is a deployment's answer: each resource's definitions, and
// the deployment's key, drawn from the key sequence.
type Deployment struct {
	Key       int64
	Resources []DeployedResource
}

// Deploy deploys each resource as POST /v1/definitions deploys a file
// (store.Deploy): each executable process becomes the next version of its
// id, a file identical to a deployed one keeps that version. A refused
// file keeps its code (SUTRA.BPMN.*, SUTRA.DMN.*), its reason naming the
// resource. The resources are deployed one after the other, not in one
// transaction: when one is refused those before it stay deployed
// (deploying them again changes nothing). No resource is api.Invalid.
func (u *UseCases) Deploy(ctx context.Context, resources []Resource) (Deployment, error) {
	if len(resources) == 0 {
		return Deployment{}, api.Invalidf("no resources to deploy")
	}
	var out Deployment
	for _, r := range resources {
		ds, err := u.deps.Store.Deploy(ctx, r.Content)
		if err != nil {
			if code := fault.Code(err); code != "" {
				err = fault.New(code, "resource %q: %s", r.Name, fault.Reason(err))
			}
			return Deployment{}, err
		}
		out.Resources = append(out.Resources, DeployedResource{Name: r.Name, Deployed: ds})
	}
	key, err := u.deps.Store.NextKey(ctx)
	out.Key = key
	return out, err
}
