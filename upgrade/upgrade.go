// Package upgrade applies the contract migrations a worker started without.
//
// A contract step (store.Migrate) waits while an older replica is live. A
// worker whose start found one waiting runs a Contracts component, which
// tries the migrations again every interval until none waits: once the
// last replica of the release before has left, the step is applied without
// anyone running `worker migrate`. Every replica that started with a step
// waiting tries; the migration lock makes one of them apply it.
package upgrade

import (
	"context"
	"log/slog"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
)

// Deps are what the component needs.
type Deps struct {
	// Migrate applies what is not applied yet (store.Migrate): nil when
	// nothing waits, fault.MigrateContractWaiting while a step waits.
	Migrate func(ctx context.Context) error
	Logger  *slog.Logger
	// Clock schedules the tries (default the real one).
	Clock clock.Clock
}

// Config configures the component.
type Config struct {
	// Interval between tries (default 15s: about a replica lease's TTL, the
	// longest a crashed old replica stays registered).
	Interval time.Duration
}

// Contracts tries the migrations again until no contract step waits.
type Contracts struct {
	startstop.Base
	deps Deps
	cfg  Config
}

// New builds the component; Start starts trying.
func New(deps Deps, cfg Config) *Contracts {
	defaults.Set(&cfg.Interval, 15*time.Second)
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	return &Contracts{deps: deps, cfg: cfg}
}

// Start tries every Interval until a try applies every step, or Stop.
func (c *Contracts) Start(ctx context.Context) error {
	return c.Run(ctx, "contract migrations", c.run)
}

func (c *Contracts) run(ctx, _ context.Context) {
	timer := c.deps.Clock.NewTimer(c.cfg.Interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		err := c.deps.Migrate(ctx)
		switch {
		case err == nil:
			c.deps.Logger.Info("contract migrations applied: no older replica runs any more")
			return
		case ctx.Err() != nil:
			return
		case fault.Code(err) == fault.MigrateContractWaiting:
			c.deps.Logger.Info("contract migration still waiting; trying again", "code", fault.MigrateContractWaiting, "err", err, "in", c.cfg.Interval)
		default:
			c.deps.Logger.Warn("trying the contract migrations; trying again", "code", fault.Code(err), "err", err, "in", c.cfg.Interval)
		}
		timer.Reset(c.cfg.Interval)
	}
}
