package feel

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"
	// Named time zones come from the zone database Go embeds, so a worker
	// needs none installed.
	_ "time/tzdata"
)

// Temporal values exist only inside an evaluation. A result leaves the
// package as its ISO 8601 string (see jsonShape), because instance variables
// are JSON; a date in a variable is therefore a string, and date(x) turns it
// back into a date.
type (
	// date is a calendar date, held as midnight UTC.
	date struct{ t time.Time }
	// timeOfDay is a local time, or with zoned a time at a UTC offset or,
	// with zone, in a named time zone (whose offset a time alone cannot
	// tell, so it is kept 0).
	timeOfDay struct {
		ns    int64 // nanoseconds since midnight
		off   int32 // seconds east of UTC, when zoned
		zoned bool
		zone  string // an IANA zone name, when zoned by name
	}
	// dateTime is a local date and time (the wall clock, held in UTC), or
	// with zoned an instant at a UTC offset or in a named zone (t's
	// location: see zoneName).
	dateTime struct {
		t     time.Time
		zoned bool
	}
	// ymDuration is a years and months duration, in months.
	ymDuration int64
	// dtDuration is a days and time duration, in nanoseconds (about ±292
	// years); a day is always 24 hours.
	dtDuration int64
)

const day = int64(24 * time.Hour)

// The years of XML Schema's dates (which DMN's are), written with more
// than four digits or a minus sign outside 1..9999.
const minYear, maxYear = -999_999_999, 999_999_999

// zones caches the named zones loaded, at most one per IANA name.
var zones sync.Map // string -> *time.Location

// loadZone returns the named IANA time zone. UTC is a name too
// ("@Etc/UTC", "@UTC"), kept as written.
func loadZone(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	// LoadLocation also takes "" and "Local", which name no zone.
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	if l == time.UTC {
		// The UTC location has no name of its own to write back.
		l = time.FixedZone(name, 0)
	}
	cached, _ := zones.LoadOrStore(name, l)
	return cached.(*time.Location), nil
}

// zoneName is the IANA name of t's zone, "" for a UTC offset. Offsets are
// held as time.UTC or as unnamed fixed zones; every other location is one
// loadZone returned.
func zoneName(t time.Time) string {
	if l := t.Location(); l != time.UTC {
		return l.String()
	}
	return ""
}

func checkDate(t time.Time) (time.Time, error) {
	if t.Year() < minYear || t.Year() > maxYear {
		return time.Time{}, fmt.Errorf("date is outside the years %d to %d", minYear, maxYear)
	}
	return t, nil
}

// twoDigits reads the two decimal digits at s[i:i+2].
func twoDigits(s string, i int) (int, bool) {
	if i+2 > len(s) || !isDigit(s[i]) || !isDigit(s[i+1]) {
		return 0, false
	}
	return int(s[i]-'0')*10 + int(s[i+1]-'0'), true
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// dateLen is the length of the date at the start of s (-?YYYY-MM-DD, the
// year of four digits or more), 0 when s does not start with one.
func dateLen(s string) int {
	i := 0
	if strings.HasPrefix(s, "-") {
		i = 1
	}
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j-i < 4 || j+6 > len(s) || s[j] != '-' || s[j+3] != '-' {
		return 0
	}
	return j + 6
}

// parseDate reads YYYY-MM-DD, the year as XML Schema writes it: four
// digits, or more without a leading zero, optionally negative.
func parseDate(s string) (date, error) {
	bad := fmt.Errorf("invalid date %q (want YYYY-MM-DD)", s)
	n := dateLen(s)
	if n == 0 || n != len(s) {
		return date{}, bad
	}
	ys := strings.TrimPrefix(s[:n-6], "-")
	if len(ys) > 9 || len(ys) > 4 && ys[0] == '0' {
		return date{}, bad
	}
	y, _ := strconv.Atoi(ys)
	if s[0] == '-' {
		y = -y
	}
	m, ok1 := twoDigits(s, n-5)
	d, ok2 := twoDigits(s, n-2)
	if !ok1 || !ok2 || m < 1 || m > 12 || d < 1 || d > daysIn(y, time.Month(m)) {
		return date{}, bad
	}
	return date{time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)}, nil
}

