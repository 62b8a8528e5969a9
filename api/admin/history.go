package admin

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/admin/wire"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/operations"
)

// history answers the steps of an instance, newest first, from the step
// history (store.StepHistory): the cursor of a page is the step counter of
// its last (oldest) step. An instance that does not exist is a 404; one
// whose steps were all trimmed (SUTRA_STEP_HISTORY_RETENTION) has none.
func (s *API) history(c *adminCall) (answer, error) {
	c.instanceID = c.r.PathValue("id")
	limit, after, err := page(c)
	if err != nil {
		return answer{}, err
	}
	var before int64
	if after != "" {
		if before, err = strconv.ParseInt(after, 10, 64); err != nil || before < 1 {
			return answer{}, api.Invalidf("after %q is not a step counter", after)
		}
	}
	steps, err := s.deps.Store.StepHistory(c.r.Context(), c.instanceID, before, limit)
	if err != nil {
		return answer{}, err
	}
	if len(steps) == 0 && before == 0 {
		if _, err := s.deps.Store.InstanceKeys(c.r.Context(), c.instanceID, false); isNotFound(err) {
			return answer{}, refuse(http.StatusNotFound, fault.NotFound, "instance "+c.instanceID+" does not exist")
		} else if err != nil {
			return answer{}, err
		}
	}
	h := wire.History{InstanceID: c.instanceID, Steps: mapAll(steps, historyStepOf)}
	if len(steps) == limit {
		next := strconv.FormatInt(steps[len(steps)-1].Version, 10)
		h.Next = &next
	}
	return answer{status: http.StatusOK, body: h}, nil
}

// migratePreflight answers what POST /v1/instances/{id}/migrate would do
// with the same body, on the instance as its last step committed it: where
// each token would land, or the refusal the migration would meet. It runs
// the migration's own check (engine.Migrate) and claims and writes
// nothing, so a step committed meanwhile may change the answer; the
// migration checks again under its claim.
func (s *API) migratePreflight(c *adminCall) (answer, error) {
	req, err := migrateRequest(c)
	if err != nil {
		return answer{}, err
	}
	ctx := c.r.Context()
	in, err := s.deps.Store.ReadInstance(ctx, c.instanceID)
	if err != nil {
		return answer{}, err
	}
	p := wire.MigrationPreflight{InstanceID: in.ID, Version: in.Version, Tokens: []wire.MigratedToken{},
		From: wire.DefinitionRef{Key: in.DefinitionKey, Version: in.DefinitionVersion},
		To:   wire.DefinitionRef{Key: in.DefinitionKey, Version: req.TargetVersion}}
	refused := func(err error) (answer, error) {
		if fault.Code(err) == "" {
			return answer{}, err // not a refusal: the call failed
		}
		pr := asProblem(err)
		p.Code, p.Detail, p.Status = pr.p.Code, pr.p.Detail, pr.status
		return answer{status: http.StatusOK, body: p}, nil
	}
	from, err := s.deps.Store.Process(ctx, in.DefinitionKey, in.DefinitionVersion)
	if err != nil {
		return answer{}, err
	}
	to, err := s.deps.Store.Process(ctx, in.DefinitionKey, req.TargetVersion)
	if err != nil {
		return refused(err)
	}
	st, _, err := engine.Migrate(from, to, engine.Instance{ID: in.ID, Version: in.Version, State: in.State}, req.Mapping, time.Now())
	if err != nil {
		return refused(err)
	}
	landed := make(map[string]string, len(st.Tokens))
	for _, t := range st.Tokens {
		landed[t.ID] = t.Element
	}
	for _, t := range in.State.Tokens {
		to, ok := landed[t.ID]
		if !ok {
			return answer{}, errors.New("migration preview: a token did not land") // engine.Migrate keeps every token
		}
		p.Tokens = append(p.Tokens, wire.MigratedToken{ID: t.ID, From: t.Element, To: to, Wait: string(t.Wait)})
	}
	p.OK, p.Status = true, http.StatusOK
	return answer{status: http.StatusOK, body: p}, nil
}

// modificationRequest reads the instance and the body of a modification or
// of its preflight, which take the same request.
func modificationRequest(c *adminCall) (wire.ModificationRequest, error) {
	c.instanceID = c.r.PathValue("id")
	var req wire.ModificationRequest
	if err := api.Decode(c.r, &req); err != nil {
		return req, err
	}
	if len(req.Cancel)+len(req.Activate) == 0 {
		return req, api.Invalidf("name tokens to cancel or elements to activate")
	}
	return req, nil
}

// modify moves an instance's tokens as one admin step (Operate's "modify
// instance"): 200 with the instance as the step left it.
func (s *API) modify(c *adminCall) (answer, error) {
	req, err := modificationRequest(c)
	if err != nil {
		return answer{}, err
	}
	m := engine.Modification{Cancel: req.Cancel, Activate: req.Activate}
	if err := claimHeld(operations.OpModify, s.deps.UseCases.ModifyInstance(c.r.Context(), s.conn(c), c.instanceID, m, req.Variables)); err != nil {
		return answer{}, err
	}
	d, err := s.deps.UseCases.Instance(c.r.Context(), c.instanceID)
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, body: wire.Modified{InstanceID: c.instanceID, Status: d.Status, Tokens: mapAll(d.Tokens, tokenOf)}}, nil
}

// modifyPreflight answers what POST /v1/instances/{id}/modification would
// do: the same step computed on the instance as last committed, claiming
// and writing nothing (a called decision is not looked up: a business rule
// task it would reach shows as an incident here).
func (s *API) modifyPreflight(c *adminCall) (answer, error) {
	req, err := modificationRequest(c)
	if err != nil {
		return answer{}, err
	}
	ctx := c.r.Context()
	in, err := s.deps.Store.ReadInstance(ctx, c.instanceID)
	if err != nil {
		return answer{}, err
	}
	p := wire.ModificationPreflight{InstanceID: in.ID, Version: in.Version, Tokens: []wire.Token{}}
	proc, err := s.deps.Store.Process(ctx, in.DefinitionKey, in.DefinitionVersion)
	if err != nil {
		return answer{}, err
	}
	tr := engine.Trigger{Kind: engine.TriggerModify, Modification: &engine.Modification{Cancel: req.Cancel, Activate: req.Activate},
		Variables: req.Variables}
	st, err := s.deps.UseCases.PreviewStep(ctx, proc, engine.Instance{ID: in.ID, Version: in.Version, State: in.State}, tr)
	if err != nil {
		if fault.Code(err) == "" {
			return answer{}, err // not a refusal: the call failed
		}
		pr := asProblem(err)
		p.Code, p.Detail, p.Status = pr.p.Code, pr.p.Detail, pr.status
		return answer{status: http.StatusOK, body: p}, nil
	}
	for _, t := range st.Tokens {
		p.Tokens = append(p.Tokens, wire.Token{ID: t.ID, Element: t.Element, Wait: string(t.Wait), Scope: t.Scope})
	}
	p.OK, p.Status, p.InstanceStatus = true, http.StatusOK, string(st.Status)
	return answer{status: http.StatusOK, body: p}, nil
}
