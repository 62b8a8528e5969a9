package app_test

import (
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
)

func TestTheStepHistoryIsTrimmedPastItsRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(c *app.Config) { fastSweep(c); c.StepHistoryRetention = time.Hour })
	ctx := testkit.Ctx(t)
	// More than a sweep's batch (1,000) of old rows: the trim goes on until
	// a batch comes back short.
	if _, err := b.env.DB.Exec(ctx, `INSERT INTO step_history (instance_id, version, committed_at, cause, owner)
		SELECT 'old', g, now() - interval '2 hours', 'relay', 'x/lane/0' FROM generate_series(1, 2500) g
		UNION ALL SELECT 'new', g, now() - interval '30 minutes', 'relay', 'x/lane/0' FROM generate_series(1, 10) g`); err != nil {
		t.Fatal(err)
	}
	b.w.Sweeper().TestSignals.Swept.Until(t, "old steps trimmed", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM step_history WHERE instance_id = 'old'") == 0
	})
	if n := b.env.Int(t, "SELECT count(*) FROM step_history WHERE instance_id = 'new'"); n != 10 {
		t.Errorf("%d of 10 steps within the retention kept", n)
	}
}
