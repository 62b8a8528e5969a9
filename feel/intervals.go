package feel

import "errors"

// The range functions of DMN 1.4 (10.3.4.8): before, after, meets, met by,
// overlaps, overlaps before, overlaps after, finishes, finished by,
// includes, during, starts, started by and coincides, over points and
// ranges as the specification's table defines them. An unbounded end is
// below or above every point.

// end is one end of a range, or a point (included, bounded).
type end struct {
	v    any
	inf  int // -1 below every point, +1 above, 0 bounded
	incl bool
}

// ival is a range or a point as a range of one point.
type ival struct {
	lo, hi end
	point  bool
}

func toIval(v any) (ival, error) {
	switch x := v.(type) {
	case nil:
		return ival{}, errors.New("a range function needs points or ranges, got null")
	case rangeVal:
		if x.op == "!=" {
			return ival{}, errors.New("(!= x) is not an interval")
		}
		lo := end{v: x.lo, incl: !x.openLo}
		if x.lo == nil {
			lo = end{inf: -1}
		}
		hi := end{v: x.hi, incl: !x.openHi}
		if x.hi == nil {
			hi = end{inf: 1}
		}
		return ival{lo: lo, hi: hi}, nil
	}
	p := end{v: v, incl: true}
	return ival{lo: p, hi: p, point: true}, nil
}

// cmpEnds orders two ends by their values, unbounded ones beyond all.
func cmpEnds(c *evalCtx, a, b end, fn string) (int, error) {
	if a.inf != 0 || b.inf != 0 {
		return a.inf - b.inf, nil // two unbounded ends of one side are equal
	}
	return compare(c, a.v, b.v, fn)
}

// intervalFn defines a range function by its rule over the two
// arguments' ends; lt, eq and gt compare two ends.
func intervalFn(name string, rule func(x, y ival, lt, eq, gt func(a, b end) bool) bool) {
	def(name, sig("range1", "range2"), func(c *evalCtx, a args) (any, error) {
		x, err := toIval(a.v[0])
		if err != nil {
			return nil, err
		}
		y, err := toIval(a.v[1])
		if err != nil {
			return nil, err
		}
		var failed error
		cmp := func(p, q end) int {
			r, err := cmpEnds(c, p, q, name)
			if err != nil && failed == nil {
				failed = err
			}
			return r
		}
		lt := func(p, q end) bool { return cmp(p, q) < 0 }
		eq := func(p, q end) bool { return cmp(p, q) == 0 }
		gt := func(p, q end) bool { return cmp(p, q) > 0 }
		r := rule(x, y, lt, eq, gt)
		if failed != nil {
			return nil, failed
		}
		return r, nil
	})
}

// before(x, y): x ends before y starts, or at it with one of the two ends
// excluded. A point is a range whose ends are both included.
func before(x, y ival, lt, eq, _ func(a, b end) bool) bool {
	return lt(x.hi, y.lo) || eq(x.hi, y.lo) && (!x.hi.incl || !y.lo.incl)
}

func overlapsBefore(x, y ival, lt, eq, gt func(a, b end) bool) bool {
	return (lt(x.lo, y.lo) || eq(x.lo, y.lo) && x.lo.incl && !y.lo.incl) &&
		(gt(x.hi, y.lo) || eq(x.hi, y.lo) && x.hi.incl && y.lo.incl) &&
		(lt(x.hi, y.hi) || eq(x.hi, y.hi) && (!x.hi.incl || y.hi.incl))
}

func finishes(x, y ival, lt, eq, gt func(a, b end) bool) bool {
	if x.point {
		return y.hi.incl && eq(y.hi, x.hi)
	}
	return x.hi.incl == y.hi.incl && eq(x.hi, y.hi) &&
		(gt(x.lo, y.lo) || eq(x.lo, y.lo) && (!x.lo.incl || y.lo.incl))
}

func includes(x, y ival, lt, eq, gt func(a, b end) bool) bool {
	if y.point {
		return lt(x.lo, y.lo) && gt(x.hi, y.lo) || eq(x.lo, y.lo) && x.lo.incl || eq(x.hi, y.lo) && x.hi.incl
	}
	return (lt(x.lo, y.lo) || eq(x.lo, y.lo) && (x.lo.incl || !y.lo.incl)) &&
		(gt(x.hi, y.hi) || eq(x.hi, y.hi) && (x.hi.incl || !y.hi.incl))
}

func starts(x, y ival, lt, eq, _ func(a, b end) bool) bool {
	if x.point {
		return y.lo.incl && eq(y.lo, x.lo)
	}
	return eq(x.lo, y.lo) && x.lo.incl == y.lo.incl &&
		(lt(x.hi, y.hi) || eq(x.hi, y.hi) && (!x.hi.incl || y.hi.incl))
}

type intervalRule = func(x, y ival, lt, eq, gt func(a, b end) bool) bool

// swapped is rule with its arguments the other way round (after is
// before swapped, during is includes swapped, ...).
func swapped(rule intervalRule) intervalRule {
	return func(x, y ival, lt, eq, gt func(a, b end) bool) bool { return rule(y, x, lt, eq, gt) }
}

func init() {
	intervalFn("before", before)
	intervalFn("after", swapped(before))
	intervalFn("meets", func(x, y ival, _, eq, _ func(a, b end) bool) bool {
		return !x.point && !y.point && x.hi.incl && y.lo.incl && eq(x.hi, y.lo)
	})
	intervalFn("met by", func(x, y ival, _, eq, _ func(a, b end) bool) bool {
		return !x.point && !y.point && y.hi.incl && x.lo.incl && eq(y.hi, x.lo)
	})
	intervalFn("overlaps", func(x, y ival, lt, eq, gt func(a, b end) bool) bool {
		return (gt(x.hi, y.lo) || eq(x.hi, y.lo) && x.hi.incl && y.lo.incl) &&
			(lt(x.lo, y.hi) || eq(x.lo, y.hi) && x.lo.incl && y.hi.incl)
	})
	intervalFn("overlaps before", overlapsBefore)
	intervalFn("overlaps after", swapped(overlapsBefore))
	intervalFn("finishes", finishes)
	intervalFn("finished by", swapped(finishes))
	intervalFn("includes", includes)
	intervalFn("during", swapped(includes))
	intervalFn("starts", starts)
	intervalFn("started by", swapped(starts))
	intervalFn("coincides", func(x, y ival, _, eq, _ func(a, b end) bool) bool {
		return x.point == y.point && eq(x.lo, y.lo) && x.lo.incl == y.lo.incl && eq(x.hi, y.hi) && x.hi.incl == y.hi.incl
	})
}
