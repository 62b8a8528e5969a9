package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Census is what the sweeper lease holder reports as gauges: counts no
// counter can give, taken by one replica so that a sum (or max) over
// replicas is right.
type Census struct {
	// OutboxBacklog counts outbox rows not published yet.
	OutboxBacklog int64
	// OutboxParked counts parked outbox rows (outbox_parked).
	OutboxParked int64
	// OldestClaim is the age of the oldest claim held (0: none). Past the
	// claim timeout it means the sweep is not running.
	OldestClaim time.Duration
	// IncidentsOpen counts incidents not resolved.
	IncidentsOpen int64
	// TasksOpen counts pull tasks waiting for a worker's outcome, by topic.
	TasksOpen map[string]int64
}

// Census counts in one round trip, each count on its partial index.
func (s *Store) Census(ctx context.Context) (Census, error) {
	c := Census{TasksOpen: map[string]int64{}}
	var oldest float64
	b := &pgx.Batch{}
	b.Queue("SELECT count(*) FROM outbox WHERE published_at IS NULL").QueryRow(func(r pgx.Row) error {
		return r.Scan(&c.OutboxBacklog)
	})
	b.Queue("SELECT count(*) FROM outbox_parked").QueryRow(func(r pgx.Row) error {
		return r.Scan(&c.OutboxParked)
	})
	b.Queue("SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(claimed_at)), 0)::float8 FROM claims").QueryRow(func(r pgx.Row) error {
		return r.Scan(&oldest)
	})
	b.Queue("SELECT count(*) FROM incidents WHERE resolved_at IS NULL").QueryRow(func(r pgx.Row) error {
		return r.Scan(&c.IncidentsOpen)
	})
	b.Queue("SELECT type, count(*) FROM tasks WHERE outcome IS NULL AND NOT user_task GROUP BY type").Query(func(rows pgx.Rows) error {
		var topic string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&topic, &n}, func() error {
			c.TasksOpen[topic] = n
			return nil
		})
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return Census{}, translate(err, "counting the census")
	}
	c.OldestClaim = time.Duration(max(oldest, 0) * float64(time.Second))
	return c, nil
}
