package rest

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

func itoa(k int64) string { return strconv.FormatInt(k, 10) }

// defaultRequestTimeout bounds a start's wait for its result when the
// request names none, as Camunda's gateway.
const defaultRequestTimeout = 15 * time.Second

// topology answers that the cluster is this replica alone
// (usecase.Topology): every replica answers so, since Sutra's replicas
// share the database, not partitions. The broker's address is the one the
// call came in on.
func (a *API) topology(c *call) (answer, error) {
	host, portText, err := net.SplitHostPort(c.r.Host)
	if err != nil {
		host, portText = c.r.Host, "80"
	}
	port, _ := strconv.Atoi(portText)
	t := usecase.ClusterTopology()
	type partition struct {
		PartitionID int    `json:"partitionId"`
		Role        string `json:"role"`
		Health      string `json:"health"`
	}
	type broker struct {
		NodeID     int         `json:"nodeId"`
		Host       string      `json:"host"`
		Port       int         `json:"port"`
		Partitions []partition `json:"partitions"`
		Version    string      `json:"version"`
	}
	var parts []partition
	for p := 1; p <= t.Partitions; p++ {
		parts = append(parts, partition{PartitionID: p, Role: "leader", Health: "healthy"})
	}
	return ok(map[string]any{
		"brokers":     []broker{{NodeID: 0, Host: host, Port: port, Partitions: parts, Version: Version}},
		"clusterSize": t.Brokers, "partitionsCount": t.Partitions, "replicationFactor": t.ReplicationFactor,
		"gatewayVersion": Version, "lastCompletedChangeId": "-1",
	}), nil
}

// status answers 204: this replica serves (its readiness is /ready's).
func (a *API) status(*call) (answer, error) { return noContent(), nil }

// deploy deploys the multipart body's resources (usecase.Deploy).
func (a *API) deploy(c *call) (answer, error) {
	if err := c.r.ParseMultipartForm(a.cfg.MaxDeployBody); err != nil {
		return answer{}, api.Invalidf("the body is not multipart/form-data with resources: %v", err)
	}
	defer func() { _ = c.r.MultipartForm.RemoveAll() }()
	if err := checkTenants(c.r.MultipartForm.Value["tenantId"]...); err != nil {
		return answer{}, err
	}
	var resources []usecase.Resource
	for _, fh := range c.r.MultipartForm.File["resources"] {
		f, err := fh.Open()
		if err != nil {
			return answer{}, api.Invalidf("resource %q: %v", fh.Filename, err)
		}
		content, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			return answer{}, api.Invalidf("resource %q: %v", fh.Filename, err)
		}
		resources = append(resources, usecase.Resource{Name: fh.Filename, Content: content})
	}
	d, err := a.deps.UseCases.Deploy(c.ctx(), resources)
	if err != nil {
		return answer{}, err
	}
	deployments := []map[string]any{}
	for _, r := range d.Resources {
		for i, dep := range r.Deployed {
			if dep.Kind != store.KindDMN {
				deployments = append(deployments, map[string]any{"processDefinition": map[string]any{
					"processDefinitionId": dep.Key, "processDefinitionVersion": dep.Version, "resourceName": r.Name,
					"tenantId": defaultTenant, "processDefinitionKey": Key(dep.ZeebeKey)}})
				continue
			}
			if i == 0 {
				deployments = append(deployments, map[string]any{"decisionRequirements": map[string]any{
					"decisionRequirementsId": dep.DRG.ID, "version": dep.Version, "decisionRequirementsName": dep.DRG.Name,
					"tenantId": defaultTenant, "resourceName": r.Name, "decisionRequirementsKey": Key(dep.DRG.Key)}})
			}
			deployments = append(deployments, map[string]any{"decisionDefinition": map[string]any{
				"decisionDefinitionId": dep.Key, "version": dep.Version, "name": dep.Name, "tenantId": defaultTenant,
				"decisionRequirementsId": dep.DRG.ID, "decisionDefinitionKey": Key(dep.ZeebeKey), "decisionRequirementsKey": Key(dep.DRG.Key)}})
		}
	}
	return ok(map[string]any{"tenantId": defaultTenant, "deploymentKey": Key(d.Key), "deployments": deployments}), nil
}

