package app_test

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/app"
)

func TestRedactHidesThePasswordsOfABrokerListAndOfAMultiHostDatabaseURL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"amqp://sutra:s3cret@h1:5681/ha,amqp://sutra:s3cret@h2:5682/ha",
		"postgres://sutra:s3cret@h1:5432,h2:5432/sutra?target_session_attrs=read-write",
		"amqp://sutra:s3cret@h1:5681/ha",
	} {
		got := app.Redact(raw)
		if strings.Contains(got, "s3cret") || !strings.Contains(got, "sutra:xxxxx@h1") {
			t.Errorf("Redact(%q) = %q, want the password hidden and the rest kept", raw, got)
		}
	}
	cfg := app.Config{Broker: app.Broker{URL: "amqp://sutra:s3cret@h1:5681/ha,amqp://sutra:s3cret@h2:5682/other"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "SUTRA_AMQP_URL") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a list mixing virtual hosts: %v, want SUTRA_AMQP_URL named and no password", err)
	}
}
