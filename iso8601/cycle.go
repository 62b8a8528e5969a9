package iso8601

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/sutra-run/worker/fault"
)

// ParseDateTime parses an RFC 3339 date-time such as 2026-01-01T09:00:00Z
// or 2026-01-01T10:00:00.5+01:00. The zone is required: a zone-less time
// would fire at an hour that depends on the worker's configuration. The
// result is in UTC for Z and +00:00, otherwise in a fixed zone with the
// written offset.
func ParseDateTime(s string) (time.Time, error) {
	t, err := parseDateTime(s)
	if err != nil {
		return time.Time{}, fault.New(fault.BPMNInvalid, "invalid date-time %q: %v", s, err)
	}
	return t, nil
}

func parseDateTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if _, local := time.Parse("2006-01-02T15:04:05.999999999", s); local == nil {
			return time.Time{}, errors.New("no time zone; add Z or an offset such as +01:00")
		}
		return time.Time{}, errors.New("not an RFC 3339 date-time such as 2026-01-01T09:00:00Z")
	}
	// Go accepts offsets up to +99:59; RFC 3339 allows hours 00 to 23.
	_, offset := t.Zone()
	if offset <= -24*3600 || offset >= 24*3600 {
		return time.Time{}, errors.New("zone offset out of range")
	}
	// time.Parse gives the server's Local zone to an offset Local uses,
	// and calendar steps from it would then follow that zone's DST rules:
	// the same BPMN would fire at different instants on differently
	// configured servers. The written offset is all the text says.
	if offset == 0 {
		return t.UTC(), nil
	}
	return t.In(time.FixedZone("", offset)), nil
}

// Cycle is an ISO 8601 repeating interval: R3/PT10M, R/PT1H or
// R5/2026-01-01T00:00:00Z/P1D.
type Cycle struct {
	// Repeat is the number of fires, or -1 for unbounded ("R/").
	Repeat int
	// Start, if set, is the first fire; later fires are Start + k*Interval.
	// Without it, fires are Interval apart from when the timer is armed.
	Start *time.Time
	// Interval is never zero in a parsed Cycle.
	Interval Duration
}

// ParseCycle parses R[n]/[start/]duration. The other ISO 8601 interval
// forms (start/end, duration/end) and cron expressions are refused.
func ParseCycle(s string) (Cycle, error) {
	c, err := parseCycle(s)
	if err != nil {
		return Cycle{}, fault.New(fault.BPMNInvalid, "invalid ISO 8601 cycle %q: %v", s, err)
	}
	return c, nil
}

func parseCycle(s string) (Cycle, error) {
	c := Cycle{Repeat: -1}
	parts := strings.Split(s, "/")
	if !strings.HasPrefix(s, "R") {
		if strings.Contains(s, " ") {
			return c, errors.New("cron expressions are not supported; use R<n>/<duration>")
		}
		return c, errors.New("must start with R, as in R3/PT10M or R/PT1H")
	}
	if len(parts) < 2 || len(parts) > 3 {
		return c, errors.New("expected R<n>/<duration> or R<n>/<start>/<duration>")
	}
	if n := parts[0][1:]; n != "" {
		if len(n) > maxDigits || digits(n) != len(n) {
			return c, fmt.Errorf("repetitions %q are not a number of at most %d digits", n, maxDigits)
		}
		c.Repeat, _ = strconv.Atoi(n) // cannot fail: at most nine digits
		if c.Repeat == 0 {
			return c, errors.New("R0 never fires")
		}
	}
	if len(parts) == 3 {
		if isDuration(parts[1]) || !isDuration(parts[2]) {
			return c, errors.New("only the start/duration interval form is supported, not start/end or duration/end")
		}
		start, err := parseDateTime(parts[1])
		if err != nil {
			return c, fmt.Errorf("start %q: %v", parts[1], err)
		}
		c.Start = &start
	}
	interval, err := parseDuration(parts[len(parts)-1])
	if err != nil {
		return c, fmt.Errorf("interval %q: %v", parts[len(parts)-1], err)
	}
	if interval.IsZero() {
		return c, errors.New("the interval must not be zero")
	}
	c.Interval = interval
	return c, nil
}

// isDuration reports whether an interval part is a duration rather than a
// date-time.
func isDuration(s string) bool { return strings.HasPrefix(s, "P") || strings.HasPrefix(s, "p") }

// String returns the canonical form, which ParseCycle reads back as c.
func (c Cycle) String() string {
	var b strings.Builder
	b.WriteByte('R')
	if c.Repeat >= 0 {
		b.WriteString(strconv.Itoa(c.Repeat))
	}
	b.WriteByte('/')
	if c.Start != nil {
		b.WriteString(c.Start.Format(time.RFC3339Nano))
		b.WriteByte('/')
	}
	b.WriteString(c.Interval.String())
	return b.String()
}

