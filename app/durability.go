package app

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/store"
)

// durabilityInterval is how often the worker reads again whether its
// commits wait for a synchronous standby: a failover or an operator may
// change it (pg_auto_failover empties synchronous_standby_names while the
// standby is gone).
const durabilityInterval = 10 * time.Second

// durabilityWatch reads at start, and every durabilityInterval, whether
// the database's commits wait for a synchronous standby (store.Durability),
// for /readyz, sutra_database_synchronous and the logs.
type durabilityWatch struct {
	startstop.Base
	store *store.Store
	log   *slog.Logger
	// last is the last reading; nil before the first.
	last atomic.Pointer[store.Durability]
}

func (d *durabilityWatch) Start(ctx context.Context) error {
	return d.Run(ctx, "durability", d.run)
}

func (d *durabilityWatch) run(soft, _ context.Context) {
	tick := time.NewTicker(durabilityInterval)
	defer tick.Stop()
	for {
		d.check(soft)
		select {
		case <-soft.Done():
			return
		case <-tick.C:
		}
	}
}

// check reads the settings once and logs what changed; a database that
// does not answer keeps the last reading (Ready says so on its own).
func (d *durabilityWatch) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now, err := d.store.Durability(ctx)
	if err != nil {
		return
	}
	prev := d.last.Swap(&now)
	if prev != nil && prev.Synchronous() == now.Synchronous() && prev.Blocked() == now.Blocked() {
		return
	}
	switch {
	case now.Blocked():
		d.log.Error("the database holds every commit: "+now.String(), "code", fault.Unavailable)
	case now.Synchronous():
		d.log.Info("the database: " + now.String())
	default:
		d.log.Warn("the database: " + now.String())
	}
}

// synchronous is sutra_database_synchronous: 1 while commits wait for a
// synchronous standby, 0 otherwise or before the first reading.
func (d *durabilityWatch) synchronous() float64 {
	if l := d.last.Load(); l != nil && l.Synchronous() {
		return 1
	}
	return 0
}

// blocked is a reason /readyz gives while commits wait for a standby that
// is not there, nil otherwise.
func (d *durabilityWatch) blocked() error {
	if l := d.last.Load(); l != nil && l.Blocked() {
		return notReady{reason: "the database holds every commit until a synchronous standby is back"}
	}
	return nil
}

// detail is what /readyz says of the database's durability.
func (d *durabilityWatch) detail() string {
	if l := d.last.Load(); l != nil {
		return l.String()
	}
	return "not read yet whether commits wait for a synchronous standby"
}