// parseClock reads HH:MM[:SS[.fffffffff]] at the start of s and returns the
// nanoseconds since midnight and the rest of s.
func parseClock(s string) (int64, string, bool) {
	h, ok1 := twoDigits(s, 0)
	m, ok2 := twoDigits(s, 3)
	if !ok1 || !ok2 || s[2] != ':' || h > 24 || m > 59 {
		return 0, "", false
	}
	if h == 24 {
		// XML Schema's 24:00:00 is the end of the day: the midnight after.
		rest := s[5:]
		if r, ok := strings.CutPrefix(rest, ":00"); ok {
			rest = r
			if r, ok := strings.CutPrefix(rest, "."); ok {
				rest = strings.TrimLeft(r, "0")
				if len(rest) == len(r) {
					return 0, "", false
				}
			}
		}
		if m != 0 || rest != "" && isDigit(rest[0]) {
			return 0, "", false
		}
		return int64(day), rest, true
	}
	ns := int64(h)*int64(time.Hour) + int64(m)*int64(time.Minute)
	s = s[5:]
	if len(s) == 0 || s[0] != ':' {
		return ns, s, true
	}
	sec, ok := twoDigits(s, 1)
	if !ok || sec > 59 {
		return 0, "", false
	}
	ns += int64(sec) * int64(time.Second)
	s = s[3:]
	if len(s) > 0 && s[0] == '.' {
		j := 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == 1 || j > 10 {
			return 0, "", false
		}
		frac, _ := strconv.ParseInt((s[1:j] + "000000000")[:9], 10, 64)
		ns += frac
		s = s[j:]
	}
	return ns, s, true
}

// parseZone reads what follows a time: nothing (local), Z, ±HH:MM, or
// @ and an IANA zone name (@Europe/Paris), into t's zone fields.
func parseZone(s string, t *timeOfDay) error {
	switch {
	case s == "":
		return nil
	case s == "Z":
		t.zoned = true
		return nil
	case s[0] == '@':
		if _, err := loadZone(s[1:]); err != nil {
			return err
		}
		t.zoned, t.zone = true, s[1:]
		return nil
	case len(s) == 6 && (s[0] == '+' || s[0] == '-') && s[3] == ':':
		h, ok1 := twoDigits(s, 1)
		m, ok2 := twoDigits(s, 4)
		if ok1 && ok2 && m < 60 && h*60+m <= 18*60 {
			t.off = int32(h*3600 + m*60)
			if s[0] == '-' {
				t.off = -t.off
			}
			t.zoned = true
			return nil
		}
	}
	return fmt.Errorf("invalid UTC offset %q (want Z, ±HH:MM or @ and a zone name)", s)
}

// parseTime reads [T]HH:MM[:SS[.f]] with an optional offset or zone.
func parseTime(s string) (timeOfDay, error) {
	ns, rest, ok := parseClock(strings.TrimPrefix(s, "T"))
	if !ok {
		return timeOfDay{}, fmt.Errorf("invalid time %q (want HH:MM:SS, optionally with Z or an offset)", s)
	}
	t := timeOfDay{ns: ns % day} // 24:00:00 is 00:00:00
	if err := parseZone(rest, &t); err != nil {
		return timeOfDay{}, fmt.Errorf("invalid time %q: %w", s, err)
	}
	return t, nil
}

// parseDateTime reads YYYY-MM-DDTHH:MM[:SS[.f]] with an optional offset; a
// date alone is its midnight (as in feel-scala).
func parseDateTime(s string) (dateTime, error) {
	n := dateLen(s)
	if n == len(s) {
		d, err := parseDate(s)
		return dateTime{t: d.t}, err
	}
	bad := fmt.Errorf("invalid date and time %q (want YYYY-MM-DDTHH:MM:SS, optionally with Z or an offset)", s)
	if n == 0 || s[n] != 'T' {
		return dateTime{}, bad
	}
	d, err := parseDate(s[:n])
	if err != nil {
		return dateTime{}, bad
	}
	ns, rest, ok := parseClock(s[n+1:])
	if !ok {
		return dateTime{}, bad
	}
	t := timeOfDay{ns: ns}
	if err := parseZone(rest, &t); err != nil {
		return dateTime{}, fmt.Errorf("invalid date and time %q: %w", s, err)
	}
	return atTime(d, t)
}

