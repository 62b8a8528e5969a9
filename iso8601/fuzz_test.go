package iso8601

import (
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// FuzzParseDuration checks that parsing never panics, refuses only with
// fault.BPMNInvalid, and that String is canonical: it parses back to the
// same Duration and prints the same again.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"P1Y2M3DT4H5M6S", "PT15M", "P1DT2H", "P2W", "PT0.5S", "PT0,000000001S", "P0D", "PT0S",
		"P999999999Y", "PT2562047H", "", "P", "PT", "-P1D", "P1.5D", "PT1S1M", "P1000000000Y", "PT30s", "p1dT2h", "p1dt2h",
	} {
		f.Add(s)
	}
	at := time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !fault.HasCode(err, fault.BPMNInvalid) {
				t.Fatalf("ParseDuration(%q): error %v has code %q", s, err, fault.Code(err))
			}
			return
		}
		canon := d.String()
		again, err := ParseDuration(canon)
		if err != nil || again != d || again.String() != canon {
			t.Fatalf("ParseDuration(%q) = %+v printed %q, which parses to %+v, %v", s, d, canon, again, err)
		}
		if got := d.AddTo(at); got.Before(at) || got.Equal(at) != d.IsZero() {
			t.Fatalf("%s.AddTo(%s) = %s", canon, at, got)
		}
	})
}

// FuzzParseCycle checks that parsing never panics, refuses only with
// fault.BPMNInvalid, that String is canonical, and that Next returns a fire
// time strictly after its argument (or the zero Time when none is
// representable) which is itself a fire time.
func FuzzParseCycle(f *testing.F) {
	for _, s := range []string{
		"R3/PT10M", "R/PT1H", "R5/2026-01-01T00:00:00Z/P1D", "R/2026-01-31T10:00:00+01:00/P1M",
		"R/2024-02-29T00:00:00.5Z/P1Y", "R/0001-01-01T00:00:00Z/PT0.000000001S", "R0/PT1M", "R/PT0S",
		"0 0 9 * * MON-FRI", "R/PT1H/2026-01-01T00:00:00Z",
	} {
		f.Add(s, int64(1767225600), int64(0))
	}
	f.Fuzz(func(t *testing.T, s string, sec, nsec int64) {
		c, err := ParseCycle(s)
		if err != nil {
			if !fault.HasCode(err, fault.BPMNInvalid) {
				t.Fatalf("ParseCycle(%q): error %v has code %q", s, err, fault.Code(err))
			}
			return
		}
		canon := c.String()
		again, err := ParseCycle(canon)
		if err != nil || again.String() != canon || again.Repeat != c.Repeat || again.Interval != c.Interval ||
			(again.Start == nil) != (c.Start == nil) || c.Start != nil && !again.Start.Equal(*c.Start) {
			t.Fatalf("ParseCycle(%q) = %+v printed %q, which parses to %+v, %v", s, c, canon, again, err)
		}
		// Keep after within years 0000 to 9999, the range a start can have.
		const year0, year10000 = -62167219200, 253402300800
		after := time.Unix(int64(uint64(sec)%(year10000-year0))+year0, int64(uint64(nsec)%uint64(time.Second))).UTC()
		next := c.Next(after)
		if next.IsZero() {
			return
		}
		if !next.After(after) {
			t.Fatalf("%s.Next(%s) = %s, not after it", canon, after, next)
		}
		if c.Start != nil {
			if again := c.Next(next.Add(-time.Nanosecond)); !again.Equal(next) {
				t.Fatalf("%s.Next(%s) = %s, but Next just before it is %s", canon, after, next, again)
			}
		}
	})
}
