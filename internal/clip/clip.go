// Package clip cuts a caller's text to what a log line may quote, so that
// no caller (an API client, a relay's publisher) writes megabytes to the
// log through a field the worker logs.
package clip

import (
	"fmt"
	"strings"
)

// MaxBytes is the most of a caller's text a log line quotes.
const MaxBytes = 256

// String is v whole up to MaxBytes, else its start and its length.
func String(v string) string {
	if len(v) <= MaxBytes {
		return v
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(v[:MaxBytes], ""), len(v))
}
