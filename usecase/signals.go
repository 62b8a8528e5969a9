package usecase

import (
	"context"
	"strconv"

	"github.com/sutra-run/worker/api"
)

// BroadcastSignal broadcasts signal name with vars as POST /v1/signals
// does (store.RecordAndBroadcastSignal): every instance waiting for it
// when it is thrown is resumed under its own claim, and every process
// whose start event catches it starts once. It answers the broadcast's
// key, drawn from the key sequence, once every relay that carries it is
// durable; the instances step as replicas consume them. No name, or one no
// relay can carry, is api.Invalid.
func (u *UseCases) BroadcastSignal(ctx context.Context, name string, vars map[string]any) (int64, error) {
	if name == "" {
		return 0, api.Invalidf("signalName is required")
	}
	if err := api.CheckText("signalName", name); err != nil {
		return 0, err
	}
	key, err := u.deps.Store.NextKey(ctx)
	if err != nil {
		return 0, err
	}
	// The key, unique, is the broadcast's id: a relay redelivered after a
	// crash writes nothing twice.
	_, err = u.deps.Store.RecordAndBroadcastSignal(ctx, strconv.FormatInt(key, 10), name, vars)
	return key, err
}
