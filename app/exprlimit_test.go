package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/internal/testkit"
)

// stepTimeout is short, so that a step cut off by it is seen quickly; the
// evaluation limits are high, so that only the deadline cuts it off.
const stepTimeout = time.Second

func setupBlowup(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, nil, func(c *app.Config) {
		c.Lanes.Count, c.StepTimeout = 1, stepTimeout
		c.FeelMaxSteps, c.FeelMaxBytes = 1<<30, 1<<30
		c.AdminInsecure = true
	})
	b.env.Deploy(t, "testdata/blowup.bpmn")
	return b
}

func startBlowup(id string, n float64) testkit.Relay {
	return testkit.Relay{MessageID: "start-" + id, Body: map[string]any{
		"start": "blowup", "instance_id": id, "variables": map[string]any{"n": n},
	}}
}

// incident is the code and message of the open incident of instance id at
// element ("" when it has none).
func (b *bundle) incident(t *testing.T, id, element string) (code, msg string) {
	t.Helper()
	err := b.env.DB.QueryRow(testkit.Ctx(t), `SELECT code, message FROM incidents WHERE instance_id = $1 AND element_id = $2 AND resolved_at IS NULL`,
		id, element).Scan(&code, &msg)
	if err != nil {
		t.Fatalf("reading the incident of %s at %s: %v", id, element, err)
	}
	return code, msg
}

// TestAStepPastItsDeadlineCommitsAnIncidentReleasesItsClaimAndTheLaneGoesOn:
// on a worker of one lane, a start whose script would spin for good is cut
// off at SUTRA_STEP_TIMEOUT; the step commits an incident on the script
// (its relay acked, so a redelivery or a restart cannot run it again), its
// claim is released, and the next instance on the lane completes.
func TestAStepPastItsDeadlineCommitsAnIncidentReleasesItsClaimAndTheLaneGoesOn(t *testing.T) {
	t.Parallel()
	b := setupBlowup(t)
	b.pub.Publish(startBlowup("spin", 1e6), startBlowup("next", 1))
	b.waitVersion(t, "spin", 1)
	b.waitVersion(t, "next", 1)
	if st := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'next' AND status = 'completed'"); st != 1 {
		t.Error("the instance after the cut-off step did not complete")
	}
	code, msg := b.incident(t, "spin", "Spin")
	if code != fault.IncidentExpressionLimit || !strings.Contains(msg, feel.LimitDeadline) || !strings.Contains(msg, "every i in 1..n") {
		t.Errorf("incident %s %q, want %s naming %s and the expression", code, msg, fault.IncidentExpressionLimit, feel.LimitDeadline)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = 'start-spin'"); n != 1 {
		t.Error("the cut-off step's relay is not recorded as applied")
	}
	b.waitRelays(t, "committed", 2)
	if n := b.pub.QueueDepth(b.env.Config.RelayQueue); n != 0 {
		t.Errorf("%d relays left in the queue once both were acked", n)
	}
	b.env.AssertNoClaimsHeld(t)
	b.env.AssertNoOverlap(t, false)
}

// TestAnAdminStartPastTheStepDeadlineAnswersWithinItAndTheAdminLaneServesTheNextCall:
// the admin lane runs one call at a time; a start whose script would spin
// for good is answered once the deadline cuts it off (201, the instance
// stopped in an incident), and the next admin call is served at once.
func TestAnAdminStartPastTheStepDeadlineAnswersWithinItAndTheAdminLaneServesTheNextCall(t *testing.T) {
	t.Parallel()
	b := setupBlowup(t)
	post := func(id string, n float64) (int, time.Duration) {
		body, _ := json.Marshal(map[string]any{"definition": "blowup", "instance_id": id, "variables": map[string]any{"n": n}})
		req, err := http.NewRequestWithContext(testkit.Ctx(t), http.MethodPost, "http://"+b.w.APIAddr()+"/v1/instances", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Sutra-Caller", "test")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	// The claim timeout (30s) is the bound without a step deadline: the
	// sweep would free the claim, never the lane.
	status, took := post("spin", 1e6)
	if status != http.StatusCreated || took > stepTimeout+5*time.Second {
		t.Fatalf("the spinning start answered %d after %v, want 201 within the step deadline (%v) and a margin", status, took, stepTimeout)
	}
	if code, _ := b.incident(t, "spin", "Spin"); code != fault.IncidentExpressionLimit {
		t.Errorf("incident code %s, want %s", code, fault.IncidentExpressionLimit)
	}
	if status, took := post("next", 1); status != http.StatusCreated || took > 5*time.Second {
		t.Fatalf("the next admin call answered %d after %v", status, took)
	}
	b.env.AssertNoClaimsHeld(t)
}

// TestADeployWhoseConstantExpressionBlowsUpIsRefusedAndTheWorkerServesOn:
// a constant is evaluated at deploy, under the limits; the 40-level
// doubling of a 4 KB string is a 422 naming the element and the limit,
// returned at once, and the worker deploys the next file.
func TestADeployWhoseConstantExpressionBlowsUpIsRefusedAndTheWorkerServesOn(t *testing.T) {
	t.Parallel()
	b := setupBlowup(t)
	var expr strings.Builder
	fmt.Fprintf(&expr, `=string({b0: [&quot;%s&quot;, &quot;%s&quot;]`, strings.Repeat("s", 4000), strings.Repeat("s", 4000))
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&expr, ", b%d: [b%d, b%d]", i, i-1, i-1)
	}
	expr.WriteString("})")
	xml := `<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="D" targetNamespace="t">
  <bpmn:process id="constant" isExecutable="true"><bpmn:startEvent id="S" />
    <bpmn:scriptTask id="Blowup"><bpmn:extensionElements><zeebe:script expression="` + expr.String() + `" resultVariable="r" /></bpmn:extensionElements></bpmn:scriptTask>
    <bpmn:sequenceFlow id="F" sourceRef="S" targetRef="Blowup" /></bpmn:process>
</bpmn:definitions>`
	deploy := func(body string) (int, map[string]any, time.Duration) {
		req, err := http.NewRequestWithContext(testkit.Ctx(t), http.MethodPost, "http://"+b.w.APIAddr()+"/v1/definitions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/xml")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var problem map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&problem)
		return resp.StatusCode, problem, time.Since(start)
	}
	status, problem, took := deploy(xml)
	if status != http.StatusUnprocessableEntity || problem["code"] != fault.IncidentExpressionLimit || problem["element_id"] != "Blowup" ||
		!strings.Contains(fmt.Sprint(problem["detail"]), "SUTRA_FEEL_MAX_") {
		t.Fatalf("deploy answered %d %.300v, want 422 %s naming Blowup and the limit", status, problem, fault.IncidentExpressionLimit)
	}
	if took > 10*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	if status, _, _ := deploy(strings.ReplaceAll(xml, expr.String(), "=1")); status != http.StatusCreated && status != http.StatusOK {
		t.Errorf("the next deploy answered %d", status)
	}
}
