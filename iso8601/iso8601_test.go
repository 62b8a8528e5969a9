package iso8601

import (
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the DST cases need Europe/Berlin wherever the tests run

	"github.com/sutra-run/worker/fault"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in        string
		want      Duration
		canonical string
	}{
		{"P1Y2M3DT4H5M6S", Duration{Years: 1, Months: 2, Days: 3, Hours: 4, Minutes: 5, Seconds: 6}, "P1Y2M3DT4H5M6S"},
		{"PT15M", Duration{Minutes: 15}, "PT15M"},
		{"P1DT2H", Duration{Days: 1, Hours: 2}, "P1DT2H"},
		{"P2W", Duration{Weeks: 2}, "P2W"},
		{"P1Y2W", Duration{Years: 1, Weeks: 2}, "P1Y2W"},
		{"P1M", Duration{Months: 1}, "P1M"},
		{"PT1M", Duration{Minutes: 1}, "PT1M"},
		{"PT0.5S", Duration{Nanoseconds: 500_000_000}, "PT0.5S"},
		{"PT0,5S", Duration{Nanoseconds: 500_000_000}, "PT0.5S"},
		{"PT1.250S", Duration{Seconds: 1, Nanoseconds: 250_000_000}, "PT1.25S"},
		{"PT0.000000001S", Duration{Nanoseconds: 1}, "PT0.000000001S"},
		{"PT90S", Duration{Seconds: 90}, "PT90S"},
		{"PT36H", Duration{Hours: 36}, "PT36H"},
		{"P0D", Duration{}, "PT0S"},
		{"PT0S", Duration{}, "PT0S"},
		{"P007D", Duration{Days: 7}, "P7D"},
		{"P999999999Y", Duration{Years: 999_999_999}, "P999999999Y"},
		{"PT2562047H", Duration{Hours: 2_562_047}, "PT2562047H"},
		// Zeebe reads unit letters case-insensitively (only T must be upper case).
		{"PT30s", Duration{Seconds: 30}, "PT30S"},
		{"p1d", Duration{Days: 1}, "P1D"},
		{"p1dT2h30m", Duration{Days: 1, Hours: 2, Minutes: 30}, "P1DT2H30M"},
		{"P1y2m3w", Duration{Years: 1, Months: 2, Weeks: 3}, "P1Y2M3W"},
	}
	for _, tt := range tests {
		d, err := ParseDuration(tt.in)
		if err != nil {
			t.Errorf("ParseDuration(%q): %v", tt.in, err)
			continue
		}
		if d != tt.want {
			t.Errorf("ParseDuration(%q) = %+v, want %+v", tt.in, d, tt.want)
		}
		if got := d.String(); got != tt.canonical {
			t.Errorf("ParseDuration(%q).String() = %q, want %q", tt.in, got, tt.canonical)
		}
		if again, err := ParseDuration(d.String()); err != nil || again != d {
			t.Errorf("ParseDuration(%q) = %+v, %v; want %+v", d.String(), again, err, d)
		}
		if d.IsZero() != (tt.want == Duration{}) {
			t.Errorf("ParseDuration(%q).IsZero() = %v", tt.in, d.IsZero())
		}
	}
}

