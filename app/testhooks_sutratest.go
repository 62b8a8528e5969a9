//go:build sutratest

package app

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sutra-run/worker/lanes"
)

// testHooks lets process-level fault tests hold steps open in a worker built
// with -tags sutratest (never in the production build):
//
//	SUTRA_TEST_HOLD_STEP=<substring>  a step whose relay message id or instance
//	                                  id contains it logs "test hook: holding
//	                                  step" and waits before its commit, for
//	SUTRA_TEST_HOLD_FOR=<duration>    that long (default: until the worker's
//	                                  stop deadline cancels it), and with
//	SUTRA_TEST_HOLD_IGNORES_STOP=true even past that deadline (a step stuck
//	                                  where cancellation cannot reach it).
func testHooks(log *slog.Logger) *lanes.Hooks {
	match := os.Getenv("SUTRA_TEST_HOLD_STEP")
	if match == "" {
		return nil
	}
	hold, _ := time.ParseDuration(os.Getenv("SUTRA_TEST_HOLD_FOR"))
	stuck := os.Getenv("SUTRA_TEST_HOLD_IGNORES_STOP") == "true"
	return &lanes.Hooks{BeforeCommit: func(ctx context.Context, lane int, r *lanes.Resume) {
		if !strings.Contains(r.InboxID(), match) && !strings.Contains(r.InstanceID(), match) {
			return
		}
		log.Info("test hook: holding step", "instance_id", r.InstanceID(), "message_id", r.InboxID(), "lane", lane)
		switch {
		case stuck:
			time.Sleep(hold)
		case hold <= 0:
			<-ctx.Done()
		default:
			select {
			case <-ctx.Done():
			case <-time.After(hold):
			}
		}
	}}
}
