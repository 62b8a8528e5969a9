package zeebe_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

func TestBroadcastSignalResumesTheWaitingInstanceAndStartsTheCatchingProcess(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	b.deploy(t, "signals.bpmn")
	inst, err := b.client.NewCreateInstanceCommand().BPMNProcessId("sig-catch").LatestVersion().Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the instance waiting for the signal", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM signal_subscriptions WHERE signal_name = 'alarm'") == 1
	})
	cmd, err := b.client.NewBroadcastSignalCommand().SignalName("alarm").VariablesFromMap(map[string]any{"level": 2})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cmd.Send(ctx)
	if err != nil || resp.Key < firstKey || resp.TenantId != "<default>" {
		t.Fatalf("broadcast answered %v, %v", resp, err)
	}
	testkit.Eventually(t, 30*time.Second, "the waiting instance and a signal-started one completed", func() bool {
		return b.status(t, inst.ProcessInstanceKey) == "completed" &&
			b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'sig-start' AND status = 'completed' AND variables->>'level' = '2'") == 1
	})

	_, err = b.client.NewBroadcastSignalCommand().SignalName("").Send(ctx)
	wantStatus(t, err, codes.InvalidArgument, fault.APIInvalid, "signalName")
	worker := dial(t, b.w.GatewayAddr(), taskToken)
	_, err = worker.NewBroadcastSignalCommand().SignalName("alarm").Send(ctx)
	wantStatus(t, err, codes.PermissionDenied, fault.APIForbidden)
}
