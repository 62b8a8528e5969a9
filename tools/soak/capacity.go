package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/tools/bench"
)

// rate is SOAK_RATE: relays a second ("3000"), or a share of the drain rate
// the soak measures first on the same machine ("40%"), so that a latency
// target can be stated for any machine: a fixed rate is a different load on
// a machine twice as fast.
type rate struct {
	value float64 // relays a second, or the share when share is set
	share bool
}

// Decode reads SOAK_RATE (envconfig.Decoder).
func (r *rate) Decode(s string) error {
	v, share := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		return fmt.Errorf("SOAK_RATE %q is neither relays a second (3000) nor a share of the measured drain rate (40%%)", s)
	}
	if share {
		f /= 100
	}
	*r = rate{value: f, share: share}
	return nil
}

func (r rate) String() string {
	if r.share {
		return strconv.FormatFloat(r.value*100, 'f', -1, 64) + "%"
	}
	return strconv.FormatFloat(r.value, 'f', -1, 64)
}

// perSecond is the offered rate, given the drain rate measured (0 when it
// was not).
func (r rate) perSecond(capacity float64) float64 {
	if r.share {
		return r.value * capacity
	}
	return r.value
}

// capacityPrefix starts the message id of every relay of the capacity
// backlog, which the latency samples (PingPrefix) leave out.
const capacityPrefix = "drain-"

// measureCapacity publishes n relays as fast as the broker confirms them to
// the running worker and returns the rate it committed them at: the drain
// rate `make bench` reports (loadgen.Measure, first publish to last commit),
// here of the worker binary at its defaults. The relays are made as they are
// published, so a large n costs no memory.
func measureCapacity(ctx context.Context, db *pgxpool.Pool, pub *loadgen.Publisher, env *bench.Env, n int) (float64, error) {
	if err := pub.PublishEach(ctx, n, 0, func(i int) loadgen.Relay {
		r := env.Ping(i)
		r.ID = capacityPrefix + strconv.Itoa(i)
		return r
	}); err != nil {
		return 0, fmt.Errorf("publishing the capacity backlog: %w", err)
	}
	if err := waitCommitted(ctx, db, capacityPrefix, time.Time{}, int64(n), time.Minute); err != nil {
		return 0, fmt.Errorf("draining the capacity backlog: %w", err)
	}
	m, err := loadgen.Measure(ctx, db, capacityPrefix)
	if err != nil {
		return 0, err
	}
	return m.StepsPerS, dropBacklog(ctx, db)
}

// dropBacklog deletes the capacity backlog's inbox and step history rows
// (from the tables partitioned by day behind the views) and vacuums the two
// tables: left there until their day is dropped, they would weigh on the
// table sizes the flatness target compares.
func dropBacklog(ctx context.Context, db *pgxpool.Pool) error {
	for _, sql := range []string{
		`DELETE FROM inbox_days WHERE starts_with(message_id, '` + capacityPrefix + `')`,
		`DELETE FROM step_history_days WHERE starts_with(message_id, '` + capacityPrefix + `')`,
		`VACUUM inbox_days, step_history_days`,
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			return fmt.Errorf("dropping the capacity backlog: %w", err)
		}
	}
	return nil
}
