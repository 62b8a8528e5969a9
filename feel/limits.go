package feel

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Every evaluation is charged for its work and for what it allocates, as it
// goes, so that no input (a hostile variable, a constant that builds an
// exponential structure from shared parts) can make it run long or grow
// large: it fails with a *LimitError instead.
//
// Steps measure work: each node evaluated (literals and names aside), loop
// iteration, list item or context entry built or visited, regular
// expression match, and every 16 bytes of string read or built. Bytes
// measure memory: string bytes built, 16 per list item, 48 plus the key
// per context entry, and the size of the result (a value made of shared
// parts counts once per place it appears, as JSON will write it). Both are
// totals over the evaluation, never given back.

// Names of the limits, as the variables that set them in the worker.
const (
	LimitSteps    = "SUTRA_FEEL_MAX_STEPS"
	LimitBytes    = "SUTRA_FEEL_MAX_BYTES"
	LimitDeadline = "SUTRA_STEP_TIMEOUT"
)

// Default limits: far above what real expressions use (the examples and
// the test corpus stay under a thousand steps and a few kilobytes), far
// below what could hurt a worker.
const (
	DefaultMaxSteps = 1 << 20
	DefaultMaxBytes = 8 << 20
)

// Costs of one list item and one context entry (besides its key), in bytes:
// about what Go holds for them.
const (
	itemBytes  = 16
	entryBytes = 48
)

// checkEvery is how many steps pass between two looks at Env.Ctx.
const checkEvery = 1024

// Limits bound one evaluation. A field <= 0 takes its default.
type Limits struct {
	MaxSteps int
	MaxBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// LimitError is an evaluation cut off by one of its limits.
type LimitError struct {
	// Limit names the limit (LimitSteps, LimitBytes or LimitDeadline).
	Limit string
	// Max is its value (steps or bytes; 0 for the deadline).
	Max int
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case LimitSteps:
		return fmt.Sprintf("the evaluation exceeded its limit %s (%d steps): it iterates over too much data", e.Limit, e.Max)
	case LimitBytes:
		return fmt.Sprintf("the evaluation exceeded its limit %s (%d bytes built or produced)", e.Limit, e.Max)
	}
	return fmt.Sprintf("the evaluation was cut off at the step's deadline (%s)", e.Limit)
}

// IsLimit reports whether err is (or wraps) an evaluation cut off by a limit.
func IsLimit(err error) bool {
	var le *LimitError
	return errors.As(err, &le)
}

// spend charges n steps. Every charge fails once the total is over the
// limit, so an error a caller swallows (is defined) still stops the
// evaluation at its next charge. Every checkEvery steps it looks at the
// context: past its deadline the evaluation is cut off; cancelled, it stops.
func (c *evalCtx) spend(n int) error {
	if n < 0 || n > c.lim.MaxSteps {
		c.steps = c.lim.MaxSteps + 1
	} else {
		c.steps += n
	}
	if c.steps > c.lim.MaxSteps {
		return &LimitError{Limit: LimitSteps, Max: c.lim.MaxSteps}
	}
	if c.ctx != nil && c.steps >= c.check {
		c.check = c.steps + checkEvery
		if err := c.ctx.Err(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return &LimitError{Limit: LimitDeadline}
			}
			return fmt.Errorf("the evaluation was cancelled: %w", context.Cause(c.ctx))
		}
	}
	return nil
}

// alloc charges n bytes.
func (c *evalCtx) alloc(n int) error {
	if n < 0 || n > c.lim.MaxBytes {
		c.bytes = c.lim.MaxBytes + 1
	} else {
		c.bytes += n
	}
	if c.bytes > c.lim.MaxBytes {
		return &LimitError{Limit: LimitBytes, Max: c.lim.MaxBytes}
	}
	return nil
}

// scan charges for reading a string of n bytes.
func (c *evalCtx) scan(n int) error { return c.spend(1 + n/16) }

// spendString charges for building a string of n bytes.
func (c *evalCtx) spendString(n int) error {
	if err := c.scan(n); err != nil {
		return err
	}
	return c.alloc(n)
}

// items charges for building a list of n items.
func (c *evalCtx) items(n int) error {
	if err := c.spend(n); err != nil {
		return err
	}
	return c.alloc(n * itemBytes)
}

// entry charges for one context entry with key k.
func (c *evalCtx) entry(k string) error {
	if err := c.spend(1); err != nil {
		return err
	}
	return c.alloc(entryBytes + len(k))
}

// scanRegex charges for running re over n bytes: Go's regular expressions
// run in time proportional to the input times the size of the pattern.
func (c *evalCtx) scanRegex(re *regexp.Regexp, n int) error {
	per := 1 + len(re.String())/16
	if n/16 > c.lim.MaxSteps/per {
		return c.spend(-1) // more than the budget, however counted
	}
	return c.spend(1 + n/16*per)
}

// matches finds the matches of re in s (submatch indexes), charged one step
// and their indexes' bytes each; running re over s is charged by whoever
// read the arguments (regexArgs). It asks the regexp for no more matches
// than the budget left can pay for, so a pattern that matches everywhere
// (the empty one) never builds a list larger than the limits.
func (c *evalCtx) matches(re *regexp.Regexp, s string) ([][]int, error) {
	per := itemBytes + 16*(re.NumSubexp()+1)
	room := min(c.lim.MaxSteps-c.steps, (c.lim.MaxBytes-c.bytes)/per)
	found := re.FindAllStringSubmatchIndex(s, room+1)
	if err := c.spend(len(found)); err != nil {
		return nil, err
	}
	return found, c.alloc(len(found) * per)
}

// newEvalCtx is the state of one evaluation over vars in env.
func newEvalCtx(vars map[string]any, env Env) *evalCtx {
	return &evalCtx{vars: vars, now: env.Now, lim: env.Limits.withDefaults(), ctx: env.Ctx}
}

// evalCtx is the state of one evaluation.
type evalCtx struct {
	vars map[string]any
	now  time.Time // zero when the caller supplied no clock
	ids  *idSource // set when the expression calls uuid()
	lim  Limits
	ctx  context.Context // nil: no deadline
	// nulls is Options.Nulls: an operation failing on its operands' values
	// is null rather than an error.
	nulls bool
	calls int // Function calls under way, nested
	// steps and bytes are charged so far; check is the step count at which
	// ctx is looked at next.
	steps, bytes, check int
}

// orNull applies Options.Nulls to an operation's outcome: a failure on the
// values met becomes null. Work cut off by a limit or a cancelled context
// stays an error, so the budget still bounds every evaluation.
func (c *evalCtx) orNull(v any, err error) (any, error) {
	if err != nil && c.nulls && !c.fatal(err) {
		return nil, nil
	}
	return v, err
}

// fatal reports whether err ends the evaluation whatever the dialect: a
// limit was reached or the context is done.
func (c *evalCtx) fatal(err error) bool {
	return IsLimit(err) || c.ctx != nil && c.ctx.Err() != nil
}