func TestParseDurationRefused(t *testing.T) {
	tests := []struct{ in, msg string }{
		{"", "empty"},
		{"P", "no components after P"},
		{"PT", "no components after T"},
		{"P1DT", "no components after T"},
		{"-P1D", "signed durations are not supported"},
		{"+P1D", "signed durations are not supported"},
		{"P-1D", `expected a number at "-1D"`},
		{"1D", "must start with P"},
		{"T1H", "must start with P"},
		{"p1dt2h", `expected a number at "t2h"`},
		{"Pt1H", `expected a number at "t1H"`},
		{"P1h", `unexpected "h"`},
		{"P1", "number 1 has no unit letter"},
		{"PD", `expected a number at "D"`},
		{"P1H", `unexpected "H"`},
		{"PT1D", `unexpected "D"`},
		{"P1S", `unexpected "S"`},
		{"P1D1Y", "Y is repeated or out of order"},
		{"P1D1D", "D is repeated or out of order"},
		{"PT1S1M", "M is repeated or out of order"},
		{"PT1HT1M", `expected a number at "T1M"`},
		{"P1.5D", "only seconds may have a fraction, not D"},
		{"PT1.5M", "only seconds may have a fraction, not M"},
		{"PT1.S", "expected digits after the decimal sign"},
		{"PT.5S", `expected a number at ".5S"`},
		{"PT0.1234567891S", "more than 9 fractional digits"},
		{"P1000000000Y", "1000000000Y is too large"},
		{"PT2562048H", "exceed 292 years"},
		{"PT999999999H", "exceed 292 years"},
		{" PT1M", "must start with P"},
		{"PT1M ", `expected a number at " "`},
		{"P1Y-2M", `expected a number at "-2M"`},
		{"P0001-02-03", `unexpected "-02-03"`},
		{"PT1H30", "number 30 has no unit letter"},
		{"PT15M\x00", `expected a number at "\x00"`},
	}
	for _, tt := range tests {
		d, err := ParseDuration(tt.in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v, want error %q", tt.in, d, tt.msg)
			continue
		}
		checkRefusal(t, err, "invalid ISO 8601 duration "+strconv.Quote(tt.in), tt.msg)
	}
}

func checkRefusal(t *testing.T, err error, prefix, msg string) {
	t.Helper()
	if !fault.HasCode(err, fault.BPMNInvalid) {
		t.Errorf("error %v has code %q, want %s", err, fault.Code(err), fault.BPMNInvalid)
	}
	if !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q, want it to contain %q and %q", err, prefix, msg)
	}
}