// atTime combines a date and a time of day; the result is zoned when the
// time is. The instant may fall outside the year range.
func atTime(d date, t timeOfDay) (dateTime, error) {
	loc := time.UTC
	switch {
	case t.zone != "":
		var err error
		if loc, err = loadZone(t.zone); err != nil {
			return dateTime{}, err
		}
	case t.zoned && t.off != 0:
		loc = time.FixedZone("", int(t.off))
	}
	y, m, dd := d.t.Date()
	// The wall clock in the zone: a time skipped by a change of offset
	// moves forward, as in java.time.
	r := time.Date(y, m, dd, int(t.ns/int64(time.Hour)), int(t.ns/int64(time.Minute)%60), int(t.ns/int64(time.Second)%60), int(t.ns%int64(time.Second)), loc)
	if _, err := checkDate(r.UTC()); err != nil {
		return dateTime{}, err
	}
	return dateTime{t: r, zoned: t.zoned}, nil
}

// maxDurationText bounds the text of a duration.
const maxDurationText = 100

// parseDuration reads a FEEL duration: -?PnYnM (years and months) or
// -?PnDTnHnMn.nS (days and time). Weeks and mixtures of the two kinds are
// not FEEL durations.
func parseDuration(s string) (any, error) {
	// Every duration that fits (about 292 years of nanoseconds, or months
	// in an int64) is written in far fewer characters. A longer one is
	// refused before its digits are read: big.Int reads n digits in time
	// quadratic in n, which no step counts.
	if len(s) > maxDurationText {
		return nil, fmt.Errorf("duration of %d characters is too large", len(s))
	}
	bad := fmt.Errorf("invalid duration %q (want PnYnM or PnDTnHnMnS)", s)
	body, neg := strings.CutPrefix(s, "-")
	body, ok := strings.CutPrefix(body, "P")
	if !ok || body == "" {
		return nil, bad
	}
	if !strings.ContainsAny(body, "DTHS") {
		var months big.Int
		for _, unit := range []struct {
			c byte
			n int64
		}{{'Y', 12}, {'M', 1}} {
			n, rest, found, ok := component(body, unit.c)
			if !ok {
				return nil, bad
			}
			if found {
				months.Add(&months, new(big.Int).Mul(n, big.NewInt(unit.n)))
			}
			body = rest
		}
		if body != "" {
			return nil, bad
		}
		if neg {
			months.Neg(&months)
		}
		if !months.IsInt64() || months.Int64() == math.MinInt64 {
			return nil, fmt.Errorf("duration %q is too large", s)
		}
		return ymDuration(months.Int64()), nil
	}
	var ns big.Int
	days, clock, hasT := strings.Cut(body, "T")
	if hasT && clock == "" {
		return nil, bad
	}
	n, rest, found, ok := component(days, 'D')
	if !ok || rest != "" {
		return nil, bad
	}
	if found {
		ns.Mul(n, big.NewInt(day))
	}
	for _, unit := range []struct {
		c byte
		n int64
	}{{'H', int64(time.Hour)}, {'M', int64(time.Minute)}} {
		n, rest, found, ok := component(clock, unit.c)
		if !ok {
			return nil, bad
		}
		if found {
			ns.Add(&ns, new(big.Int).Mul(n, big.NewInt(unit.n)))
		}
		clock = rest
	}
	if clock != "" {
		sec, ok := seconds(clock)
		if !ok {
			return nil, bad
		}
		ns.Add(&ns, sec)
	}
	if neg {
		ns.Neg(&ns)
	}
	if !ns.IsInt64() || ns.Int64() == math.MinInt64 {
		return nil, fmt.Errorf("duration %q is too large (days and time durations are limited to about 292 years)", s)
	}
	return dtDuration(ns.Int64()), nil
}