// Next returns the first fire time strictly after after: Start if after is
// before it, otherwise Start + k*Interval for the least such k (computed
// from Start, so month-end clamping never drifts: Jan 31, Feb 28, Mar 31),
// or after + Interval when there is no Start. Next does not count fires:
// the caller tracks Repeat. It returns the zero Time when the interval is
// not positive (never the case for a parsed Cycle) or the next fire is
// more than ten million years away.
func (c Cycle) Next(after time.Time) time.Time {
	if !c.Interval.positive() {
		return time.Time{}
	}
	if c.Start == nil {
		return c.Interval.AddTo(after)
	}
	start := *c.Start
	if start.After(after) {
		return start
	}
	// Invariant: fire(lo) <= after < fire(hi). Start from an estimate of k,
	// widen exponentially until it brackets the answer, then bisect: a few
	// steps normally, about 2*63 at worst, whatever the distance.
	lo, hi := int64(0), int64(0)
	guess := c.Interval.estimate(start, after)
	if t, ok := c.fire(guess); ok && !t.After(after) {
		lo = guess
		for step := int64(1); ; step *= 2 {
			if step > math.MaxInt64-lo {
				return time.Time{}
			}
			hi = lo + step
			if t, ok := c.fire(hi); !ok || t.After(after) {
				break
			}
			lo = hi
		}
	} else {
		hi = guess
		for step := int64(1); ; step *= 2 {
			if step >= hi {
				lo = 0
				break
			}
			if t, ok := c.fire(hi - step); ok && !t.After(after) {
				lo = hi - step
				break
			}
			hi -= step
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if t, ok := c.fire(mid); ok && !t.After(after) {
			lo = mid
		} else {
			hi = mid
		}
	}
	t, ok := c.fire(hi)
	if !ok {
		return time.Time{}
	}
	return t
}

// Bounds of fire: ten million years of months, days or seconds keeps every
// result well inside what time.Time computes exactly.
const (
	maxMonths  = 12 * 10_000_000
	maxDays    = 366 * 10_000_000
	maxSeconds = 366 * 86400 * 10_000_000
)

// fire returns Start + k*Interval; ok is false beyond the bounds.
func (c Cycle) fire(k int64) (time.Time, bool) {
	d := c.Interval
	months, ok1 := mulBounded(k, int64(d.Years)*12+int64(d.Months), maxMonths)
	days, ok2 := mulBounded(k, int64(d.Weeks)*7+int64(d.Days), maxDays)
	// k * exact nanoseconds needs 128 bits before it is split into
	// seconds and nanoseconds.
	hiNs, loNs := bits.Mul64(uint64(k), uint64(d.exact()))
	if !ok1 || !ok2 || hiNs >= uint64(time.Second) {
		return time.Time{}, false
	}
	secs, nanos := bits.Div64(hiNs, loNs, uint64(time.Second))
	if secs > maxSeconds {
		return time.Time{}, false
	}
	t := addMonths(*c.Start, months)
	if days != 0 {
		t = t.AddDate(0, 0, int(days))
	}
	return time.Unix(t.Unix()+int64(secs), int64(t.Nanosecond())+int64(nanos)).In(t.Location()), true
}

// mulBounded returns a*b for a >= 0 and b >= 0 if it is at most limit.
func mulBounded(a, b, limit int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > limit/b {
		return 0, false
	}
	return a * b, true
}

// positive reports whether d is a valid, non-zero interval: Next relies on
// fire times strictly increasing with k.
func (d Duration) positive() bool {
	for _, v := range []int{d.Years, d.Months, d.Weeks, d.Days, d.Hours, d.Minutes, d.Seconds, d.Nanoseconds} {
		if v < 0 {
			return false
		}
	}
	return !d.IsZero() && d.Nanoseconds < int(time.Second) &&
		int64(d.Hours)*3600+int64(d.Minutes)*60+int64(d.Seconds) <= maxExactSeconds
}

// estimate guesses how many intervals fit between start and after, using
// average calendar lengths; Next corrects it exactly. At least 1.
func (d Duration) estimate(start, after time.Time) int64 {
	const day = 86400.0
	approx := float64(d.Years)*365.2425*day + float64(d.Months)*30.436875*day +
		float64(d.Weeks*7+d.Days)*day + d.exact().Seconds()
	elapsed := float64(after.Unix()) - float64(start.Unix()) + float64(after.Nanosecond()-start.Nanosecond())/1e9
	k := elapsed / approx
	switch {
	case !(k >= 1):
		return 1
	case k >= 1<<62:
		return 1 << 62
	}
	return int64(k)
}
