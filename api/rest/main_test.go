package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
	"github.com/sutra-run/worker/lanes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// taskToken is a job worker's credential (SUTRA_API_TOKEN), adminToken an
// operator's (SUTRA_ADMIN_TOKEN).
const (
	taskToken  = "t0ken"
	adminToken = "adm1n"
)

// bundle is a worker with both tokens on the test's schema and queues.
type bundle struct {
	env  *testkit.Env
	w    *app.Worker
	spec *contract
}

func setup(t *testing.T, tweak func(*app.Config)) *bundle {
	t.Helper()
	return setupHooked(t, tweak, nil)
}

// setupHooked is setup with the lanes' test hooks.
func setupHooked(t *testing.T, tweak func(*app.Config), hooks *lanes.Hooks) *bundle {
	t.Helper()
	env := testkit.New(t)
	cfg := apptest.Config(env)
	cfg.API.Token, cfg.AdminToken, cfg.API.Insecure = taskToken, adminToken, false
	if tweak != nil {
		tweak(&cfg)
	}
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: prometheus.NewRegistry(), Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
		env.AssertNoOverlap(t, false)
		env.AssertNoClaimsHeld(t)
	})
	return &bundle{env: env, w: w, spec: loadContract(t)}
}

// answer is a /v2 answer: its status, media type and body.
type answer struct {
	status int
	ctype  string
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d %s is not a JSON object: %v", a.status, a.body, err)
	}
	return m
}

// call sends method path with body (JSON unless it is a *multipart
// form) as token, and checks the answer against Camunda's spec when one
// is at hand (contract.go).
func (b *bundle) call(t *testing.T, token, method, path string, body any) answer {
	t.Helper()
	var raw []byte
	ctype := "application/json"
	switch v := body.(type) {
	case nil:
	case form:
		raw, ctype = v.body, v.ctype
	default:
		raw, _ = json.Marshal(v)
	}
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+b.w.APIAddr()+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: out}
	b.spec.check(t, req, raw, resp, out)
	return a
}

// form is a multipart body.
type form struct {
	body  []byte
	ctype string
}

// deployment is a deployment's multipart body of the files at paths.
func deployment(t *testing.T, paths ...string) form {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range paths {
		content, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := mw.CreateFormFile("resources", p)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(content)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return form{body: buf.Bytes(), ctype: mw.FormDataContentType()}
}

// wantProblem checks that a is a problem+json of status whose code is
// code, with every member Camunda's clients read.
func wantProblem(t *testing.T, a answer, status int, code string) map[string]any {
	t.Helper()
	if a.status != status || a.ctype != "application/problem+json" {
		t.Fatalf("answered %d %s %s, want a %d problem", a.status, a.ctype, a.body, status)
	}
	p := a.json(t)
	for _, k := range []string{"type", "title", "status", "detail", "instance", "code"} {
		if _, ok := p[k]; !ok {
			t.Errorf("problem %s has no %s", a.body, k)
		}
	}
	if p["code"] != code || !bytes.Contains([]byte(p["detail"].(string)), []byte(code)) || p["status"] != float64(status) {
		t.Errorf("problem %s: want code %s in code and detail", a.body, code)
	}
	return p
}