// component reads "<digits><unit>" at the start of s, if s starts that way.
func component(s string, unit byte) (n *big.Int, rest string, found, ok bool) {
	j := 0
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j == 0 || j == len(s) || s[j] != unit {
		// Not this component; the digits (if any) belong to a later one.
		return nil, s, false, true
	}
	n, _ = new(big.Int).SetString(s[:j], 10)
	return n, s[j+1:], true, true
}

// seconds reads "<digits>[.<1-9 digits>]S" as nanoseconds; ISO 8601 (and
// Java) also allow a decimal comma.
func seconds(s string) (*big.Int, bool) {
	num, ok := strings.CutSuffix(s, "S")
	if !ok {
		return nil, false
	}
	whole, frac, hasFrac := strings.Cut(strings.Replace(num, ",", ".", 1), ".")
	if whole == "" || strings.Trim(whole, "0123456789") != "" || hasFrac && (frac == "" || len(frac) > 9 || strings.Trim(frac, "0123456789") != "") {
		return nil, false
	}
	n, _ := new(big.Int).SetString(whole+(frac + "000000000")[:9], 10)
	return n, true
}

// parseTemporal reads the string of an @"..." literal, trying the forms in
// feel-scala's order.
func parseTemporal(s string) (any, error) {
	switch {
	case strings.HasPrefix(s, "P") || strings.HasPrefix(s, "-P"):
		return parseDuration(s)
	case dateLen(s) == len(s):
		return parseDate(s)
	case dateLen(s) > 0:
		return parseDateTime(s)
	}
	return parseTime(s)
}

func (d date) String() string {
	var b strings.Builder
	writeDate(&b, d.t)
	return b.String()
}

// writeDate writes t's date as XML Schema does: the year in four digits or
// more, negative before year 0001.
func writeDate(b *strings.Builder, t time.Time) {
	y, m, d := t.Date()
	if y < 0 {
		b.WriteByte('-')
		y = -y
	}
	fmt.Fprintf(b, "%04d-%02d-%02d", y, m, d)
}

func (t timeOfDay) String() string {
	var b strings.Builder
	writeClock(&b, t.ns)
	switch {
	case t.zone != "":
		b.WriteString("@" + t.zone)
	case t.zoned:
		writeOffset(&b, int(t.off))
	}
	return b.String()
}

func (dt dateTime) String() string {
	var b strings.Builder
	writeDate(&b, dt.t)
	b.WriteByte('T')
	h, m, s := dt.t.Clock()
	writeClock(&b, int64(h)*int64(time.Hour)+int64(m)*int64(time.Minute)+int64(s)*int64(time.Second)+int64(dt.t.Nanosecond()))
	if name := zoneName(dt.t); name != "" {
		b.WriteString("@" + name)
	} else if dt.zoned {
		_, off := dt.t.Zone()
		writeOffset(&b, off)
	}
	return b.String()
}

// writeClock writes HH:MM:SS and a fraction without trailing zeros.
func writeClock(b *strings.Builder, ns int64) {
	fmt.Fprintf(b, "%02d:%02d:%02d", ns/int64(time.Hour), ns/int64(time.Minute)%60, ns/int64(time.Second)%60)
	writeFraction(b, ns%int64(time.Second))
}

func writeFraction(b *strings.Builder, ns int64) {
	if ns != 0 {
		b.WriteString(strings.TrimRight(fmt.Sprintf(".%09d", ns), "0"))
	}
}

func writeOffset(b *strings.Builder, off int) {
	if off == 0 {
		b.WriteString("Z")
		return
	}
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b.WriteByte(sign)
	fmt.Fprintf(b, "%02d:%02d", off/3600, off/60%60)
	if off%60 != 0 {
		fmt.Fprintf(b, ":%02d", off%60) // as java.time writes it
	}
}

