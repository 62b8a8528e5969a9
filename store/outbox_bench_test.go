package store_test

import (
	"testing"
	"time"

	"github.com/sutra-run/worker/store"
)

// BenchmarkOutboxLeaseAndSettle measures the publisher's database work per
// row: leasing full batches of a backlog and marking them published (one
// op is one row).
//
//	go test -run '^$' -bench OutboxLeaseAndSettle -benchtime 20000x ./store
func BenchmarkOutboxLeaseAndSettle(b *testing.B) {
	env, ctx, st := open(b)
	const batch = 256
	// A backlog over 256 instances, round robin as steps write it.
	if _, err := env.DB.Exec(ctx, `INSERT INTO outbox (id, instance_id, message_name, variables)
		SELECT 'r-' || g, 'i-' || (g % 256), 'pong', '{"n": 1}' FROM generate_series(1, $1) g`, b.N); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		rows, err := st.LeaseOutbox(ctx, "bench", batch, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) == 0 {
			b.Fatalf("nothing leased after %d rows", done)
		}
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		if err := st.SettleOutbox(ctx, "bench", store.OutboxSettlement{Published: ids}); err != nil {
			b.Fatal(err)
		}
		done += len(rows)
	}
}
