package zeebe_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"github.com/camunda/zeebe/clients/go/v8/pkg/zbc"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// taskToken is a job worker's credential (SUTRA_API_TOKEN), adminToken an
// operator's (SUTRA_ADMIN_TOKEN).
const (
	taskToken  = "t0ken"
	adminToken = "adm1n"
)

// bundle is a worker with both tokens on the test's schema and queues, and
// a Zeebe client holding the admin token.
type bundle struct {
	env    *testkit.Env
	cfg    app.Config
	w      *app.Worker
	client zbc.Client
}

func setup(t *testing.T, tweak func(*app.Config)) *bundle {
	t.Helper()
	env := testkit.New(t)
	cfg := apptest.Config(env)
	cfg.API.Token, cfg.AdminToken, cfg.API.Insecure = taskToken, adminToken, false
	if tweak != nil {
		tweak(&cfg)
	}
	t.Cleanup(func() {
		env.AssertNoOverlap(t, false)
		env.AssertNoClaimsHeld(t)
	})
	b := &bundle{env: env, cfg: cfg, w: startWorker(t, cfg)}
	b.client = dial(t, b.w.GatewayAddr(), adminToken)
	return b
}

// startWorker starts a worker with cfg and stops it when the test ends,
// then checks that no two steps overlapped and no claim is left held.
func startWorker(t *testing.T, cfg app.Config) *app.Worker {
	t.Helper()
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
	})
	return w
}

// dial is the official Go client on addr, sending token.
func dial(t *testing.T, addr, token string) zbc.Client {
	t.Helper()
	c, err := zbc.NewClient(&zbc.ClientConfig{GatewayAddress: addr, UsePlaintextConnection: true, CredentialsProvider: bearer(token)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// bearer sends a static token, as a client configured with one does (zbc
// fetches tokens only through OAuth).
type bearer string

func (b bearer) ApplyCredentials(_ context.Context, headers map[string]string) error {
	if b != "" {
		headers["Authorization"] = "Bearer " + string(b)
	}
	return nil
}

func (bearer) ShouldRetryRequest(context.Context, error) bool { return false }

// raw is a plain gRPC client of the gateway, for requests zbc checks
// before sending (malformed variables); its calls take ctxAs's metadata.
func (b *bundle) raw(t *testing.T) pb.GatewayClient {
	t.Helper()
	conn, err := grpc.NewClient(b.w.GatewayAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewGatewayClient(conn)
}

// ctxAs is the test's context with token as the call's bearer token.
func ctxAs(t *testing.T, token string) context.Context {
	return metadata.AppendToOutgoingContext(testkit.Ctx(t), "authorization", "Bearer "+token)
}

// deploy deploys a file of testdata through the gateway.
func (b *bundle) deploy(t *testing.T, name string) *pb.ProcessMetadata {
	t.Helper()
	resp, err := b.client.NewDeployResourceCommand().AddResourceFile("testdata/" + name).Send(testkit.Ctx(t))
	if err != nil {
		t.Fatalf("deploying %s: %v", name, err)
	}
	return resp.Deployments[0].GetProcess()
}

// wantStatus fails unless err is a gRPC status with code whose message
// holds every one of parts.
func wantStatus(t *testing.T, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("want %s, got %v", code, err)
	}
	if st.Code() != code {
		t.Fatalf("want %s, got %s: %s", code, st.Code(), st.Message())
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("%s message %q does not name %q", code, st.Message(), p)
		}
	}
}

// v1 GETs path of the admin API and decodes its JSON answer.
func (b *bundle) v1(t *testing.T, path string) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(testkit.Ctx(t), http.MethodGet, "http://"+b.w.APIAddr()+"/v1"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1%s: %d %s", path, resp.StatusCode, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// instance is the id and status of the instance whose key is key.
func (b *bundle) instance(t *testing.T, key int64) (id, status string) {
	t.Helper()
	if err := b.env.DB.QueryRow(testkit.Ctx(t), `SELECT id, status FROM instances WHERE zeebe_key = $1`, key).Scan(&id, &status); err != nil {
		t.Fatalf("instance with key %d: %v", key, err)
	}
	return id, status
}

// idOf is the id of the instance whose key is key.
func (b *bundle) idOf(t *testing.T, key int64) string {
	t.Helper()
	id, _ := b.instance(t, key)
	return id
}

// status is the status of the instance whose key is key.
func (b *bundle) status(t *testing.T, key int64) string {
	t.Helper()
	_, st := b.instance(t, key)
	return st
}
