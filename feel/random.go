package feel

import (
	"crypto/sha256"
	encbinary "encoding/binary" // ast.go has a type named binary
	"errors"
	"strconv"
)

// random number() is feel-scala's number in [0, 1) made deterministic the
// way uuid() is: a step the engine runs again must compute the same value,
// so it is drawn from a hash of the evaluation's seed, the expression and
// how many seeded calls the evaluation made before. Spread evenly, it picks
// a branch or a test value as Camunda users write it; it is not for secrets.

var errNoRandomSeed = errors.New("random number() is not available here: its value derives from where the engine evaluates the expression")

func defineRandomNumber() {
	r := def("random number", [][]string{{}}, func(c *evalCtx, _ args) (any, error) {
		if c.ids.seed == "" {
			return nil, errNoRandomSeed
		}
		c.ids.n++
		h := sha256.Sum256([]byte("random number\x00" + c.ids.seed + "\x00" + c.ids.key + "\x00" + strconv.Itoa(c.ids.n)))
		// The top 53 bits make every float64 step of [0, 1) equally likely.
		return float64(encbinary.BigEndian.Uint64(h[:8])>>11) / (1 << 53), nil
	})
	r.seeded = true
}
