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
		DatabaseURL: c.DatabaseURL, AMQPURL: c.AMQPURL, ReplicaID: c.ReplicaID,
		Lanes: 4, Prefetch: 64, HTTPAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", GatewayAddr: "127.0.0.1:0", APIInsecure: true,
		ClaimTimeout: 30 * time.Second, ShutdownTimeout: 10 * time.Second,
		RelayExchange: c.RelayExchange, RelayQueue: c.RelayQueue, RelayBindingKey: "#",
		DeadExchange: c.DeadExchange, DeadQueue: c.DeadQueue, OutboxExchange: c.OutboxExchange,
		RequeueBackoff: 20 * time.Millisecond, RequeueBackoffMax: 500 * time.Millisecond,
		Migrate: true, LogLevel: "info", StepHistory: true,
	}
}
