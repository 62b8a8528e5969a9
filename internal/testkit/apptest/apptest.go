// Package apptest builds a whole worker's configuration for a test's
// environment. It lives apart from testkit so that the store's, the claims'
// and the other components' tests link the store only, not the worker.
package apptest

import (
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
)

// Config points a worker at env's schema and broker names, migrating on
// start, with the API open on loopback (tests of the token set one), few
// lanes and short requeue backoffs.
func Config(env *testkit.Env) app.Config {
	c := env.Config
	return app.Config{
		Process: app.Process{ReplicaID: c.ReplicaID, HTTPAddr: "127.0.0.1:0", ShutdownTimeout: 10 * time.Second,
			Migrate: true, LogLevel: "info"},
		Database: app.Database{URL: c.DatabaseURL},
		Broker: app.Broker{URL: c.AMQPURL, RelayExchange: c.RelayExchange, RelayQueue: c.RelayQueue, RelayBindingKey: "#",
			DeadExchange: c.DeadExchange, DeadQueue: c.DeadQueue, OutboxExchange: c.OutboxExchange},
		Lanes:    app.Lanes{Count: 4, ClaimTimeout: 30 * time.Second, StepHistory: true},
		Consumer: app.Consumer{Prefetch: 64, RequeueBackoff: 20 * time.Millisecond, RequeueBackoffMax: 500 * time.Millisecond},
		API:      app.API{Addr: "127.0.0.1:0", Insecure: true},
		Gateway:  app.Gateway{Addr: "127.0.0.1:0"},
	}
}
