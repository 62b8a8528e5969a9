package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/sutra-run/worker/internal/testkit"
)

func TestAConfigurationThatCannotWorkExitsWithStatus2NamingTheVariable(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	for _, tt := range []struct{ set, says string }{
		{"SUTRA_LANES=0", "SUTRA_LANES"},
		{"SUTRA_LANES=-3", "SUTRA_LANES"},
		{"SUTRA_LANES=100000", "SUTRA_LANES"},
		{"SUTRA_PREFETCH=0", "SUTRA_PREFETCH"},
		{"SUTRA_CLAIM_TIMEOUT=0s", "SUTRA_CLAIM_TIMEOUT"},
		{"SUTRA_BATCH_WAIT=-1ms", "SUTRA_BATCH_WAIT"},
		{"SUTRA_BATCH_WAIT=1s", "SUTRA_BATCH_WAIT"},      // every relay of a steady load would wait that long
		{"SUTRA_STEP_TIMEOUT=30s", "SUTRA_STEP_TIMEOUT"}, // not below the claim timeout
		{"SUTRA_FEEL_MAX_STEPS=0", "SUTRA_FEEL_MAX_STEPS"},
		{"SUTRA_FEEL_MAX_BYTES=100", "SUTRA_FEEL_MAX_BYTES"},
		{"SUTRA_DATABASE_URL=notaurl", "SUTRA_DATABASE_URL"},
		{"SUTRA_AMQP_URL=http://127.0.0.1:5672/", "SUTRA_AMQP_URL"},
		// The nodes of one cluster share their virtual hosts and users.
		{"SUTRA_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/,amqp://guest:guest@127.0.0.1:5673/other", "SUTRA_AMQP_URL"},
		{"SUTRA_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/,amqp://admin:guest@127.0.0.1:5673/", "SUTRA_AMQP_URL"},
		{"SUTRA_OAUTH_TOKEN_TTL=0s", "SUTRA_OAUTH_TOKEN_TTL"},
		{"SUTRA_OAUTH_TOKEN_TTL=1500ms", "SUTRA_OAUTH_TOKEN_TTL"}, // expires_in is whole seconds
		// TLS on the API listener: both files or neither, and they must load.
		{"SUTRA_API_TLS_CERT=/nonexistent/cert.pem", "SUTRA_API_TLS_KEY together"},
		{"SUTRA_API_TLS_CERT=/nonexistent/cert.pem SUTRA_API_TLS_KEY=/nonexistent/key.pem", "do not load"},
		// A pool no server with the default max_connections grants.
		{"SUTRA_LANES=1000", "max_connections"},
	} {
		cmd := exec.Command(binary, "run")
		cmd.Env = append(environ(env, "cfg"), strings.Fields(tt.set)...)
		out, err := cmd.CombinedOutput()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(string(out), tt.says) {
			t.Errorf("%s: exit %d, output:\n%s\nwant exit 2 naming %s", tt.set, code, out, tt.says)
		}
	}
}

func TestTheFirstLogLineSaysWhatRunsAndAnUnknownVariableIsWarnedAbout(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	p := startProcess(t, env, "logs", "SUTRA_LANE=4", "SUTRA_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/")
	p.waitLog(t, "worker started")
	var first map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
	var sawUnknown, sawDuration bool
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue // the race detector's lines, if any
		}
		if first == nil {
			first = line
		}
		if line["replica"] != "logs" {
			t.Errorf("a line without the replica: %s", sc.Text())
		}
		if line["variable"] == "SUTRA_LANE" {
			sawUnknown = true
		}
		if d, ok := line["shutdown_timeout"]; ok {
			_, isString := d.(string)
			sawDuration = isString
		}
	}
	if first["msg"] != "worker starting" || first["version"] == nil || first["database"] == nil || first["broker"] == nil ||
		first["lanes"] == nil || first["api"] == nil || strings.Contains(first["broker"].(string), "guest:guest") {
		t.Errorf("first line = %v: want version, endpoints with passwords redacted, lanes and listeners", first)
	}
	if !sawUnknown {
		t.Error("SUTRA_LANE (a typo of SUTRA_LANES) was not warned about")
	}
	if !sawDuration {
		t.Error("durations are not written as text")
	}
}

func TestABrokerThatRefusesTheWorkerStopsTheStartWithWhatToChange(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	cmd := exec.Command(binary, "run")
	cmd.Env = append(environ(env, "refused"), "SUTRA_AMQP_URL=amqp://guest:wrong@127.0.0.1:5672/")
	out, err := cmd.CombinedOutput()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 1 || !strings.Contains(string(out), "correct the credentials in SUTRA_AMQP_URL") || strings.Contains(string(out), "wrong@") {
		t.Errorf("exit %d, output:\n%s\nwant exit 1 saying to correct the credentials, the password redacted", code, out)
	}
}

// An API listener without a token would answer every caller (lock tasks,
// read their variables): the worker refuses to start unless told the
// network is trusted, and says both ways out.
func TestAWorkerWithItsAPIOnAndNoTokenExitsWithStatus2NamingTokenAndInsecure(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	for _, extra := range [][]string{{"SUTRA_API_TOKEN="}, {"SUTRA_API_TOKEN=", "SUTRA_ADMIN_INSECURE=true"}} {
		cmd := exec.Command(binary, "run")
		cmd.Env = append(environ(env, "notoken"), extra...)
		out, err := cmd.CombinedOutput()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(string(out), "SUTRA_API_TOKEN") || !strings.Contains(string(out), "SUTRA_API_INSECURE") {
			t.Errorf("%v: exit %d, output:\n%s\nwant exit 2 naming SUTRA_API_TOKEN and SUTRA_API_INSECURE", extra, code, out)
		}
	}
}

func TestAWorkerWithoutATokenStartsWhenToldTheNetworkIsTrustedOrWithItsAPIOff(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	insecure := startProcess(t, env, "insecure", "SUTRA_API_TOKEN=", "SUTRA_API_INSECURE=true")
	insecure.waitLog(t, "SUTRA_API_INSECURE is true: the task API accepts every caller")
	insecure.waitLog(t, "worker started")
	off := startProcess(t, env, "apioff", "SUTRA_API_TOKEN=", "SUTRA_API_ADDR=")
	off.waitLog(t, "worker started")
}

// migrate and deploy listen on nothing: they need no API token (the
// migration Job and compose's one-shots run without one).
func TestMigrateAndDeployRunWithoutAnAPIToken(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	for _, args := range [][]string{{"migrate"}, {"deploy", "../../examples/order.bpmn"}} {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(environ(env, "oneshot"), "SUTRA_API_TOKEN=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("worker %v without a token: %v\n%s", args, err, out)
		}
	}
}
