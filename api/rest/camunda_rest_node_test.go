package rest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Camunda 8.8's REST clients (pinned in testdata/camunda-rest-js's
// package-lock and installed by scripts/node-deps.sh, which make test
// runs) work Sutra's /v2 unchanged (testdata/camunda-rest-js/v2.mjs):
// @camunda8/orchestration-cluster-api with CAMUNDA_SDK_VALIDATION=strict,
// so that every answer is checked against Camunda's schemas, deploys,
// creates, runs a REST job worker that completes a job, throws an error a
// boundary catches and fails one into an incident (JOB_NO_RETRIES) that it
// then resolves, searches, assigns and completes a user task, publishes a
// message and cancels an instance (TERMINATED), with OAuth through
// /oauth/token; @camunda8/sdk 8.8.13's REST client does the same with a
// raw bearer token.
func TestCamundaRESTClientsWorkUnchanged(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	for _, pkg := range []string{"@camunda8/orchestration-cluster-api", "@camunda8/sdk"} {
		if _, err := os.Stat("testdata/camunda-rest-js/node_modules/" + pkg); err != nil {
			t.Skipf("%s is not installed: run scripts/node-deps.sh (make test does)", pkg)
		}
	}
	t.Run("orchestration-cluster-api/OAUTH", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		steps := runNode(t, "orchestration", "CAMUNDA_REST_ADDRESS=http://"+b.w.APIAddr()+"/v2", "CAMUNDA_SDK_VALIDATION=strict",
			"CAMUNDA_AUTH_STRATEGY=OAUTH", "CAMUNDA_OAUTH_URL=http://"+b.w.APIAddr()+"/oauth/token",
			"CAMUNDA_CLIENT_ID=node", "CAMUNDA_CLIENT_SECRET="+adminToken, "CAMUNDA_TOKEN_AUDIENCE=sutra",
			"CAMUNDA_OAUTH_CACHE_DIR="+t.TempDir())
		for _, want := range []string{"topology", "deploy", "jobs", "incident", "resolved", "user task", "message", "cancel"} {
			if steps[want] == nil {
				t.Errorf("the client did not get to %q: %v", want, steps)
			}
		}
		if inc := steps["incident"]; inc != nil && (inc["errorType"] != "JOB_NO_RETRIES" || inc["errorMessage"] != "failed by rest") {
			t.Errorf("incident %v", inc)
		}
		if c := steps["cancel"]; c != nil && c["state"] != "TERMINATED" {
			t.Errorf("cancelled %v", c)
		}
	})
	t.Run("sdk/BEARER", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		steps := runNode(t, "sdk", "ZEEBE_REST_ADDRESS=http://"+b.w.APIAddr(), "CAMUNDA_REST_ADDRESS=http://"+b.w.APIAddr(),
			"CAMUNDA_AUTH_STRATEGY=BEARER", "CAMUNDA_OAUTH_TOKEN="+adminToken, "CAMUNDA_LOG_LEVEL=error")
		for _, want := range []string{"topology", "job", "message", "cancel"} {
			if steps[want] == nil {
				t.Errorf("the SDK did not get to %q: %v", want, steps)
			}
		}
		if c := steps["cancel"]; c != nil {
			b.eventually(t, "the SDK's completed job ends its instance", func() bool {
				return b.call(t, adminToken, "GET", "/v2/process-instances/"+c["completed"].(string), nil).json(t)["state"] == "COMPLETED"
			})
			if st := b.call(t, adminToken, "GET", "/v2/process-instances/"+c["key"].(string), nil).json(t)["state"]; st != "TERMINATED" {
				t.Errorf("the SDK's cancelled instance is %v", st)
			}
		}
	})
}

// runNode runs v2.mjs with client and env, and answers its steps by name.
func runNode(t *testing.T, client string, env ...string) map[string]map[string]any {
	t.Helper()
	node := exec.Command("node", "v2.mjs")
	node.Dir = "testdata/camunda-rest-js"
	node.Env = append(append(os.Environ(), "SUTRA_CLIENT="+client, "CAMUNDA_SDK_LOG_LEVEL=error"), env...)
	var out bytes.Buffer
	node.Stdout, node.Stderr = &out, &out
	err := node.Run()
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line["error"] != nil {
			t.Errorf("the client reported an error: %s", sc.Text())
		}
		if step, ok := line["step"].(string); ok {
			steps[step] = line
		}
	}
	if err != nil {
		t.Fatalf("the client failed: %v\n%s", err, out.String())
	}
	return steps
}
