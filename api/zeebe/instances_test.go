package zeebe_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"github.com/camunda/zeebe/clients/go/v8/pkg/zbc"
	"google.golang.org/grpc/codes"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

func TestCreateProcessInstanceByIDVersionOrKey(t *testing.T) {
	b := setup(t, nil)
	p := b.deploy(t, "payment.bpmn")
	ctx := testkit.Ctx(t)
	vars := map[string]any{"orderId": "o-1"}
	byLatest, err := b.client.NewCreateInstanceCommand().BPMNProcessId("payment").LatestVersion().VariablesFromMap(vars)
	if err != nil {
		t.Fatal(err)
	}
	byVersion, _ := b.client.NewCreateInstanceCommand().BPMNProcessId("payment").Version(1).VariablesFromMap(vars)
	byKey, _ := b.client.NewCreateInstanceCommand().ProcessDefinitionKey(p.ProcessDefinitionKey).VariablesFromMap(vars)
	seen := map[int64]bool{}
	for name, cmd := range map[string]interface {
		Send(context.Context) (*pb.CreateProcessInstanceResponse, error)
	}{"latest": byLatest, "version": byVersion, "key": byKey} {
		resp, err := cmd.Send(ctx)
		if err != nil {
			t.Fatalf("by %s: %v", name, err)
		}
		if resp.BpmnProcessId != "payment" || resp.Version != 1 || resp.ProcessDefinitionKey != p.ProcessDefinitionKey ||
			resp.ProcessInstanceKey < firstKey || seen[resp.ProcessInstanceKey] || resp.TenantId != "<default>" {
			t.Errorf("by %s: %+v", name, resp)
		}
		seen[resp.ProcessInstanceKey] = true
		// /v1 shows the instance's key beside its id.
		id := b.idOf(t, resp.ProcessInstanceKey)
		in := b.v1(t, "/instances/"+id)
		if in["zeebe_key"] != strconv.FormatInt(resp.ProcessInstanceKey, 10) || in["variables"].(map[string]any)["orderId"] != "o-1" {
			t.Errorf("GET /v1/instances/%s: %v", id, in)
		}
	}
}

func TestCreateProcessInstanceRefusals(t *testing.T) {
	b := setup(t, nil)
	p := b.deploy(t, "payment.bpmn")
	ctx := testkit.Ctx(t)
	_, err := b.client.NewCreateInstanceCommand().BPMNProcessId("nope").LatestVersion().Send(ctx)
	wantStatus(t, err, codes.NotFound, fault.UnknownDefinition, "nope")
	_, err = b.client.NewCreateInstanceCommand().BPMNProcessId("payment").Version(7).Send(ctx)
	wantStatus(t, err, codes.NotFound, fault.UnknownDefinition)
	_, err = b.client.NewCreateInstanceCommand().ProcessDefinitionKey(p.ProcessDefinitionKey + 1000).Send(ctx)
	wantStatus(t, err, codes.NotFound, strconv.FormatInt(p.ProcessDefinitionKey+1000, 10))
	_, err = b.client.NewCreateInstanceCommand().BPMNProcessId("payment").LatestVersion().StartBeforeElement("Paid").Send(ctx)
	wantStatus(t, err, codes.InvalidArgument, "startInstructions")
	_, err = b.client.NewCreateInstanceCommand().BPMNProcessId("payment").LatestVersion().TenantId("other").Send(ctx)
	wantStatus(t, err, codes.InvalidArgument, "tenant", "other")
	// zbc checks variables before it sends them: a client that does not.
	raw := b.raw(t)
	for doc, reason := range map[string]string{`{"orderId": `: "unexpected EOF", `[1, 2]`: "not a JSON object", `{} {}`: "data after"} {
		_, err = raw.CreateProcessInstance(ctxAs(t, adminToken), &pb.CreateProcessInstanceRequest{BpmnProcessId: "payment", Version: -1, Variables: doc})
		wantStatus(t, err, codes.InvalidArgument, fault.APIInvalid, "variables", reason)
	}
	var n int
	if err := b.env.DB.QueryRow(ctx, `SELECT count(*) FROM instances`).Scan(&n); err != nil || n != 0 {
		t.Errorf("refused creates left %d instances (%v)", n, err)
	}
}

