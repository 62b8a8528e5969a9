package admin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/admin/wire"
)

// FuzzRequestBodies feeds arbitrary bodies to every decoder of the admin
// API: nothing a client sends panics, and a refusal is always a client
// error (400 or 413), never a 500.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"definition":"d","version":1,"instance_id":"i","variables":{"a":[1,{"b":null}]}}`,
		`{"target_version":2,"mapping":{"A":"B"}}`,
		`{"definition":"d","from_version":1,"to_version":2}`,
		`{"variables":{"a":1},"retries":3}`,
		`{"message":"m","correlation_key":"k","ttl":"PT1M"}`,
		`{"assignee":null}`, `{"variables":{"ok":true},"override":true}`,
		`[]`, `null`, `{"a":`, "\x00", `{"s":"\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []any{&wire.StartRequest{}, &wire.MigrateRequest{}, &wire.MigrationRequest{},
			&wire.RetryRequest{}, &wire.MessageRequest{}, &wire.AssignmentRequest{}, &wire.CompletionRequest{},
			&map[string]any{}} {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			err := api.Decode(r, v)
			if err == nil {
				continue
			}
			if p := asProblem(err); p.status != http.StatusBadRequest && p.status != http.StatusRequestEntityTooLarge {
				t.Fatalf("body %q refused with %d: %v", body, p.status, err)
			}
		}
	})
}
