package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

func TestTheConnectionCheckRefusesAPoolTooLargeAndWarnsOfReplicasTimesPoolOverTheLimit(t *testing.T) {
	c := Config{Lanes: Lanes{Count: 10}}
	size := c.PoolSize()
	check := func(l store.ConnectionLimit) (string, error) {
		var out bytes.Buffer
		err := c.checkConnectionLimit(l, slog.New(slog.NewTextHandler(&out, nil)))
		return out.String(), err
	}
	if _, err := check(store.ConnectionLimit{Max: size + 2, Reserved: 3, Replicas: 1}); fault.Code(err) != fault.ConfigInvalid {
		t.Fatalf("a pool over max_connections less the reserved slots = %v, want %s", err, fault.ConfigInvalid)
	}
	logged, err := check(store.ConnectionLimit{Max: 3*size - 1 + 3, Reserved: 3, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := "3 replicas × "; !strings.Contains(logged, want) || !strings.Contains(logged, "level=WARN") {
		t.Fatalf("three replicas whose pools exceed the limit logged %q, want a warning saying %q", logged, want)
	}
	if logged, err := check(store.ConnectionLimit{Max: 3*size + 3, Reserved: 3, Replicas: 3}); err != nil || logged != "" {
		t.Fatalf("three replicas that fit: %v, logged %q", err, logged)
	}
}
