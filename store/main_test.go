package store_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open gives a test its own schema and a store on it, closed with the test.
func open(t testing.TB) (*testkit.Env, context.Context, *store.Store) {
	t.Helper()
	env := testkit.New(t)
	ctx := testkit.Ctx(t)
	st, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return env, ctx, st
}
