// Package iso8601 parses the ISO 8601 values BPMN timers carry: durations
// (timeDuration), RFC 3339 date-times (timeDate) and repeating intervals
// (timeCycle). Everything outside the accepted forms is refused with
// fault.BPMNInvalid, so that a timer that could fire at the wrong time
// fails the deploy instead.
package iso8601

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sutra-run/worker/fault"
)

// Duration is an ISO 8601 duration such as P1Y2M3DT4H5M6.5S. Years,
// months, weeks and days are calendar units (their length depends on the
// date they are added to); hours, minutes and seconds are exact.
type Duration struct {
	Years, Months, Weeks, Days, Hours, Minutes, Seconds int
	// Nanoseconds is the fractional part of Seconds, 0 to 999999999:
	// PT0.5S has Seconds 0 and Nanoseconds 500000000.
	Nanoseconds int
}

// maxDigits bounds every number so that no arithmetic on a parsed value
// can overflow: a nine-digit count of years or days is still a date Go's
// time package represents exactly.
const maxDigits = 9

// ParseDuration parses P[nY][nM][nW][nD][T[nH][nM][n[.f]S]], with at least
// one component and a fraction (. or ,) allowed on seconds only. P and the
// unit letters may be lowercase (PT30s, p1d) because Zeebe accepts them;
// the T separator may not, as in Zeebe. Signs, spaces and the alternative
// (PYYYY-MM-DD) format are refused.
func ParseDuration(s string) (Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return Duration{}, fault.New(fault.BPMNInvalid, "invalid ISO 8601 duration %q: %v", s, err)
	}
	return d, nil
}

func parseDuration(s string) (Duration, error) {
	var d Duration
	switch {
	case s == "":
		return d, errors.New("empty")
	case s[0] == '-' || s[0] == '+':
		return d, errors.New("signed durations are not supported")
	case s[0] != 'P' && s[0] != 'p':
		return d, errors.New("must start with P, as in PT15M")
	case len(s) == 1:
		return d, errors.New("no components after P")
	}
	date, clock, hasT := strings.Cut(s[1:], "T")
	if hasT && clock == "" {
		return d, errors.New("no components after T")
	}
	if err := components(date, "YMWD", []*int{&d.Years, &d.Months, &d.Weeks, &d.Days}, nil); err != nil {
		return d, err
	}
	if err := components(clock, "HMS", []*int{&d.Hours, &d.Minutes, &d.Seconds}, &d.Nanoseconds); err != nil {
		return d, err
	}
	// An exact part longer than time.Duration can hold (292 years) is
	// refused here so that AddTo can never overflow.
	if secs := int64(d.Hours)*3600 + int64(d.Minutes)*60 + int64(d.Seconds); secs > maxExactSeconds {
		return d, errors.New("hours, minutes and seconds together exceed 292 years")
	}
	return d, nil
}

const maxExactSeconds = (1<<63-1)/int64(time.Second) - 1

// components parses number-designator pairs in the order designators
// lists, each at most once, into fields. nanos receives a fraction on the
// last designator (seconds); nil means no fraction is allowed.
func components(s, designators string, fields []*int, nanos *int) error {
	next := 0
	for s != "" {
		i := digits(s)
		if i == 0 {
			return fmt.Errorf("expected a number at %q", s)
		}
		number := s[:i]
		fraction := ""
		if i < len(s) && (s[i] == '.' || s[i] == ',') {
			j := i + 1 + digits(s[i+1:])
			if j == i+1 {
				return fmt.Errorf("expected digits after the decimal sign in %q", s)
			}
			fraction, i = s[i+1:j], j
		}
		if i == len(s) {
			return fmt.Errorf("number %s has no unit letter", s)
		}
		unit := s[i]
		if unit >= 'a' && unit <= 'z' {
			unit -= 'a' - 'A'
		}
		k := strings.IndexByte(designators[next:], unit)
		if k < 0 {
			if strings.IndexByte(designators, unit) >= 0 {
				return fmt.Errorf("%c is repeated or out of order", unit)
			}
			return fmt.Errorf("unexpected %q", s[i:])
		}
		k += next
		if len(number) > maxDigits {
			return fmt.Errorf("%s%c is too large", number, unit)
		}
		*fields[k], _ = strconv.Atoi(number) // cannot fail: at most nine digits
		if fraction != "" {
			if nanos == nil || k != len(designators)-1 {
				return fmt.Errorf("only seconds may have a fraction, not %c", unit)
			}
			if len(fraction) > 9 {
				return errors.New("seconds have more than 9 fractional digits")
			}
			*nanos, _ = strconv.Atoi(fraction + strings.Repeat("0", 9-len(fraction))) // nine digits
		}
		next = k + 1
		s = s[i+1:]
	}
	return nil
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// String returns the canonical form: zero components omitted, a trailing-
// zero-free fraction on seconds, and PT0S for the zero duration.
func (d Duration) String() string {
	var b strings.Builder
	b.WriteByte('P')
	unit := func(v int, u byte) {
		if v != 0 {
			b.WriteString(strconv.Itoa(v))
			b.WriteByte(u)
		}
	}
	unit(d.Years, 'Y')
	unit(d.Months, 'M')
	unit(d.Weeks, 'W')
	unit(d.Days, 'D')
	if d.Hours != 0 || d.Minutes != 0 || d.Seconds != 0 || d.Nanoseconds != 0 {
		b.WriteByte('T')
		unit(d.Hours, 'H')
		unit(d.Minutes, 'M')
		if d.Seconds != 0 || d.Nanoseconds != 0 {
			b.WriteString(strconv.Itoa(d.Seconds))
			if d.Nanoseconds != 0 {
				b.WriteByte('.')
				b.WriteString(strings.TrimRight(fmt.Sprintf("%09d", d.Nanoseconds), "0"))
			}
			b.WriteByte('S')
		}
	}
	if b.Len() == 1 {
		return "PT0S"
	}
	return b.String()
}

// IsZero reports whether every component is zero.
func (d Duration) IsZero() bool { return d == Duration{} }

// exact is the hours-minutes-seconds part, which ParseDuration guarantees
// fits a time.Duration.
func (d Duration) exact() time.Duration {
	return time.Duration(d.Hours)*time.Hour + time.Duration(d.Minutes)*time.Minute +
		time.Duration(d.Seconds)*time.Second + time.Duration(d.Nanoseconds)
}

// AddTo returns t + d in t's location. Years and months move the calendar
// date and clamp the day to the target month (Jan 31 + P1M = Feb 28 or
// 29, like java.time and PostgreSQL, where Go's AddDate would roll over to
// March); weeks and days then move the date keeping the wall-clock time
// across DST changes; hours, minutes and seconds are exact elapsed time.
func (d Duration) AddTo(t time.Time) time.Time {
	t = addMonths(t, int64(d.Years)*12+int64(d.Months))
	if days := d.Weeks*7 + d.Days; days != 0 {
		t = t.AddDate(0, 0, days)
	}
	return t.Add(d.exact())
}

// addMonths moves t by months, clamping the day to the target month.
func addMonths(t time.Time, months int64) time.Time {
	if months == 0 {
		return t
	}
	y, m, day := t.Date()
	total := int64(y)*12 + int64(m-1) + months
	y, m = int(floorDiv(total, 12)), time.Month(total-floorDiv(total, 12)*12+1)
	if last := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day(); day > last {
		day = last
	}
	hh, mm, ss := t.Clock()
	return time.Date(y, m, day, hh, mm, ss, t.Nanosecond(), t.Location())
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
