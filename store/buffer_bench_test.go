package store_test

import (
	"context"
	"errors"
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

// BenchmarkWriteGroupWithABufferedMatch measures a group of 16 steps that
// each open a subscription, written the way the lanes write it (a step left
// out is written on its own; a buffered match is applied and the step
// written again): with no buffered message matching, and with one of the 16
// matching one. ns/op is per group.
//
//	go test -run '^$' -bench WriteGroupWithABufferedMatch -benchtime 300x -count 3 ./store
func BenchmarkWriteGroupWithABufferedMatch(b *testing.B) {
	env, _, st := open(b)
	env.Deploy(b, "../examples/order.bpmn")
	const n = 16
	run := 0
	for _, matches := range []int{0, 1} {
		b.Run(fmt.Sprintf("matches-%d", matches), func(b *testing.B) {
			run++
			ctx := testkit.Ctx(b)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cs := make([]store.StepWrites, n)
				for k := range cs {
					id := fmt.Sprintf("group-%d-%d-%d", run, i, k)
					inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: "bench/lane/0", Timeout: time.Minute, StartKey: "order"})
					if err != nil {
						b.Fatal(err)
					}
					state := engine.State{Status: engine.StatusActive, Variables: map[string]any{"orderId": id}, Seq: 1,
						Tokens: []engine.Token{{ID: "t1", Element: "Event_PaymentReceived", Wait: engine.WaitMessage,
							Armed: []engine.Armed{{Element: "Event_PaymentReceived", Key: id}}}}}
					eff := engine.Effects{Subscriptions: []engine.Subscription{{TokenID: "t1", Element: "Event_PaymentReceived", Message: "payment-received", CorrelationKey: id}}}
					cs[k] = store.StepWrites{InstanceID: id, Owner: "bench/lane/0", Version: inst.Version, State: state, Effects: eff, InboxID: "start-" + id}
					if k < matches {
						if _, err := env.DB.Exec(ctx, `INSERT INTO buffered_messages (message_id, message_name, correlation_key, expires_at, variables)
							VALUES ($1, 'payment-received', $2, now() + interval '1 hour', '{}')`, "early-"+id, id); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StartTimer()
				for k, err := range st.WriteGroup(ctx, cs) {
					if err := settle(ctx, st, cs[k], err); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// settle writes a step of a group the way the lanes do: on its own when the
// group left it out, again with a buffered message applied when one matched.
func settle(ctx context.Context, st *store.Store, c store.StepWrites, err error) error {
	for {
		var m *store.BufferedMatch
		switch {
		case errors.Is(err, store.ErrNotWritten):
			err = st.WriteStep(ctx, c)
		case errors.As(err, &m):
			c.State = engine.State{Status: engine.StatusCompleted, Variables: c.State.Variables, Seq: 2}
			c.Consumed = append(c.Consumed, store.Consumed{BufferedID: m.ID,
				Effects: engine.Effects{CloseWaits: []engine.WaitRef{{TokenID: "t1", Element: "Event_PaymentReceived"}}}})
			err = st.WriteStep(ctx, c)
		default:
			return err
		}
	}
}
