package zeebe_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

// firstKey is the first key of the sequence: Zeebe's key space of
// partition 1.
const firstKey = 1 << 51

func TestDeployResourceVersionsAndKeys(t *testing.T) {
	b := setup(t, nil)
	p := b.deploy(t, "payment.bpmn")
	if p.BpmnProcessId != "payment" || p.Version != 1 || p.ResourceName != "testdata/payment.bpmn" || p.TenantId != "<default>" ||
		p.ProcessDefinitionKey < firstKey {
		t.Fatalf("deployed %+v", p)
	}
	// The same content keeps its version and key, as on /v1.
	if again := b.deploy(t, "payment.bpmn"); again.Version != 1 || again.ProcessDefinitionKey != p.ProcessDefinitionKey {
		t.Errorf("deploying the same file again: %+v", again)
	}
	// Other content is the next version, with its own key.
	xml, err := os.ReadFile("testdata/payment.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.client.NewDeployResourceCommand().AddResource(append(xml, "\n<!-- v2 -->"...), "payment-v2.bpmn").Send(testkit.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	v2 := resp.Deployments[0].GetProcess()
	if v2.Version != 2 || v2.ProcessDefinitionKey == p.ProcessDefinitionKey || resp.Key < firstKey {
		t.Errorf("second version: %+v, deployment key %d", v2, resp.Key)
	}
	// /v1 shows each version's key beside it.
	defs := b.v1(t, "/definitions")["definitions"].([]any)
	d := defs[0].(map[string]any)
	keys := d["zeebe_keys"].([]any)
	if d["key"] != "payment" || len(keys) != 2 || keys[0] != strconv.FormatInt(p.ProcessDefinitionKey, 10) ||
		keys[1] != strconv.FormatInt(v2.ProcessDefinitionKey, 10) {
		t.Errorf("GET /v1/definitions: %v", d)
	}
}

func TestDeployResourceDeploysADecisionRequirementsGraphAndItsDecisions(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	resp, err := b.client.NewDeployResourceCommand().AddResourceFile("../../dmn/testdata/dinner.dmn").Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Deployments) < 2 {
		t.Fatalf("deployments %v: want the graph and its decisions", resp.Deployments)
	}
	drg := resp.Deployments[0].GetDecisionRequirements()
	if drg == nil || drg.DecisionRequirementsKey == 0 || drg.DmnDecisionRequirementsId == "" {
		t.Fatalf("first deployment %v: want the decision requirements graph", resp.Deployments[0])
	}
	keys := map[int64]bool{drg.DecisionRequirementsKey: true}
	for _, d := range resp.Deployments[1:] {
		dec := d.GetDecision()
		if dec == nil || dec.Version != 1 || dec.DecisionRequirementsKey != drg.DecisionRequirementsKey || keys[dec.DecisionKey] {
			t.Errorf("decision %v: want version 1 of the graph %d, with a key of its own", d, drg.DecisionRequirementsKey)
			continue
		}
		keys[dec.DecisionKey] = true
	}
	// The same file again keeps its versions and keys.
	again, err := b.client.NewDeployResourceCommand().AddResourceFile("../../dmn/testdata/dinner.dmn").Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range again.Deployments[1:] {
		if d.GetDecision().DecisionKey != resp.Deployments[i+1].GetDecision().DecisionKey {
			t.Errorf("redeploy: decision %v, was %v", d, resp.Deployments[i+1])
		}
	}
}

func TestDeployResourceRefusals(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	_, err := b.client.NewDeployResourceCommand().AddResourceFile("testdata/bad.bpmn").Send(ctx)
	wantStatus(t, err, codes.InvalidArgument, fault.BPMNInvalid, `"NoType"`, "testdata/bad.bpmn")

	_, err = b.client.NewDeployResourceCommand().AddResource([]byte(`<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="d"/>`), "dish.dmn").Send(ctx)
	wantStatus(t, err, codes.InvalidArgument, fault.DMNInvalid, "dish.dmn")

	_, err = b.client.NewDeployResourceCommand().AddResourceFile("testdata/payment.bpmn").TenantId("other").Send(ctx)
	wantStatus(t, err, codes.InvalidArgument, "tenant", "other")

	_, err = b.raw(t).DeployResource(ctxAs(t, adminToken), &pb.DeployResourceRequest{})
	wantStatus(t, err, codes.InvalidArgument, "no resources")
	var n int
	if err := b.env.DB.QueryRow(ctx, `SELECT count(*) FROM definitions`).Scan(&n); err != nil || n != 0 {
		t.Errorf("refused deploys stored %d definitions (%v)", n, err)
	}
}

// TestDeployProcessDeploysAsDeployResourceAndAnswersTheProcesses: older
// clients (zbctl 8.4's plain deploy) send the deprecated DeployProcess; it
// is DeployResource under another name, with an answer of processes only.
func TestDeployProcessDeploysAsDeployResourceAndAnswersTheProcesses(t *testing.T) {
	b := setup(t, nil)
	p := b.deploy(t, "payment.bpmn")
	xml, err := os.ReadFile("testdata/payment.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.client.NewDeployProcessCommand().AddResource(xml, "payment.bpmn").Send(testkit.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Processes) != 1 || resp.Key < firstKey {
		t.Fatalf("DeployProcess answered %+v", resp)
	}
	// The same content keeps its version and key, as DeployResource does.
	if got := resp.Processes[0]; got.BpmnProcessId != "payment" || got.Version != 1 || got.ProcessDefinitionKey != p.ProcessDefinitionKey {
		t.Errorf("DeployProcess of deployed content: %+v, want version 1 key %d", got, p.ProcessDefinitionKey)
	}
	_, err = b.client.NewDeployProcessCommand().AddResource([]byte("<not-bpmn/>"), "bad.bpmn").Send(testkit.Ctx(t))
	codeOf(t, err, codes.InvalidArgument, "SUTRA.BPMN.")
}
