package store

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// Of several hosts the worker wants the one that takes writes, even when the
// URL does not say so; one host (tried with TLS, then without) is left as
// it is, and so is a URL that says what it wants.
func TestFollowPrimaryWantsTheHostThatTakesWritesOfSeveral(t *testing.T) {
	t.Parallel()
	for url, wantCheck := range map[string]bool{
		"postgres://u@h1:5432,h2:5432/sutra":                    true,
		"postgres://u@h1:5432,h1:5433/sutra?sslmode=disable":    true,
		"postgres://u@h1:5432/sutra":                            false,
		"postgres://u@h1:5432/sutra?sslmode=disable":            false,
		"postgres://u@h1,h2/sutra?target_session_attrs=primary": true,
	} {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		followPrimary(cfg)
		if got := cfg.ValidateConnect != nil; got != wantCheck {
			t.Errorf("%s: connections checked for writes = %v, want %v", url, got, wantCheck)
		}
		if cfg.OnPgError == nil {
			t.Errorf("%s: no handler closes a read-only connection", url)
		}
	}
}
