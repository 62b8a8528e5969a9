// Package defaults fills unset configuration fields, the one way every
// component's Config.setDefaults does it.
package defaults

import "cmp"

// Set sets *field to def when *field is zero or negative (an unset or
// nonsensical size, count or duration).
func Set[T cmp.Ordered](field *T, def T) {
	var zero T
	if *field <= zero {
		*field = def
	}
}
