package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// A relay is buffered by a transaction that has found no subscription for its
// key and holds the key's lock, while a step opens that subscription. The
// step's commit must wait for the lock and then see the buffered message (its
// look reads a snapshot taken after the lock), so that the message is
// consumed by that step and not stranded until its TTL: the look locked
// nothing, or looked in the same statement as it locked, fails here.
func TestACommitOpeningASubscriptionFindsTheMessageBufferedWhileItWaitedForTheKey(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	env.Deploy(t, "../examples/order.bpmn")
	id := "o-" + env.Schema // the lock is database-wide: a key of this test's own
	const owner = "r/lane/0"
	inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: owner, Timeout: time.Minute, StartKey: "order"})
	if err != nil {
		t.Fatal(err)
	}

	// The buffering side: its key's lock held, its row written, not committed.
	tx, err := env.DB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	var buffering int32
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&buffering); err != nil {
		t.Fatal(err)
	}
	var resolved *string
	if err := tx.QueryRow(ctx, "SELECT instance_id FROM sutra_resolve_or_buffer($1, $2, $3, $4, '{\"amount\": 1}', '\\x', '')",
		"payment-received", id, "paid-"+id, "1 hour").Scan(&resolved); err != nil || resolved != nil {
		t.Fatalf("buffering = %v, %v; want it buffered", resolved, err)
	}

	state := engine.State{Status: engine.StatusActive, Variables: map[string]any{"orderId": id}, Seq: 1,
		Tokens: []engine.Token{{ID: "t1", Element: "Event_PaymentReceived", Wait: engine.WaitMessage,
			Armed: []engine.Armed{{Element: "Event_PaymentReceived", Key: id}}}}}
	eff := engine.Effects{Subscriptions: []engine.Subscription{{TokenID: "t1", Element: "Event_PaymentReceived",
		Message: "payment-received", CorrelationKey: id}}}
	committed := make(chan error, 1)
	go func() {
		committed <- st.WriteStep(ctx, store.StepWrites{InstanceID: id, Owner: owner, Version: inst.Version, State: state,
			Effects: eff, InboxID: "start-" + id})
	}()
	testkit.Eventually(t, 30*time.Second, "the commit waiting for the key's lock", func() bool {
		select {
		case err := <-committed:
			t.Fatalf("the commit ended (%v) while the buffering held its key's lock", err)
		default:
		}
		return env.Int(t, "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", buffering) == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var m *store.BufferedMatch
	if err := <-committed; !errors.As(err, &m) || m.MessageID != "paid-"+id || m.Variables["amount"] != 1.0 {
		t.Fatalf("commit = %v, want the match of the message buffered meanwhile", err)
	}
	if n := env.Int(t, "SELECT count(*) FROM subscriptions WHERE instance_id = $1", id); n != 0 {
		t.Errorf("the matched commit left %d subscriptions; it must roll back", n)
	}
}