// waitingKey waits until an instance waits for a message with
// correlation key and returns the instance's key.
func (b *bundle) waitingKey(t *testing.T, correlationKey string) int64 {
	t.Helper()
	var key int64
	testkit.Eventually(t, 30*time.Second, "a subscription with correlation key "+correlationKey, func() bool {
		err := b.env.DB.QueryRow(testkit.Ctx(t), `SELECT i.zeebe_key FROM subscriptions s JOIN instances i ON i.id = s.instance_id
			WHERE s.correlation_key = $1`, correlationKey).Scan(&key)
		return err == nil
	})
	return key
}

type withResult struct {
	resp *pb.CreateProcessInstanceWithResultResponse
	err  error
}

// createWithResult starts CreateProcessInstanceWithResult for a payment of
// orderID on c, its context bounded by timeout (zbc asks for a request
// timeout 10% shorter); its answer comes on the channel.
func createWithResult(t *testing.T, c zbc.Client, orderID string, timeout time.Duration, fetch ...string) <-chan withResult {
	t.Helper()
	cmd, err := c.NewCreateInstanceCommand().BPMNProcessId("payment").LatestVersion().VariablesFromMap(map[string]any{"orderId": orderID})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan withResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp, err := cmd.WithResult().FetchVariables(fetch...).Send(ctx)
		out <- withResult{resp, err}
	}()
	return out
}

