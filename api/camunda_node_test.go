package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

// Camunda's official Node.js external-task client (camunda-external-task-
// client-js 3.1.0, pinned in testdata/camunda-js/package-lock.json and
// installed by scripts/node-deps.sh, which make test runs) works Sutra's
// tasks unchanged but for its base URL: complete, failure with retries,
// failure to zero retries (an incident), a BPMN error caught by a boundary
// event, extendLock; with its Basic auth interceptor carrying the token.
func TestCamundasNodeClientWorksTasksUnchanged(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	if _, err := os.Stat("testdata/camunda-js/node_modules/camunda-external-task-client-js"); err != nil {
		t.Skip("the Node client is not installed: run scripts/node-deps.sh (make test does)")
	}
	b := setup(t, func(c *app.Config) { c.API.Token = "node-s3cret" })
	b.token = "node-s3cret"
	b.env.Deploy(t, "testdata/camunda-js/compat.bpmn")
	topics := []string{"complete", "retry-then-complete", "fail-to-zero", "bpmn-error", "extend-lock"}
	var starts []string
	for _, topic := range topics {
		b.pub.Publish(testkit.Relay{MessageID: "start-" + topic, Body: map[string]any{"start": "compat", "instance_id": topic,
			"variables": map[string]any{"topic": topic, "orderId": "o-" + topic}}})
		starts = append(starts, "start-"+topic)
	}
	b.applied(t, starts...) // each start's step created its task

	node := exec.Command("node", "worker.mjs")
	node.Dir = "testdata/camunda-js"
	node.Env = append(os.Environ(), "SUTRA_BASE_URL="+b.base, "SUTRA_TOKEN=node-s3cret")
	var out bytes.Buffer
	node.Stdout, node.Stderr = &out, &out
	err := node.Run()
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["error"] != nil {
			t.Errorf("the client reported an error: %s", sc.Text())
		}
	}
	if err != nil {
		t.Fatalf("the Node client failed: %v\n%s", err, out.String())
	}
	t.Logf("node client:\n%s", out.String())

	status := func(id string) string {
		var s string
		if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT status FROM instances WHERE id = $1", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	testkit.Eventually(t, 30*time.Second, "the outcomes applied", func() bool {
		return status("complete") == "completed" && status("retry-then-complete") == "completed" &&
			status("bpmn-error") == "completed" && status("extend-lock") == "completed" &&
			b.env.Int(t, "SELECT count(*) FROM incidents WHERE instance_id = 'fail-to-zero'") == 1
	})
	var vars map[string]any
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT variables FROM instances WHERE id = 'complete'").Scan(&vars); err != nil {
		t.Fatal(err)
	}
	if vars["doneBy"] != "node" || vars["receipt"] == nil {
		t.Errorf("variables the client completed with: %v", vars)
	}
	if code := b.env.Int(t, "SELECT count(*) FROM incidents WHERE instance_id = 'fail-to-zero' AND code = $1 AND message LIKE '%card service down%'",
		fault.IncidentTaskFailed); code != 1 {
		t.Error("failure to zero retries did not raise the TASK_FAILED incident with the error message")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM claim_audit WHERE instance_id = 'bpmn-error'"); n == 0 {
		t.Error("no step of the bpmn-error instance")
	}
	var why any
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT variables->'why' FROM instances WHERE id = 'bpmn-error'").Scan(&why); err != nil || why != "limit exceeded" {
		t.Errorf("the BPMN error's variables: %v (%v)", why, err)
	}
	b.env.AssertNoClaimsHeld(t)
}
