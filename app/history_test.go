package app_test

import (
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
)

// The step history keeps its rows by day: a day's partition goes once the
// day ended more than the retention ago (and before yesterday). (The rows
// of before the partitioning: store TestRowsOfBeforeThePartitioningMoveOverWhileWritesContinue.)
func TestTheStepHistorysDaysPastTheRetentionAreDropped(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(c *app.Config) { fastSweep(c); c.StepHistoryRetention = time.Hour })
	ctx := testkit.Ctx(t)
	for _, q := range []string{
		`SELECT sutra_day_partitions('step_history_days', (now() AT TIME ZONE 'UTC')::date - 3, (now() AT TIME ZONE 'UTC')::date - 3)`,
		`INSERT INTO step_history_days (instance_id, version, committed_at, cause, owner)
		SELECT 'old', g, now() - interval '3 days', 'relay', 'x/lane/0' FROM generate_series(1, 10) g
		UNION ALL SELECT 'new', g, now(), 'relay', 'x/lane/0' FROM generate_series(1, 10) g`,
	} {
		if _, err := b.env.DB.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	b.w.Sweeper().TestSignals.Swept.Until(t, "old steps dropped", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM step_history WHERE instance_id = 'old'") == 0
	})
	if n := b.env.Int(t, "SELECT count(*) FROM step_history_days WHERE instance_id = 'new'"); n != 10 {
		t.Errorf("%d of 10 steps within the retention kept in the partitioned table", n)
	}
}