type createRequest struct {
	ProcessDefinitionID      string          `json:"processDefinitionId"`
	ProcessDefinitionVersion *int            `json:"processDefinitionVersion"`
	ProcessDefinitionKey     Key             `json:"processDefinitionKey"`
	Variables                json.RawMessage `json:"variables"`
	TenantID                 string          `json:"tenantId"`
	StartInstructions        []any           `json:"startInstructions"`
	AwaitCompletion          bool            `json:"awaitCompletion"`
	FetchVariables           []string        `json:"fetchVariables"`
	RequestTimeout           Long            `json:"requestTimeout"`
}

// createInstance starts an instance of a definition named by
// processDefinitionId and processDefinitionVersion (-1 or none: the
// latest) or by processDefinitionKey (usecase.StartInstance); with
// awaitCompletion it answers once the instance completed, with its
// variables (fetchVariables, or all), within requestTimeout (default 15 s;
// 504 after it, the instance running on; 409 when it ended otherwise)
// (usecase.StartInstanceWithResult).
func (a *API) createInstance(c *call) (answer, error) {
	var req createRequest
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	if err := checkTenants(req.TenantID); err != nil {
		return answer{}, err
	}
	if len(req.StartInstructions) > 0 {
		return answer{}, api.Invalidf("startInstructions are not supported: an instance starts at its none start event")
	}
	vars, err := variables(req.Variables)
	if err != nil {
		return answer{}, err
	}
	definition, version := req.ProcessDefinitionID, -1
	if req.ProcessDefinitionVersion != nil {
		version = *req.ProcessDefinitionVersion
	}
	switch {
	case req.ProcessDefinitionKey != 0:
		definition, version, err = a.deps.Store.DefinitionByKey(c.ctx(), int64(req.ProcessDefinitionKey))
		if errors.Is(err, store.ErrNotFound) {
			return answer{}, refuse(http.StatusNotFound, fault.UnknownDefinition, "no process definition with key "+itoa(int64(req.ProcessDefinitionKey)))
		}
		if err != nil {
			return answer{}, err
		}
	case definition == "":
		return answer{}, api.Invalidf("processDefinitionId or processDefinitionKey is required")
	case version == -1:
		version = 0 // the latest (operations.Start)
	case version < 1:
		return answer{}, refuse(http.StatusNotFound, fault.UnknownDefinition, "process "+strconv.Quote(definition)+" has no version "+strconv.Itoa(version)+" (-1 names the latest)")
	}
	id := api.NewID()
	var in store.KeyedInstance
	out := map[string]any{}
	if req.AwaitCompletion {
		timeout := defaultRequestTimeout
		if req.RequestTimeout > 0 {
			timeout = time.Duration(req.RequestTimeout) * time.Millisecond
		}
		in, err = a.deps.UseCases.StartInstanceWithResult(c.ctx(), c.conn(), usecase.Result{ID: id, Definition: definition, Version: version,
			Vars: vars, Timeout: timeout, Stopping: a.stopping, Limit: "SUTRA_GATEWAY_MAX_STREAMS"})
		switch {
		case errors.Is(err, usecase.ErrNoResultYet):
			return answer{}, refuse(http.StatusGatewayTimeout, fault.Code(err), fault.Reason(err))
		case err != nil:
			return answer{}, err
		}
		for name, v := range in.Variables {
			if len(req.FetchVariables) == 0 || slices.Contains(req.FetchVariables, name) {
				out[name] = v
			}
		}
	} else {
		if err := a.deps.UseCases.StartInstance(c.ctx(), c.conn(), id, definition, version, vars); err != nil {
			return answer{}, err
		}
		if in, err = a.deps.Store.InstanceKeys(c.ctx(), id, false); err != nil {
			return answer{}, err
		}
	}
	return ok(map[string]any{"processDefinitionId": in.Definition, "processDefinitionVersion": in.DefinitionVersion,
		"tenantId": defaultTenant, "variables": out, "processDefinitionKey": Key(in.DefinitionKey), "processInstanceKey": Key(in.Key)}), nil
}

