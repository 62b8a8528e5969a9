package feel

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
)

// uuid() is feel-scala's random UUID made deterministic: the engine must
// give the same result when it runs a step again, so the id is a name-based
// (version 5) UUID of the evaluation's seed, the expression and how many
// uuid() calls this evaluation made before. The caller makes the seed
// unique per step, element and token; the expression and the count tell
// call sites and repeated calls apart.

// uuidNamespace is the RFC 4122 name space of these ids: the version 5
// UUID of the URL https://github.com/sutra-run/worker/feel#uuid.
var uuidNamespace = [16]byte{32, 82, 107, 58, 11, 171, 93, 213, 181, 38, 158, 174, 17, 198, 57, 81}

var errNoSeed = errors.New("uuid() is not available here: its ids derive from where the engine evaluates the expression")

// idSource is what the uuid() calls of one evaluation share.
type idSource struct {
	seed string // Env.Seed
	key  string // Expr.key
	n    int    // calls so far
}

func defineUUID() {
	u := def("uuid", [][]string{{}}, func(c *evalCtx, _ args) (any, error) {
		if c.ids.seed == "" {
			return nil, errNoSeed
		}
		c.ids.n++
		return nameUUID(uuidNamespace, c.ids.seed+"\x00"+c.ids.key+"\x00"+strconv.Itoa(c.ids.n)), nil
	})
	u.seeded = true
}

// nameUUID returns the version 5 UUID of name in namespace ns (RFC 4122
// section 4.3), in its canonical text form.
func nameUUID(ns [16]byte, name string) string {
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte(name))
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x50 // version 5
	b[8] = b[8]&0x3f | 0x80 // variant RFC 4122
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}
