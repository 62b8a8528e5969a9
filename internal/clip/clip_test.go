package clip

import (
	"strings"
	"testing"
)

func TestStringKeepsShortTextAndCutsLongText(t *testing.T) {
	if got := String("paid"); got != "paid" {
		t.Errorf("short text changed: %q", got)
	}
	got := String(strings.Repeat("é", 1<<19)) // 1 MiB
	if len(got) > MaxBytes+32 || !strings.HasSuffix(got, "(1048576 bytes)") {
		t.Errorf("1 MiB cut to %d bytes: %.80q…", len(got), got)
	}
}