// String is feel-scala's form: P1Y2M, -P3M, P0Y.
func (d ymDuration) String() string {
	if d == 0 {
		return "P0Y"
	}
	var b strings.Builder
	m := int64(d)
	if m < 0 {
		b.WriteByte('-')
		m = -m
	}
	b.WriteByte('P')
	if m/12 != 0 {
		b.WriteString(strconv.FormatInt(m/12, 10) + "Y")
	}
	if m%12 != 0 {
		b.WriteString(strconv.FormatInt(m%12, 10) + "M")
	}
	return b.String()
}

// String is feel-scala's form (P1DT2H, -PT30M, P0D), with a fraction of a
// second when there is one.
func (d dtDuration) String() string {
	if d == 0 {
		return "P0D"
	}
	var b strings.Builder
	n := int64(d)
	if n < 0 {
		b.WriteByte('-')
		n = -n
	}
	b.WriteByte('P')
	if n/day != 0 {
		b.WriteString(strconv.FormatInt(n/day, 10) + "D")
	}
	h, m, s, frac := n/int64(time.Hour)%24, n/int64(time.Minute)%60, n/int64(time.Second)%60, n%int64(time.Second)
	if h != 0 || m != 0 || s != 0 || frac != 0 {
		b.WriteByte('T')
		if h != 0 {
			b.WriteString(strconv.FormatInt(h, 10) + "H")
		}
		if m != 0 {
			b.WriteString(strconv.FormatInt(m, 10) + "M")
		}
		if s != 0 || frac != 0 {
			b.WriteString(strconv.FormatInt(s, 10))
			writeFraction(&b, frac)
			b.WriteByte('S')
		}
	}
	return b.String()
}

// isTemporal reports whether v is one of the temporal types.
func isTemporal(v any) bool {
	switch v.(type) {
	case date, timeOfDay, dateTime, ymDuration, dtDuration:
		return true
	}
	return false
}

// property reads d.year, t.hour, dur.days and the like (feel-scala's
// properties). ok is false when v has no such property.
func property(v any, name string) (any, bool) {
	switch x := v.(type) {
	case rangeVal:
		return rangeProperty(x, name)
	case date:
		return dateProperty(x.t, name)
	case timeOfDay:
		if x.zone != "" {
			// A time alone has no offset in a named zone.
			return clockProperty(x.ns, 0, false, x.zone, name)
		}
		return clockProperty(x.ns, x.off, x.zoned, "", name)
	case dateTime:
		if r, ok := dateProperty(x.t, name); ok {
			return r, true
		}
		h, m, s := x.t.Clock()
		_, off := x.t.Zone()
		return clockProperty(int64(h)*int64(time.Hour)+int64(m)*int64(time.Minute)+int64(s)*int64(time.Second), int32(off), x.zoned, zoneName(x.t), name)
	case ymDuration:
		switch name {
		case "years":
			return float64(x / 12), true
		case "months":
			return float64(x % 12), true
		}
	case dtDuration:
		n := int64(x)
		switch name {
		case "days":
			return float64(n / day), true
		case "hours":
			return float64(n / int64(time.Hour) % 24), true
		case "minutes":
			return float64(n / int64(time.Minute) % 60), true
		case "seconds":
			return float64(n / int64(time.Second) % 60), true
		}
	}
	return nil, false
}

func dateProperty(t time.Time, name string) (any, bool) {
	switch name {
	case "year":
		return float64(t.Year()), true
	case "month":
		return float64(t.Month()), true
	case "day":
		return float64(t.Day()), true
	case "weekday":
		return float64((int(t.Weekday())+6)%7 + 1), true // Monday is 1, Sunday 7
	}
	return nil, false
}

func clockProperty(ns int64, off int32, zoned bool, zone, name string) (any, bool) {
	switch name {
	case "hour":
		return float64(ns / int64(time.Hour)), true
	case "minute":
		return float64(ns / int64(time.Minute) % 60), true
	case "second":
		return float64(ns / int64(time.Second) % 60), true
	case "time offset":
		if !zoned {
			return nil, true
		}
		return dtDuration(int64(off) * int64(time.Second)), true
	case "timezone":
		if zone == "" {
			return nil, true // an offset is not a zone
		}
		return zone, true
	}
	return nil, false
}

