package zeebe_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
)

// Camunda 8's Node.js SDK (@camunda8/sdk 8.8.13, pinned in
// testdata/camunda8-js/package-lock.json and installed by
// scripts/node-deps.sh, which make test runs) works Sutra's jobs unchanged
// as a gRPC job worker, with CAMUNDA_AUTH_STRATEGY=BEARER carrying the
// worker's token: it completes a job, throws an error a boundary catches,
// fails one to zero retries (an incident). With OAUTH it fetches its token
// from the API listener's /oauth/token, the worker's token as its client
// secret.
func TestCamunda8NodeSDKWorksJobsUnchanged(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	if _, err := os.Stat("testdata/camunda8-js/node_modules/@camunda8/sdk"); err != nil {
		t.Skip("the Camunda 8 SDK is not installed: run scripts/node-deps.sh (make test does)")
	}
	t.Run("BEARER", func(t *testing.T) {
		t.Parallel()
		nodeSDKWorksJobs(t, func(*app.Worker) []string {
			return []string{"CAMUNDA_AUTH_STRATEGY=BEARER", "CAMUNDA_OAUTH_TOKEN=node-s3cret"}
		})
	})
	t.Run("OAUTH", func(t *testing.T) {
		t.Parallel()
		nodeSDKWorksJobs(t, func(w *app.Worker) []string {
			return []string{"CAMUNDA_AUTH_STRATEGY=OAUTH", "CAMUNDA_OAUTH_URL=http://" + w.APIAddr() + "/oauth/token",
				"ZEEBE_CLIENT_ID=node", "ZEEBE_CLIENT_SECRET=node-s3cret", "CAMUNDA_TOKEN_DISK_CACHE_DISABLE=true"}
		})
	})
}

// nodeSDKWorksJobs runs the SDK's worker with the credentials auth names.
func nodeSDKWorksJobs(t *testing.T, auth func(*app.Worker) []string) {
	b := setupJobs(t, func(c *app.Config) {
		c.API.Token, c.API.Insecure, c.AdminInsecure, c.AdminToken = "node-s3cret", false, false, "admin-s3cret"
	})
	types := []string{"node-complete", "node-error", "node-fail"}
	for _, typ := range types {
		b.start(t, typ, typ, map[string]any{"orderId": "o-" + typ})
	}

	node := exec.Command("node", "worker.mjs")
	node.Dir = "testdata/camunda8-js"
	node.Env = append(append(os.Environ(), "ZEEBE_GRPC_ADDRESS=grpc://"+b.w.GatewayAddr(), "CAMUNDA_LOG_LEVEL=error"), auth(b.w)...)
	var out bytes.Buffer
	node.Stdout, node.Stderr = &out, &out
	err := node.Run()
	keys := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var line struct {
			Error   any               `json:"error"`
			Type    string            `json:"type"`
			Key     string            `json:"key"`
			Headers map[string]string `json:"headers"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line.Error != nil {
			t.Errorf("the SDK reported an error: %s", sc.Text())
		}
		if line.Type != "" {
			var k int64
			if err := json.Unmarshal([]byte(line.Key), &k); err != nil || line.Headers["kind"] != "test" {
				t.Errorf("the SDK read job %s", sc.Text())
			}
			keys[line.Type] = k
		}
	}
	if err != nil {
		t.Fatalf("the SDK's worker failed: %v\n%s", err, out.String())
	}
	if len(keys) != len(types) {
		t.Fatalf("the SDK handled %v, want %v", keys, types)
	}
	b.applied(t, outcome(keys["node-complete"], 1), outcome(keys["node-error"], 1), outcome(keys["node-fail"], 1))
	if st, vars, _ := b.instance(t, "node-complete"); st != "completed" || vars["doneBy"] != "node" || vars["seen"] != "o-node-complete" {
		t.Errorf("the completed job's instance is %s with %v", st, vars)
	}
	if st, vars, _ := b.instance(t, "node-error"); st != "completed" || vars["why"] != "node" {
		t.Errorf("the instance whose job threw REJECTED is %s with %v, want completed through its boundary", st, vars)
	}
	in, err := b.w.Store().Instance(t.Context(), "node-fail")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Incidents) != 1 || in.Incidents[0].Code != fault.IncidentTaskFailed || !strings.Contains(in.Incidents[0].Message, "failed by node") {
		t.Errorf("the failed job's instance has incidents %+v", in.Incidents)
	}
}
