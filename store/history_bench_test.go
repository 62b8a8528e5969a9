package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// BenchmarkWriteGroupWithTheStepHistory measures what the step history's row
// adds to a group of 16 relay steps (the lanes' usual commit), against the
// same group writing none (a step without a cause writes no row). ns/op is
// per group.
//
//	go test -run '^$' -bench WriteGroupWithTheStepHistory -benchtime 300x -count 3 ./store
func BenchmarkWriteGroupWithTheStepHistory(b *testing.B) {
	env, _, st := open(b)
	env.Deploy(b, "../examples/order.bpmn")
	const n = 16
	run := 0
	for _, history := range []bool{false, true, false, true} {
		b.Run(map[bool]string{false: "without", true: "with"}[history], func(b *testing.B) {
			run++
			ctx := testkit.Ctx(b)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cs := make([]store.StepWrites, n)
				for k := range cs {
					id := fmt.Sprintf("history-%d-%d-%d", run, i, k)
					inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: "bench/lane/0", Timeout: time.Minute, StartKey: "order"})
					if err != nil {
						b.Fatal(err)
					}
					state := engine.State{Status: engine.StatusActive, Variables: map[string]any{"orderId": id}, Seq: 1,
						Tokens: []engine.Token{{ID: "t1", Element: "Event_PaymentReceived", Wait: engine.WaitMessage}}}
					cs[k] = store.StepWrites{InstanceID: id, Owner: "bench/lane/0", Version: inst.Version, State: state,
						InboxID: "start-" + id, SkipBufferCheck: true}
					if history {
						cs[k].History = store.StepCause{Kind: "relay", Detail: "message payment-received"}
					}
				}
				b.StartTimer()
				for k, err := range st.WriteGroup(ctx, cs) {
					if err != nil {
						b.Fatalf("step %d: %v", k, err)
					}
				}
			}
		})
	}
}
