// Package backoff is the one retry-delay rule of the worker: exponential,
// capped, jittered. Requeued relays and deferred timer fires both use it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay is the wait before attempt n (1 = the first retry): base doubled
// per attempt up to limit, with ±20% jitter so that work refused together
// does not return together.
func Delay(base, limit time.Duration, n int) time.Duration {
	d := min(base<<min(max(n-1, 0), 20), limit)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
