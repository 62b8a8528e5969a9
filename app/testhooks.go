//go:build !sutratest

package app

import (
	"log/slog"

	"github.com/sutra-run/worker/lanes"
)

// testHooks is nil in the production build: the fault-injection hooks of
// testhooks_sutratest.go exist only in binaries built with -tags sutratest.
func testHooks(*slog.Logger) *lanes.Hooks { return nil }