// activeInstance reads the instance whose key the path names: 404 when
// there is none or it has ended (a cancelling one has not).
func (a *API) activeInstance(c *call) (store.KeyedInstance, error) {
	key, err := c.pathKey()
	if err != nil {
		return store.KeyedInstance{}, err
	}
	in, err := a.deps.Store.InstanceByKey(c.ctx(), key, false)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return in, refuse(http.StatusNotFound, fault.NotFound, "no process instance with key "+itoa(key))
	case err != nil:
		return in, err
	case !engine.Status(in.Status).Live():
		return in, refuse(http.StatusNotFound, fault.NotFound, "process instance "+itoa(key)+" has ended ("+in.Status+")")
	}
	return in, nil
}

// onInstance answers the error of an operation on instance in: one that
// ended meanwhile is 404, as activeInstance answers.
func onInstance(in store.KeyedInstance, err error) (answer, error) {
	if fault.Code(err) == fault.NotWaiting {
		return answer{}, refuse(http.StatusNotFound, fault.NotFound, "process instance "+itoa(in.Key)+": "+fault.Reason(err))
	}
	if err != nil {
		return answer{}, err
	}
	return noContent(), nil
}

// cancelInstance cancels an instance (usecase.CancelInstance).
func (a *API) cancelInstance(c *call) (answer, error) {
	in, err := a.activeInstance(c)
	if err != nil {
		return answer{}, err
	}
	return onInstance(in, a.deps.UseCases.CancelInstance(c.ctx(), c.conn(), in.ID))
}

// setVariables merges variables into an instance's (usecase.SetVariables):
// the key names a process instance, whose scope is the only one Sutra
// keeps variables in, so local changes nothing.
func (a *API) setVariables(c *call) (answer, error) {
	var req struct {
		Variables json.RawMessage `json:"variables"`
		Local     bool            `json:"local"`
	}
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	vars, err := variables(req.Variables)
	if err != nil {
		return answer{}, err
	}
	in, err := a.activeInstance(c)
	if err != nil {
		return answer{}, err
	}
	return onInstance(in, a.deps.UseCases.SetVariables(c.ctx(), c.conn(), in.ID, vars))
}

type messageRequest struct {
	Name           string          `json:"name"`
	CorrelationKey string          `json:"correlationKey"`
	TimeToLive     Long            `json:"timeToLive"`
	MessageID      string          `json:"messageId"`
	Variables      json.RawMessage `json:"variables"`
	TenantID       string          `json:"tenantId"`
}

// message decodes a message's request: the message and its timeToLive.
func message(c *call) (usecase.Message, time.Duration, error) {
	var req messageRequest
	if err := c.decode(&req); err != nil {
		return usecase.Message{}, 0, err
	}
	if err := checkTenants(req.TenantID); err != nil {
		return usecase.Message{}, 0, err
	}
	vars, err := variables(req.Variables)
	if err != nil {
		return usecase.Message{}, 0, err
	}
	// Compared in milliseconds: converted first, a huge one overflows.
	ttl := time.Duration(req.TimeToLive) * time.Millisecond
	if int64(req.TimeToLive) > lanes.MaxMessageTTL.Milliseconds() {
		ttl = lanes.MaxMessageTTL + time.Millisecond
	}
	return usecase.Message{Message: req.Name, CorrelationKey: req.CorrelationKey, Variables: vars, MessageID: req.MessageID}, ttl, nil
}

