package operations

import (
	"context"
	"log/slog"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/startstop"
)

// leasedLoop is the loop of the leased runners (bulk migrations, batch
// operations): round after round while a round reports more due, else a
// wait for a wake-up or the poll interval; at the stop, the leases held are
// handed back with the final context.
type leasedLoop struct {
	wake chan struct{}
}

func newLeasedLoop() leasedLoop { return leasedLoop{wake: make(chan struct{}, 1)} }

// Wake makes the runner look for work now (some was created). It never
// blocks.
func (l leasedLoop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run loops until soft ends; what names the work in log lines.
func (l leasedLoop) run(soft, hard context.Context, log *slog.Logger, what string, poll time.Duration,
	round func(soft, hard context.Context) (busy bool, err error), release func(ctx context.Context) error) {
	defer func() {
		ctx, cancel := startstop.FinalContext(hard)
		defer cancel()
		if err := release(ctx); err != nil {
			log.Warn("handing back "+what+" leases", "code", fault.Code(err), "err", err)
		}
	}()
	for soft.Err() == nil {
		busy, err := round(soft, hard)
		if err != nil && soft.Err() == nil {
			log.Warn("running "+what+"s", "code", fault.Code(err), "err", err)
		}
		if busy {
			continue
		}
		select {
		case <-soft.Done():
		case <-l.wake:
		case <-time.After(poll):
		}
	}
}
