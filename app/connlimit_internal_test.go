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

// The listeners' connection caps, the pool and the reserve must fit the
// descriptor limit: a full gateway must leave /readyz, /metrics and the
// pool their descriptors.
func TestTheDescriptorCheckRefusesCapsThatLeaveTheOtherListenersNoRoom(t *testing.T) {
	c := Config{Lanes: Lanes{Count: 10}, API: API{Addr: ":8080", MaxConns: 1024}, Gateway: Gateway{Addr: ":26500", MaxConnections: 1024}}
	need := uint64(2048 + c.PoolSize() + descriptorReserve)
	if err := c.fitsDescriptors(need); err != nil {
		t.Errorf("caps that fit refused: %v", err)
	}
	err := c.fitsDescriptors(need - 1)
	if fault.Code(err) != fault.ConfigInvalid || !strings.Contains(err.Error(), "SUTRA_GATEWAY_MAX_CONNECTIONS (1024)") {
		t.Errorf("caps over the limit: %v", err)
	}
	c.Gateway.Addr = "" // no gateway: its cap takes nothing
	if err := c.fitsDescriptors(need - 1); err != nil {
		t.Errorf("without a gateway: %v", err)
	}
}