// publishMessage publishes a message as a relay (usecase.PublishKeyedMessage):
// it correlates to the subscription waiting with its name and correlation
// key, or starts the definitions with a message start event of its name,
// or, with a timeToLive and a correlation key, stays buffered that long.
func (a *API) publishMessage(c *call) (answer, error) {
	m, ttl, err := message(c)
	if err != nil {
		return answer{}, err
	}
	key, err := a.deps.UseCases.PublishKeyedMessage(c.ctx(), m, ttl)
	if errors.Is(err, usecase.ErrMessageSeen) {
		return answer{}, refuse(http.StatusConflict, fault.APIInvalid, fault.Reason(err))
	}
	if err != nil {
		return answer{}, err
	}
	return ok(map[string]any{"tenantId": defaultTenant, "messageKey": Key(key)}), nil
}

// correlateMessage correlates a message (usecase.CorrelateMessage) and
// answers once the step that applied it committed, with the instance it
// went to; nothing waiting for it: 404, and nothing is buffered.
func (a *API) correlateMessage(c *call) (answer, error) {
	m, _, err := message(c)
	if err != nil {
		return answer{}, err
	}
	got, err := a.deps.UseCases.CorrelateMessage(c.ctx(), c.conn(), m)
	switch {
	case errors.Is(err, usecase.ErrNotCorrelated):
		return answer{}, refuse(http.StatusNotFound, fault.RelayUncorrelated, fault.Reason(err))
	case errors.Is(err, usecase.ErrMessageSeen):
		return answer{}, refuse(http.StatusConflict, fault.APIInvalid, fault.Reason(err))
	case err != nil:
		return answer{}, err
	}
	return ok(map[string]any{"tenantId": defaultTenant, "messageKey": Key(got.MessageKey), "processInstanceKey": Key(got.InstanceKey)}), nil
}

// broadcastSignal broadcasts a signal (usecase.BroadcastSignal).
func (a *API) broadcastSignal(c *call) (answer, error) {
	var req struct {
		SignalName string          `json:"signalName"`
		Variables  json.RawMessage `json:"variables"`
		TenantID   string          `json:"tenantId"`
	}
	if err := c.decode(&req); err != nil {
		return answer{}, err
	}
	if err := checkTenants(req.TenantID); err != nil {
		return answer{}, err
	}
	vars, err := variables(req.Variables)
	if err != nil {
		return answer{}, err
	}
	key, err := a.deps.UseCases.BroadcastSignal(c.ctx(), req.SignalName, vars)
	if err != nil {
		return answer{}, err
	}
	return ok(map[string]any{"tenantId": defaultTenant, "signalKey": Key(key)}), nil
}

// resolveIncident retries an incident (usecase.ResolveIncident): its
// element runs again, a failed job's task created anew with the retries
// set on the failed job, else its definition's.
func (a *API) resolveIncident(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	_, err = a.deps.UseCases.ResolveIncident(c.ctx(), c.conn(), usecase.IncidentRetry{ID: key})
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, usecase.ErrIncidentResolved):
		return answer{}, refuse(http.StatusNotFound, fault.NotFound, "incident "+itoa(key)+" does not exist or is resolved")
	case err != nil:
		return answer{}, err
	}
	return noContent(), nil
}

// definitionXML answers a process definition's BPMN file.
func (a *API) definitionXML(c *call) (answer, error) {
	key, err := c.pathKey()
	if err != nil {
		return answer{}, err
	}
	def, version, err := a.deps.Store.DefinitionByKey(c.ctx(), key)
	if errors.Is(err, store.ErrNotFound) {
		return answer{}, refuse(http.StatusNotFound, fault.UnknownDefinition, "no process definition with key "+itoa(key))
	}
	if err != nil {
		return answer{}, err
	}
	file, err := a.deps.Store.DefinitionXML(c.ctx(), def, version)
	if err != nil {
		return answer{}, err
	}
	return answer{status: http.StatusOK, raw: []byte(file), contentType: "text/xml"}, nil
}
