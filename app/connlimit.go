package app

import (
	"fmt"
	"log/slog"
	"syscall"

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

// descriptorReserve is what the process keeps beside the listeners'
// connections and the pool: the listeners themselves, the metrics
// listener's connections (/readyz, /metrics), the broker connections, log
// files and what the runtime opens.
const descriptorReserve = 128

// checkDescriptorLimit refuses caps of connections that could together
// take every file descriptor the process may open (RLIMIT_NOFILE, which Go
// raises to its hard limit at start): the API listener's
// (SUTRA_API_MAX_CONNS), the Zeebe gateway's (SUTRA_GATEWAY_MAX_CONNECTIONS),
// the database pool and descriptorReserve. Within it, a full gateway or API
// listener leaves /readyz and /metrics answering and the pool connecting.
func (c Config) checkDescriptorLimit() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil // not knowable here: nothing to check against
	}
	return c.fitsDescriptors(lim.Cur)
}

func (c Config) fitsDescriptors(limit uint64) error {
	var conns int
	if c.API.Addr != "" {
		conns += c.API.MaxConns
	}
	if c.Gateway.Addr != "" {
		conns += c.Gateway.MaxConnections
	}
	need := uint64(conns + c.PoolSize() + descriptorReserve)
	if need > limit {
		return fault.New(fault.ConfigInvalid, "SUTRA_API_MAX_CONNS (%d) and SUTRA_GATEWAY_MAX_CONNECTIONS (%d) with the pool (%d) and %d descriptors kept for the other listeners need %d file descriptors, over this process's limit %d: lower them or raise the limit (ulimit -n)",
			c.API.MaxConns, c.Gateway.MaxConnections, c.PoolSize(), descriptorReserve, need, limit)
	}
	return nil
}
