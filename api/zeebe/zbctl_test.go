package zeebe_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
)

// zbctlRun runs Zeebe's own CLI, built from the module's go.mod (its tool
// directive), against the gateway: it fails the test when zbctl does.
type zbctlRun struct {
	bin, addr string
	// env reaches zbctl besides the test's environment: where it keeps its
	// OAuth cache, and the OAuth settings when it fetches a token.
	env []string
}

func buildZbctl(t *testing.T, addr string) *zbctlRun {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "zbctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/camunda/zeebe/clients/go/v8/cmd/zbctl").CombinedOutput(); err != nil {
		t.Fatalf("building zbctl: %v\n%s", err, out)
	}
	return &zbctlRun{bin: bin, addr: addr, env: []string{"ZEEBE_CLIENT_CONFIG_PATH=" + filepath.Join(dir, "credentials")}}
}

func (z *zbctlRun) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(testkit.Ctx(t), z.bin, append(args, "--address", z.addr, "--insecure")...)
	cmd.Env = append(cmd.Environ(), z.env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("zbctl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
	}
	return out.String()
}

// key reads a key field of zbctl's JSON answer (int64 as a string).
func key(t *testing.T, out, field string) int64 {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("zbctl answered %q: %v", out, err)
	}
	s, _ := m[field].(string)
	k, err := strconv.ParseInt(s, 10, 64)
	if err != nil || k < firstKey {
		t.Fatalf("zbctl answered %s %q", field, s)
	}
	return k
}

// TestZbctl runs zbctl against a worker with both tokens, as a Camunda 8
// user runs it: zbctl sends a token only after fetching it by OAuth, here
// from the API listener's POST /oauth/token with the operators' token as the
// client secret.
func TestZbctl(t *testing.T) {
	b := setup(t, nil)
	z := buildZbctl(t, b.w.GatewayAddr())
	z.env = append(z.env, "ZEEBE_CLIENT_ID=zbctl", "ZEEBE_CLIENT_SECRET="+adminToken,
		"ZEEBE_AUTHORIZATION_SERVER_URL=http://"+b.w.APIAddr()+"/oauth/token", "ZEEBE_TOKEN_AUDIENCE=zeebe-api")

	if out := z.run(t, "status"); !strings.Contains(out, "Cluster size: 1") || !strings.Contains(out, "Leader, Healthy") {
		t.Errorf("zbctl status:\n%s", out)
	}
	out := z.run(t, "deploy", "resource", "testdata/payment.bpmn")
	if !strings.Contains(out, `"bpmnProcessId": "payment"`) {
		t.Errorf("zbctl deploy resource:\n%s", out)
	}
	// zbctl's plain form sends the deprecated DeployProcess.
	if out := z.run(t, "deploy", "testdata/payment.bpmn"); !strings.Contains(out, `"bpmnProcessId": "payment"`) {
		t.Errorf("zbctl deploy:\n%s", out)
	}
	paid := key(t, z.run(t, "create", "instance", "payment", "--variables", `{"orderId": "z-1"}`), "processInstanceKey")
	dropped := key(t, z.run(t, "create", "instance", "payment", "--variables", `{"orderId": "z-2"}`), "processInstanceKey")
	key(t, z.run(t, "publish", "message", "paid", "--correlationKey", "z-1", "--variables", `{"amount": 3}`), "key")
	if out := z.run(t, "cancel", "instance", strconv.FormatInt(dropped, 10)); !strings.Contains(out, strconv.FormatInt(dropped, 10)) {
		t.Errorf("zbctl cancel instance:\n%s", out)
	}
	if st := b.status(t, dropped); st != "cancelled" {
		t.Errorf("cancelled instance is %s", st)
	}
	// The message travels as a relay: it correlates once the consumer has it.
	testkit.Eventually(t, 30*time.Second, "the instance the message correlated to completing", func() bool {
		return b.status(t, paid) == "completed"
	})
}