// instantOfDay orders zoned times: the time of day in UTC, not wrapped.
func (t timeOfDay) instantOfDay() int64 { return t.ns - int64(t.off)*int64(time.Second) }

// compareTemporal orders two temporal values of the same kind; ok is false
// when they cannot be ordered (different kinds, or local against zoned).
func compareTemporal(a, b any) (c int, ok bool) {
	switch x := a.(type) {
	case date:
		if y, ok := b.(date); ok {
			return x.t.Compare(y.t), true
		}
	case timeOfDay:
		if y, ok := b.(timeOfDay); ok && x.zoned == y.zoned && x.zone == y.zone {
			if x.zoned {
				return cmp.Compare(x.instantOfDay(), y.instantOfDay()), true
			}
			return cmp.Compare(x.ns, y.ns), true
		}
	case dateTime:
		if y, ok := b.(dateTime); ok && x.zoned == y.zoned {
			return x.t.Compare(y.t), true
		}
	case ymDuration:
		if y, ok := b.(ymDuration); ok {
			return cmp.Compare(int64(x), int64(y)), true
		}
	case dtDuration:
		if y, ok := b.(dtDuration); ok {
			return cmp.Compare(int64(x), int64(y)), true
		}
	}
	return 0, false
}

// addMonths moves t by whole months, keeping the time of day; a day that the
// target month lacks becomes its last day (Jan 31 + 1 month = Feb 28/29).
func addMonths(t time.Time, months int64) (time.Time, error) {
	y, m, d := t.Date()
	// Bounding months first keeps total from overflowing.
	const span = 12 * (maxYear - minYear + 1)
	total := int64(y)*12 + int64(m-1) + max(min(months, span), -span)
	if total < 12*minYear || total > 12*maxYear+11 {
		return time.Time{}, fmt.Errorf("date is outside the years %d to %d", minYear, maxYear)
	}
	ny, nm := int(floorDiv(total, 12)), time.Month(total-12*floorDiv(total, 12)+1)
	h, mi, s := t.Clock()
	r := time.Date(ny, nm, min(d, daysIn(ny, nm)), h, mi, s, t.Nanosecond(), t.Location())
	return checkDate(r)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// addNanos adds an exact duration to t, refusing results outside the year
// range (time.Time.Add itself never fails).
func addNanos(t time.Time, d dtDuration) (time.Time, error) {
	// Far beyond any representable date: refuse before Add could wrap.
	const span = int64(maxYear+1) * 366 * 86400
	if s := int64(d) / int64(time.Second); s > span || s < -span {
		return time.Time{}, fmt.Errorf("date is outside the years %d to %d", minYear, maxYear)
	}
	return checkDate(t.Add(time.Duration(d)))
}

// between is a - b as an exact duration; time.Time.Sub saturates instead.
func between(a, b time.Time) (dtDuration, error) {
	secs := a.Unix() - b.Unix()
	if secs > math.MaxInt64/int64(time.Second)-1 || secs < -(math.MaxInt64/int64(time.Second)-1) {
		return 0, errors.New("the difference is too large for a days and time duration (about 292 years)")
	}
	return dtDuration(secs*int64(time.Second) + int64(a.Nanosecond()-b.Nanosecond())), nil
}

func midnight(t time.Time) date {
	y, m, d := t.Date()
	return date{time.Date(y, m, d, 0, 0, 0, 0, time.UTC)}
}

// temporalArithmetic applies + or - when either operand is temporal (the
// combinations feel-scala defines); ok is false when neither is.
func temporalArithmetic(a, b any, op string) (r any, ok bool, err error) {
	if !isTemporal(a) && !isTemporal(b) {
		return nil, false, nil
	}
	if op == "-" {
		r, err = subTemporal(a, b)
	} else {
		r, err = addTemporal(a, b)
		if r == nil && err == nil {
			r, err = addTemporal(b, a) // addition commutes
		}
	}
	if r == nil && err == nil {
		err = fmt.Errorf("cannot apply %s to %s and %s", op, describe(a), describe(b))
	}
	return r, true, err
}

// addTemporal is x + y for a temporal x; nil, nil when undefined.
func addTemporal(x, y any) (any, error) {
	switch a := x.(type) {
	case date:
		switch d := y.(type) {
		case ymDuration:
			t, err := addMonths(a.t, int64(d))
			return date{t}, err
		case dtDuration:
			t, err := addNanos(a.t, d)
			return midnight(t), err
		}
	case dateTime:
		switch d := y.(type) {
		case ymDuration:
			t, err := addMonths(a.t, int64(d))
			return dateTime{t, a.zoned}, err
		case dtDuration:
			t, err := addNanos(a.t, d)
			return dateTime{t, a.zoned}, err
		}
	case timeOfDay:
		if d, ok := y.(dtDuration); ok {
			a.ns = ((a.ns+int64(d)%day)%day + day) % day
			return a, nil
		}
	case ymDuration:
		if d, ok := y.(ymDuration); ok {
			s := int64(a) + int64(d)
			if (s > int64(a)) != (d > 0) || s == math.MinInt64 {
				return nil, errors.New("result of + overflows")
			}
			return ymDuration(s), nil
		}
	case dtDuration:
		if d, ok := y.(dtDuration); ok {
			s := int64(a) + int64(d)
			if (s > int64(a)) != (d > 0) || s == math.MinInt64 {
				return nil, errors.New("result of + overflows")
			}
			return dtDuration(s), nil
		}
	}
	return nil, nil
}

// subTemporal is x - y; nil, nil when undefined.
func subTemporal(x, y any) (any, error) {
	// Durations never hold MinInt64, so they can be negated.
	switch d := y.(type) {
	case ymDuration:
		if _, ok := x.(timeOfDay); !ok {
			return addTemporal(x, -d)
		}
	case dtDuration:
		return addTemporal(x, -d)
	}
	// A date against a zoned date and time is its midnight UTC, as DMN
	// has it; against a local one it has no answer.
	if a, ok := x.(date); ok {
		if b, ok := y.(dateTime); ok && b.zoned {
			x = dateTime{t: a.t, zoned: true}
		}
	}
	if b, ok := y.(date); ok {
		if a, ok := x.(dateTime); ok && a.zoned {
			y = dateTime{t: b.t, zoned: true}
		}
	}
	switch a := x.(type) {
	case date:
		if b, ok := y.(date); ok {
			return between(a.t, b.t)
		}
	case dateTime:
		// Local wall clocks are held in UTC, so this is also their local
		// difference.
		if b, ok := y.(dateTime); ok && a.zoned == b.zoned {
			return between(a.t, b.t)
		}
	case timeOfDay:
		if b, ok := y.(timeOfDay); ok && a.zoned == b.zoned && a.zone == b.zone {
			if a.zoned {
				return dtDuration(a.instantOfDay() - b.instantOfDay()), nil
			}
			return dtDuration(a.ns - b.ns), nil
		}
	}
	return nil, nil
}

// scaleDuration multiplies or divides a duration by a number. The result
// must be a whole number of months or nanoseconds: feel-scala truncates,
// which would silently lose part of the duration.
func scaleDuration(d any, n float64, divide bool) (any, error) {
	var units int64
	switch x := d.(type) {
	case ymDuration:
		units = int64(x)
	case dtDuration:
		units = int64(x)
	}
	if divide && n == 0 {
		return nil, errors.New("division by zero")
	}
	r := new(big.Rat).SetInt64(units)
	f := new(big.Rat).SetFloat64(n)
	if divide {
		r.Quo(r, f)
	} else {
		r.Mul(r, f)
	}
	if !r.IsInt() || !r.Num().IsInt64() || r.Num().Int64() == math.MinInt64 {
		unit := "nanoseconds"
		if _, ok := d.(ymDuration); ok {
			unit = "months"
		}
		return nil, fmt.Errorf("the result is not a whole number of %s that fits a duration", unit)
	}
	if _, ok := d.(ymDuration); ok {
		return ymDuration(r.Num().Int64()), nil
	}
	return dtDuration(r.Num().Int64()), nil
}
