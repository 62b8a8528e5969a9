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
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

// Whatever embeds the worker, an API listener with no token is refused
// unless it was asked for, before anything is opened.
func TestStartRefusesAnAPIListenerWithNoTokenUnlessInsecureIsSet(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	cfg := apptest.Config(env)
	cfg.API.Token, cfg.API.Insecure = "", false
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t)})
	if err == nil {
		_ = w.Stop(context.Background())
	}
	if fault.Code(err) != fault.ConfigInvalid || !strings.Contains(err.Error(), "SUTRA_API_TOKEN") || !strings.Contains(err.Error(), "SUTRA_API_INSECURE") {
		t.Errorf("start with no token: %v, want %s naming SUTRA_API_TOKEN and SUTRA_API_INSECURE", err, fault.ConfigInvalid)
	}
}

// Credentials that would open the admin API wider than asked are refused at
// start: a task worker's token as the admin token, or an admin API open to
// every caller beside a token.
func TestStartRefusesAnAdminTokenEqualToTheTaskTokenAndAnInsecureAdminBesideAToken(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	for _, tt := range []struct {
		name  string
		tweak func(*app.Config)
		names []string
	}{
		{"equal tokens", func(c *app.Config) { c.API.Token, c.AdminToken = "same", "same" }, []string{"SUTRA_ADMIN_TOKEN", "SUTRA_API_TOKEN"}},
		{"insecure beside the admin token", func(c *app.Config) { c.AdminToken, c.AdminInsecure = "adm", true },
			[]string{"SUTRA_ADMIN_INSECURE", "SUTRA_ADMIN_TOKEN"}},
		{"insecure beside the task token", func(c *app.Config) { c.API.Token, c.AdminInsecure = "tok", true },
			[]string{"SUTRA_ADMIN_INSECURE", "SUTRA_API_TOKEN"}},
	} {
		cfg := apptest.Config(env)
		tt.tweak(&cfg)
		w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t)})
		if err == nil {
			_ = w.Stop(context.Background())
		}
		if fault.Code(err) != fault.ConfigInvalid {
			t.Errorf("%s: %v, want %s", tt.name, err, fault.ConfigInvalid)
			continue
		}
		for _, name := range tt.names {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("%s: %v does not name %s", tt.name, err, name)
			}
		}
	}
}

// /readyz is answered to whoever reaches the metrics port: its reason is a
// few words, not the driver's error with addresses and server messages.
func TestReadyzGivesAShortReasonNotTheDatabasesError(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	pgURL, _ := url.Parse(env.Config.DatabaseURL)
	pg := testkit.NewProxy(t, pgURL.Host)
	cfg := apptest.Config(env)
	cfg.Database.URL = pg.Through(t, env.Config.DatabaseURL)
	listening := make(chan string, 1)
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: prometheus.NewRegistry(),
		Listening: func(addr string) { listening <- addr }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pg.Restore()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	readyz := "http://" + <-listening + "/readyz"
	waitReady(t, w)
	pg.Cut()
	var body string
	testkit.Eventually(t, 10*time.Second, "not ready once the database is cut", func() bool {
		resp, err := http.Get(readyz)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		body = string(raw)
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	if body != "not ready: the database is unreachable\n" {
		t.Errorf("/readyz said %q, want the short reason", body)
	}
}