func mustDate(t *testing.T, s string) time.Time {
	t.Helper()
	d, err := ParseDateTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDurationAddTo(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(s string) time.Time { return mustDate(t, s) }
	tests := []struct {
		d        string
		from     time.Time
		want     time.Time
		describe string
	}{
		{"PT15M", utc("2026-01-01T10:00:00Z"), utc("2026-01-01T10:15:00Z"), "exact minutes"},
		{"PT0.5S", utc("2026-01-01T10:00:00Z"), utc("2026-01-01T10:00:00.5Z"), "fractional seconds"},
		{"P1D", utc("2026-01-01T10:00:00Z"), utc("2026-01-02T10:00:00Z"), "a day"},
		{"P2W", utc("2026-01-01T10:00:00Z"), utc("2026-01-15T10:00:00Z"), "weeks"},
		{"P1Y2M3DT4H5M6S", utc("2026-01-01T00:00:00Z"), utc("2027-03-04T04:05:06Z"), "everything"},
		{"P1M", utc("2026-01-31T10:00:00Z"), utc("2026-02-28T10:00:00Z"), "month end clamps"},
		{"P1M", utc("2024-01-31T10:00:00Z"), utc("2024-02-29T10:00:00Z"), "month end clamps in a leap year"},
		{"P1M1D", utc("2026-01-31T10:00:00Z"), utc("2026-03-01T10:00:00Z"), "months before days"},
		{"P13M", utc("2026-12-15T00:00:00Z"), utc("2028-01-15T00:00:00Z"), "months carry into years"},
		{"P1Y", utc("2024-02-29T00:00:00Z"), utc("2025-02-28T00:00:00Z"), "leap day clamps"},
		{"P1D", time.Date(2026, 3, 28, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 12, 0, 0, 0, berlin), "a calendar day keeps the wall clock across DST (23h)"},
		{"PT24H", time.Date(2026, 3, 28, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 13, 0, 0, 0, berlin), "24 hours are exact across DST"},
		{"P1M", time.Date(2026, 10, 1, 2, 30, 0, 0, berlin), time.Date(2026, 11, 1, 2, 30, 0, 0, berlin), "a month keeps the wall clock across DST"},
		{"PT0S", utc("2026-01-01T10:00:00Z"), utc("2026-01-01T10:00:00Z"), "zero"},
	}
	for _, tt := range tests {
		got := mustDuration(t, tt.d).AddTo(tt.from)
		if !got.Equal(tt.want) || got.Location() != tt.from.Location() {
			t.Errorf("%s: %s + %s = %v, want %v", tt.describe, tt.from, tt.d, got, tt.want)
		}
	}
}

func mustDuration(t *testing.T, s string) Duration {
	t.Helper()
	d, err := ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseDateTime(t *testing.T) {
	valid := map[string]time.Time{
		"2026-01-01T09:00:00Z":          time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC),
		"2026-01-01T10:00:00+01:00":     time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC),
		"2026-01-01T10:00:00.5+01:00":   time.Date(2026, 1, 1, 9, 0, 0, 500_000_000, time.UTC),
		"2026-06-30T23:59:59.123-07:30": time.Date(2026, 7, 1, 7, 29, 59, 123_000_000, time.UTC),
	}
	for in, want := range valid {
		got, err := ParseDateTime(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseDateTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	refused := []struct{ in, msg string }{
		{"2026-01-01T09:00:00", "no time zone"},
		{"2026-01-01T09:00:00.25", "no time zone"},
		{"2026-01-01", "not an RFC 3339 date-time"},
		{"2026-01-01 09:00:00Z", "not an RFC 3339 date-time"},
		{"2026-01-01T09:00:00Z[Europe/Berlin]", "not an RFC 3339 date-time"},
		{"2026-02-30T09:00:00Z", "not an RFC 3339 date-time"},
		{"2026-01-01T24:00:00Z", "not an RFC 3339 date-time"},
		{"2026-01-01T09:00:00+24:00", "zone offset out of range"},
		{"", "not an RFC 3339 date-time"},
		{"tomorrow", "not an RFC 3339 date-time"},
	}
	for _, tt := range refused {
		got, err := ParseDateTime(tt.in)
		if err == nil {
			t.Errorf("ParseDateTime(%q) = %v, want error", tt.in, got)
			continue
		}
		checkRefusal(t, err, "invalid date-time "+strconv.Quote(tt.in), tt.msg)
	}
}

// TestParseDateTimeIgnoresLocal pins the written offset: with a server
// zone that uses +01:00 in winter, a daily cycle must still fire at the
// same instant every day rather than follow that zone's DST change.
func TestParseDateTimeIgnoresLocal(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	saved := time.Local
	time.Local = berlin
	defer func() { time.Local = saved }()

	start := mustDate(t, "2026-03-28T09:00:00+01:00")
	if start.Location() == time.Local {
		t.Fatalf("ParseDateTime took the server's zone %s", start.Location())
	}
	next := Cycle{Repeat: -1, Start: &start, Interval: Duration{Days: 1}}.Next(start)
	if want := time.Date(2026, 3, 29, 8, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Fatalf("Next = %s, want %s", next, want)
	}
	if got := mustDate(t, "2026-01-01T00:00:00+00:00").Location(); got != time.UTC {
		t.Fatalf("+00:00 parsed into %s, want UTC", got)
	}
}

func TestParseCycle(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in, canonical string
		repeat        int
		start         *time.Time
		interval      Duration
	}{
		{"R3/PT10M", "R3/PT10M", 3, nil, Duration{Minutes: 10}},
		{"R/PT1H", "R/PT1H", -1, nil, Duration{Hours: 1}},
		{"R5/2026-01-01T00:00:00Z/P1D", "R5/2026-01-01T00:00:00Z/P1D", 5, &start, Duration{Days: 1}},
		{"R/2026-01-01T01:00:00+01:00/P1M", "R/2026-01-01T01:00:00+01:00/P1M", -1, &start, Duration{Months: 1}},
		{"R03/PT0,5S", "R3/PT0.5S", 3, nil, Duration{Nanoseconds: 500_000_000}},
		{"R2/2026-01-01T00:00:00Z/p1d", "R2/2026-01-01T00:00:00Z/P1D", 2, &start, Duration{Days: 1}},
		{"R/PT10m", "R/PT10M", -1, nil, Duration{Minutes: 10}},
	}
	for _, tt := range tests {
		c, err := ParseCycle(tt.in)
		if err != nil {
			t.Errorf("ParseCycle(%q): %v", tt.in, err)
			continue
		}
		if c.Repeat != tt.repeat || c.Interval != tt.interval || (c.Start == nil) != (tt.start == nil) ||
			c.Start != nil && !c.Start.Equal(*tt.start) {
			t.Errorf("ParseCycle(%q) = %+v", tt.in, c)
		}
		if got := c.String(); got != tt.canonical {
			t.Errorf("ParseCycle(%q).String() = %q, want %q", tt.in, got, tt.canonical)
		}
	}
	refused := []struct{ in, msg string }{
		{"", "must start with R"},
		{"PT10M", "must start with R"},
		{"0 0 9 * * MON-FRI", "cron expressions are not supported"},
		{"R", "expected R<n>/<duration>"},
		{"R3", "expected R<n>/<duration>"},
		{"R3/", `interval "": empty`},
		{"R3/PT10M/", "only the start/duration interval form is supported"},
		{"R0/PT10M", "R0 never fires"},
		{"R-1/PT10M", `repetitions "-1" are not a number`},
		{"Rx/PT10M", `repetitions "x" are not a number`},
		{"R1000000000/PT10M", "are not a number of at most 9 digits"},
		{"R3/PT0S", "the interval must not be zero"},
		{"R3/P", `interval "P": no components after P`},
		{"R/PT1H/2026-01-01T00:00:00Z", "only the start/duration interval form is supported"},
		{"R/2026-01-01T00:00:00Z/2026-02-01T00:00:00Z", "only the start/duration interval form is supported"},
		{"R/2026-01-01T00:00:00/P1D", `start "2026-01-01T00:00:00": no time zone`},
		{"R/x/P1D", `start "x": not an RFC 3339 date-time`},
		{"R/2026-01-01T00:00:00Z/P1D/P1D", "expected R<n>/<duration>"},
		{"r3/PT10M", "must start with R"},
	}
	for _, tt := range refused {
		c, err := ParseCycle(tt.in)
		if err == nil {
			t.Errorf("ParseCycle(%q) = %+v, want error %q", tt.in, c, tt.msg)
			continue
		}
		checkRefusal(t, err, "invalid ISO 8601 cycle "+strconv.Quote(tt.in), tt.msg)
	}
}

func mustCycle(t *testing.T, s string) Cycle {
	t.Helper()
	c, err := ParseCycle(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCycleNext(t *testing.T) {
	d := func(s string) time.Time { return mustDate(t, s) }
	tests := []struct {
		cycle string
		after time.Time
		want  time.Time
	}{
		{"R3/PT10M", d("2026-01-01T10:00:00Z"), d("2026-01-01T10:10:00Z")},
		{"R/P1M", d("2026-01-31T10:00:00Z"), d("2026-02-28T10:00:00Z")},
		// before the start: the start itself
		{"R5/2026-01-01T00:00:00Z/P1D", d("2025-12-31T00:00:00Z"), d("2026-01-01T00:00:00Z")},
		// strictly after: a fire time is not returned for itself
		{"R5/2026-01-01T00:00:00Z/P1D", d("2026-01-01T00:00:00Z"), d("2026-01-02T00:00:00Z")},
		{"R5/2026-01-01T00:00:00Z/P1D", d("2026-01-03T12:00:00Z"), d("2026-01-04T00:00:00Z")},
		{"R5/2026-01-01T00:00:00Z/P1D", d("2026-01-03T23:59:59.999999999Z"), d("2026-01-04T00:00:00Z")},
		{"R5/2026-01-01T00:00:00Z/P1D", d("2026-01-04T00:00:00Z"), d("2026-01-05T00:00:00Z")},
		// month ends: computed from the start, so no drift after February
		{"R/2026-01-31T10:00:00Z/P1M", d("2026-02-01T00:00:00Z"), d("2026-02-28T10:00:00Z")},
		{"R/2026-01-31T10:00:00Z/P1M", d("2026-02-28T10:00:00Z"), d("2026-03-31T10:00:00Z")},
		{"R/2026-01-31T10:00:00Z/P1M", d("2026-04-01T00:00:00Z"), d("2026-04-30T10:00:00Z")},
		{"R/2024-02-29T00:00:00Z/P1Y", d("2024-03-01T00:00:00Z"), d("2025-02-28T00:00:00Z")},
		{"R/2024-02-29T00:00:00Z/P1Y", d("2027-06-01T00:00:00Z"), d("2028-02-29T00:00:00Z")},
		// the start's offset is kept
		{"R/2026-01-01T09:00:00+01:00/P1D", d("2026-03-10T08:30:00Z"), d("2026-03-11T09:00:00+01:00")},
		// far from the start, and tiny intervals
		{"R/2026-01-01T00:00:00Z/PT1S", d("2126-01-01T00:00:00.5Z"), d("2126-01-01T00:00:01Z")},
		{"R/2026-01-01T00:00:00Z/PT0.000000001S", d("2126-01-01T00:00:00.000000005Z"), d("2126-01-01T00:00:00.000000006Z")},
		{"R/2026-01-01T00:00:00Z/PT0.000000007S", d("2026-01-01T00:00:01Z"), d("2026-01-01T00:00:01.000000001Z")},
		{"R/0001-01-01T00:00:00Z/P1DT0.5S", d("9999-12-31T00:00:00Z"), d("9999-12-31T03:13:38.5Z")},
		{"R/2026-01-01T00:00:00Z/P1Y2M3DT4H5M6.7S", d("2026-01-01T00:00:00Z"), d("2027-03-04T04:05:06.7Z")},
		// beyond what k (an int64) can count: no representable fire
		{"R/0001-01-01T00:00:00Z/PT0.000000001S", d("9999-01-01T00:00:00Z"), time.Time{}},
	}
	for _, tt := range tests {
		got := mustCycle(t, tt.cycle).Next(tt.after)
		if !got.Equal(tt.want) {
			t.Errorf("%s.Next(%s) = %s, want %s", tt.cycle, tt.after, got, tt.want)
		}
		if c := mustCycle(t, tt.cycle); c.Start != nil && !got.IsZero() {
			_, want := c.Start.Zone()
			if _, off := got.Zone(); off != want {
				t.Errorf("%s.Next(%s) = %s, not in the start's zone", tt.cycle, tt.after, got)
			}
		}
	}
}

// TestCycleNextMatchesScan checks the bracketing search against a plain scan
// over k for afters around many fire times.
func TestCycleNextMatchesScan(t *testing.T) {
	for _, s := range []string{
		"R/2026-01-31T10:00:00Z/P1M",
		"R/2024-02-29T23:59:59.999Z/P1Y",
		"R/2026-01-01T00:00:00+05:30/P1W2DT3H",
		"R/2026-01-01T00:00:00Z/PT7M13.5S",
		"R/2026-03-29T01:30:00+01:00/P1M1DT1S",
	} {
		c := mustCycle(t, s)
		var fires []time.Time
		for k := int64(0); k < 60; k++ {
			f, ok := c.fire(k)
			if !ok {
				t.Fatalf("%s: fire(%d) out of range", s, k)
			}
			if k > 0 && !f.After(fires[k-1]) {
				t.Fatalf("%s: fire(%d) = %s is not after fire(%d) = %s", s, k, f, k-1, fires[k-1])
			}
			fires = append(fires, f)
		}
		for k := 0; k < len(fires)-1; k++ {
			for _, after := range []time.Time{fires[k].Add(-time.Nanosecond), fires[k], fires[k].Add(time.Nanosecond), fires[k+1].Add(-time.Nanosecond)} {
				want := fires[k+1]
				if after.Before(fires[k]) {
					want = fires[k]
				}
				if got := c.Next(after); !got.Equal(want) {
					t.Fatalf("%s.Next(%s) = %s, want %s", s, after, got, want)
				}
			}
		}
	}
}

func TestCycleNextInvalidInterval(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start.Add(time.Hour)
	for _, c := range []Cycle{
		{Repeat: -1, Interval: Duration{}},
		{Repeat: -1, Start: &start, Interval: Duration{}},
		{Repeat: -1, Start: &start, Interval: Duration{Days: 1, Hours: -25}},
		{Repeat: -1, Interval: Duration{Nanoseconds: int(time.Second)}},
	} {
		if got := c.Next(now); !got.IsZero() {
			t.Errorf("%+v.Next = %s, want the zero Time", c, got)
		}
	}
}
