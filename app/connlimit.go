package app

import (
	"fmt"
	"log/slog"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// checkConnectionLimit refuses a pool that the server could never grant
// (max_connections less its reserved slots): such a worker would stall on
// connections instead of failing. It warns when the replicas registered,
// each with a pool this size, could together take more than that: they
// would then wait on one another for connections.
func (c Config) checkConnectionLimit(l store.ConnectionLimit, log *slog.Logger) error {
	size, free := c.PoolSize(), l.Max-l.Reserved
	if size > free {
		return fault.New(fault.ConfigInvalid, "a pool of %d connections (SUTRA_LANES plus the other components' share) exceeds the server's max_connections %d (less %d reserved): lower SUTRA_LANES or raise max_connections",
			size, l.Max, l.Reserved)
	}
	if total := l.Replicas * size; total > free {
		log.Warn("the replicas' pools together exceed the server's connection limit: lower SUTRA_LANES or raise max_connections",
			"code", fault.ConfigInvalid, "replicas", l.Replicas, "pool", size, "connections", total,
			"max_connections", l.Max, "reserved", l.Reserved,
			"detail", fmt.Sprintf("%d replicas × %d = %d connections > max_connections %d (less %d reserved)", l.Replicas, size, total, l.Max, l.Reserved))
	}
	return nil
}