func TestCreateWithResultAnswersAtTheEnd(t *testing.T) {
	// No look for ends other replicas committed within the test: only this
	// replica's own step can wake the call.
	b := setup(t, func(c *app.Config) { c.Tasks.PollInterval = time.Hour })
	b.deploy(t, "payment.bpmn")
	done := createWithResult(t, b.client, "o-1", time.Minute, "amount")
	key := b.waitingKey(t, "o-1")
	// The message correlates and the instance ends on this replica: its
	// step wakes the waiting call.
	msg, err := b.client.NewPublishMessageCommand().MessageName("paid").CorrelationKey("o-1").VariablesFromMap(map[string]any{"amount": 42, "note": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := msg.Send(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	var vars map[string]any
	if err := json.Unmarshal([]byte(r.resp.Variables), &vars); err != nil {
		t.Fatal(err)
	}
	// fetchVariables names amount only.
	if r.resp.ProcessInstanceKey != key || r.resp.BpmnProcessId != "payment" || len(vars) != 1 || vars["amount"] != 42.0 {
		t.Errorf("answer %+v, variables %v", r.resp, vars)
	}
	if st := b.status(t, key); st != "completed" {
		t.Errorf("instance is %s", st)
	}
}

func TestCreateWithResultTimesOutAsZeebe(t *testing.T) {
	b := setup(t, nil)
	b.deploy(t, "payment.bpmn")
	r := <-createWithResult(t, b.client, "o-1", 2*time.Second)
	wantStatus(t, r.err, codes.DeadlineExceeded, "has not completed")
	// The instance runs on.
	if st := b.status(t, b.waitingKey(t, "o-1")); st != "active" {
		t.Errorf("instance is %s", st)
	}
}

func TestCreateWithResultCallsWaitingAreCappedByMaxStreams(t *testing.T) {
	b := setup(t, func(c *app.Config) { c.Gateway.MaxStreams = 1 })
	b.deploy(t, "payment.bpmn")
	first := createWithResult(t, b.client, "o-1", time.Minute)
	b.waitingKey(t, "o-1") // the first call waits for its end
	r := <-createWithResult(t, b.client, "o-2", time.Minute)
	wantStatus(t, r.err, codes.ResourceExhausted, fault.APIBusy, "SUTRA_GATEWAY_MAX_STREAMS")
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE variables->>'orderId' = 'o-2'"); n != 0 {
		t.Errorf("the refused call started %d instances", n)
	}
	// Cancelling the first instance ends its call and frees the place.
	if _, err := b.client.NewCancelInstanceCommand().ProcessInstanceKey(b.waitingKey(t, "o-1")).Send(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, (<-first).err, codes.FailedPrecondition, "cancelled")
	r = <-createWithResult(t, b.client, "o-3", 2*time.Second)
	wantStatus(t, r.err, codes.DeadlineExceeded, "has not completed")
}

func TestCreateWithResultHearsOfAnEndOnAnotherReplica(t *testing.T) {
	b := setup(t, func(c *app.Config) { c.Tasks.PollInterval = 50 * time.Millisecond })
	b.deploy(t, "payment.bpmn")
	cfg := b.cfg
	cfg.ReplicaID += "-2"
	other := dial(t, startWorker(t, cfg).GatewayAddr(), adminToken)
	done := createWithResult(t, b.client, "o-1", time.Minute)
	key := b.waitingKey(t, "o-1")
	// The other replica's admin lane cancels it: only the look for ends
	// committed elsewhere can wake the call.
	if _, err := other.NewCancelInstanceCommand().ProcessInstanceKey(key).Send(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	wantStatus(t, r.err, codes.FailedPrecondition, strconv.FormatInt(key, 10), "cancelled")
}

// createPayment starts a payment of orderID, waiting for its message, and
// returns its key.
func (b *bundle) createPayment(t *testing.T, orderID string) int64 {
	t.Helper()
	cmd, err := b.client.NewCreateInstanceCommand().BPMNProcessId("payment").LatestVersion().VariablesFromMap(map[string]any{"orderId": orderID})
	if err != nil {
		t.Fatal(err)
	}
	created, err := cmd.Send(testkit.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return created.ProcessInstanceKey
}

func TestCancelProcessInstance(t *testing.T) {
	b := setup(t, nil)
	b.deploy(t, "payment.bpmn")
	ctx := testkit.Ctx(t)
	key := b.createPayment(t, "o-1")
	if _, err := b.client.NewCancelInstanceCommand().ProcessInstanceKey(key).Send(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.status(t, key); st != "cancelled" {
		t.Errorf("instance is %s", st)
	}
	// Ended, it is gone for Zeebe clients; an unknown key never was.
	_, err := b.client.NewCancelInstanceCommand().ProcessInstanceKey(key).Send(ctx)
	wantStatus(t, err, codes.NotFound, fault.NotFound, "ended")
	_, err = b.client.NewCancelInstanceCommand().ProcessInstanceKey(12345).Send(ctx)
	wantStatus(t, err, codes.NotFound, fault.NotFound, "12345")
}

func TestSetVariables(t *testing.T) {
	b := setup(t, nil)
	b.deploy(t, "payment.bpmn")
	ctx := testkit.Ctx(t)
	key := b.createPayment(t, "o-1")
	for i, local := range []bool{false, true} {
		set, err := b.client.NewSetVariablesCommand().ElementInstanceKey(key).VariablesFromMap(map[string]any{"step": i})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := set.Local(local).Send(ctx)
		if err != nil {
			t.Fatalf("local %v: %v", local, err)
		}
		if resp.Key < firstKey {
			t.Errorf("update key %d", resp.Key)
		}
		vars := b.v1(t, "/instances/"+b.idOf(t, key))["variables"].(map[string]any)
		if vars["step"] != float64(i) || vars["orderId"] != "o-1" {
			t.Errorf("local %v: variables %v", local, vars)
		}
	}
	_, err := b.raw(t).SetVariables(ctxAs(t, adminToken), &pb.SetVariablesRequest{ElementInstanceKey: key, Variables: `{"a":`})
	wantStatus(t, err, codes.InvalidArgument, "variables", "unexpected EOF")
	set, _ := b.client.NewSetVariablesCommand().ElementInstanceKey(54321).VariablesFromMap(map[string]any{"a": 1})
	_, err = set.Send(ctx)
	wantStatus(t, err, codes.NotFound, "54321")
}
