package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// BenchmarkCommitOpeningASubscription measures what the look for buffered
// messages adds to the commit of a step that opens a subscription when
// nothing is buffered: no round trip, one function call in the same batch.
//
//	go test -run '^$' -bench CommitOpeningASubscription -benchtime 3000x ./store
func BenchmarkCommitOpeningASubscription(b *testing.B) {
	env, _, st := open(b)
	env.Deploy(b, "../examples/order.bpmn")
	// A realistic buffer: many messages waiting for other keys.
	if _, err := env.DB.Exec(testkit.Ctx(b), `INSERT INTO buffered_messages (message_id, message_name, correlation_key, expires_at)
		SELECT 'm-' || g, 'payment-received', 'other-' || g, now() + interval '1 hour' FROM generate_series(1, 10000) g;
		ANALYZE buffered_messages`); err != nil {
		b.Fatal(err)
	}
	run := 0
	for _, skip := range []bool{false, true, false, true} {
		name := map[bool]string{true: "without-buffer-check", false: "with-buffer-check"}[skip]
		b.Run(name, func(b *testing.B) {
			run++
			name := fmt.Sprintf("%s-%d", name, run) // instance ids unique across -count runs
			ctx := testkit.Ctx(b)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("%s-%d", name, i)
				inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: "bench/lane/0", Timeout: time.Minute, StartKey: "order"})
				if err != nil {
					b.Fatal(err)
				}
				state := engine.State{Status: engine.StatusActive, Variables: map[string]any{"orderId": id}, Seq: 1,
					Tokens: []engine.Token{{ID: "t1", Element: "Event_PaymentReceived", Wait: engine.WaitMessage,
						Armed: []engine.Armed{{Element: "Event_PaymentReceived", Key: id}}}}}
				eff := engine.Effects{Subscriptions: []engine.Subscription{{TokenID: "t1", Element: "Event_PaymentReceived", Message: "payment-received", CorrelationKey: id}}}
				if err := st.WriteStep(ctx, store.StepWrites{InstanceID: id, Owner: "bench/lane/0", Version: inst.Version,
					State: state, Effects: eff, InboxID: "start-" + id, SkipBufferCheck: skip}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
