package app_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"

	"github.com/sutra-run/worker/app"
)

// The variables the worker read when its configuration was one flat struct
// (issue 42): nesting it by component must rename none of them.
var flatVariables = []string{
	"SUTRA_DATABASE_URL", "SUTRA_AMQP_URL", "SUTRA_REPLICA_ID", "SUTRA_LANES", "SUTRA_PREFETCH",
	"SUTRA_BATCH_MAX", "SUTRA_BATCH_WAIT", "SUTRA_HTTP_ADDR", "SUTRA_API_ADDR", "SUTRA_API_TOKEN",
	"SUTRA_API_INSECURE", "SUTRA_ADMIN_TOKEN", "SUTRA_ADMIN_INSECURE", "SUTRA_UI",
	"SUTRA_API_TLS_CERT", "SUTRA_API_TLS_KEY", "SUTRA_OAUTH_TOKEN_TTL", "SUTRA_API_MAX_TASKS",
	"SUTRA_API_MAX_LOCK_DURATION", "SUTRA_TASK_POLL_INTERVAL", "SUTRA_TASK_FAST_PATH",
	"SUTRA_API_MAX_TOPICS", "SUTRA_API_MAX_LONG_POLLS", "SUTRA_API_MAX_CONNS", "SUTRA_API_MAX_BODY",
	"SUTRA_API_MAX_DEPLOY_BODY", "SUTRA_API_MAX_BYTES_IN_FLIGHT", "SUTRA_API_MAX_DB_CONNS",
	"SUTRA_API_MAX_SCAN", "SUTRA_API_MAX_RETRY_TIMEOUT", "SUTRA_GATEWAY_ADDR",
	"SUTRA_GATEWAY_TLS_CERT", "SUTRA_GATEWAY_TLS_KEY", "SUTRA_GATEWAY_MAX_STREAMS",
	"SUTRA_GATEWAY_MAX_JOBS", "SUTRA_GATEWAY_MAX_MESSAGE_SIZE", "SUTRA_MAX_VARIABLES_BYTES",
	"SUTRA_SIGNAL_BROADCAST_PAGE", "SUTRA_MAX_COMMIT_BYTES", "SUTRA_CLAIM_TIMEOUT",
	"SUTRA_SHUTDOWN_TIMEOUT", "SUTRA_STEP_TIMEOUT", "SUTRA_FEEL_MAX_STEPS", "SUTRA_FEEL_MAX_BYTES",
	"SUTRA_RELAY_EXCHANGE", "SUTRA_RELAY_QUEUE", "SUTRA_RELAY_BINDING_KEY", "SUTRA_DEAD_EXCHANGE",
	"SUTRA_DEAD_QUEUE", "SUTRA_QUEUE_TYPE", "SUTRA_AMQP_WRITE_TIMEOUT", "SUTRA_AMQP_CHANNEL_TIMEOUT",
	"SUTRA_REQUEUE_BACKOFF", "SUTRA_REQUEUE_BACKOFF_MAX", "SUTRA_RELAY_MAX_RETRIES",
	"SUTRA_TIMER_POLL_INTERVAL", "SUTRA_TIMER_BATCH", "SUTRA_TIMER_MAX_IN_FLIGHT", "SUTRA_TIMER_LEASE",
	"SUTRA_TIMER_BACKOFF", "SUTRA_TIMER_BACKOFF_MAX", "SUTRA_TIMER_MAX_ATTEMPTS",
	"SUTRA_SWEEP_INTERVAL", "SUTRA_LEASE_TTL", "SUTRA_INBOX_RETENTION", "SUTRA_STEP_HISTORY",
	"SUTRA_STEP_HISTORY_RETENTION", "SUTRA_OUTBOX_EXCHANGE", "SUTRA_OUTBOX_POLL_INTERVAL",
	"SUTRA_OUTBOX_LEASE", "SUTRA_OUTBOX_BATCH", "SUTRA_OUTBOX_RETENTION", "SUTRA_OUTBOX_MAX_ATTEMPTS",
	"SUTRA_MIGRATE", "SUTRA_LOG_FORMAT", "SUTRA_LOG_LEVEL",
}

// TestNoVariableIsRenamed asks envconfig itself which keys it reads from
// Config, so that a group that gained a prefix (a named field instead of an
// embedded one) is caught, and checks that app.Variables lists the same.
func TestNoVariableIsRenamed(t *testing.T) {
	var out bytes.Buffer
	if err := envconfig.Usagef("sutra", &app.Config{}, &out, "{{range .}}{{usage_key .}}\n{{end}}"); err != nil {
		t.Fatal(err)
	}
	read := strings.Fields(out.String())
	for _, name := range flatVariables {
		if !slices.Contains(read, name) {
			t.Errorf("the worker no longer reads %s", name)
		}
	}
	var listed []string
	for _, v := range app.Variables() {
		listed = append(listed, v.Name)
	}
	if !slices.Equal(listed, read) {
		t.Errorf("app.Variables lists\n%v\nenvconfig reads\n%v", listed, read)
	}
}

// The defaults, read from the components, make a configuration that starts.
func TestTheDefaultsAreValid(t *testing.T) {
	if err := app.Defaults().Validate(); err != nil {
		t.Error(err)
	}
}
