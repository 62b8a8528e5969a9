package app_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

// During a failover the server the worker reached may answer read-only
// (a demoted primary, a standby): /readyz says so, in those words. While
// ready, it says whether commits wait for a synchronous standby, and so
// does sutra_database_synchronous.
func TestReadyzSaysWhetherCommitsWaitForAStandbyAndWhenTheDatabaseIsReadOnly(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := testkit.Ctx(t)
	// A login of the test's own, so that making its sessions read-only
	// touches no other test.
	role := env.Schema + "_ro"
	if _, err := env.DB.Exec(ctx, "CREATE ROLE "+role+" LOGIN SUPERUSER"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = env.DB.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})
	pgURL, _ := url.Parse(env.Config.DatabaseURL)
	pg := testkit.NewProxy(t, pgURL.Host)
	pgURL.User = url.User(role)
	cfg := apptest.Config(env)
	cfg.Database.URL = pg.Through(t, pgURL.String())
	reg := prometheus.NewRegistry()
	listening := make(chan string, 1)
	w, err := app.Start(ctx, cfg, app.Options{Logger: testkit.Logger(t), Registry: reg, Listening: func(addr string) { listening <- addr }})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = w.Stop(sctx)
		}
	}
	t.Cleanup(stop)
	readyz := "http://" + <-listening + "/readyz"
	get := func() (int, string) {
		resp, err := http.Get(readyz)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	var body string
	testkit.Eventually(t, 30*time.Second, "ready, with the database's durability read", func() bool {
		var code int
		code, body = get()
		return code == http.StatusOK && strings.Contains(body, "database: commits do not wait for a standby (synchronous_standby_names is empty)")
	})
	if g := gauge(t, reg, "sutra_database_synchronous"); g != 0 {
		t.Errorf("sutra_database_synchronous = %v on a server without a standby, want 0", g)
	}
	if _, err := env.DB.Exec(ctx, "ALTER ROLE "+role+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	pg.Reset() // the worker's connections are dropped; its next ones are read-only
	testkit.Eventually(t, 30*time.Second, "not ready while the database is read-only", func() bool {
		var code int
		code, body = get()
		return code == http.StatusServiceUnavailable && body == "not ready: the database is read-only\n"
	})
	stop()
	// The role is dropped once its sessions have ended.
	if _, err := env.DB.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
		t.Fatal(err)
	}
}

// gauge is the value of the unlabelled gauge name in reg; the test fails
// when reg has none.
func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
