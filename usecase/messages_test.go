package usecase_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/usecase"
)

func TestAMessageIsRefusedBeforeTheBrokerOrPublishedAsARelayThatBuffersIt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uc := b.w.UseCases()
	for name, m := range map[string]usecase.Message{
		"no name":            {CorrelationKey: "k"},
		"a key and instance": {Message: "m", CorrelationKey: "k", InstanceID: "i"},
		"a bad ttl":          {Message: "m", CorrelationKey: "k", TTL: "soon"},
		"too long a ttl":     {Message: "m", CorrelationKey: "k", TTL: "P1000Y"},
		"a NUL in its id":    {Message: "m", MessageID: "a\x00b"},
	} {
		var inv api.Invalid
		if _, err := uc.PublishMessage(t.Context(), m); !errors.As(err, &inv) {
			t.Errorf("a message with %s: %v, want api.Invalid", name, err)
		}
	}
	var n int
	if err := b.env.DB.QueryRow(t.Context(), `SELECT count(*) FROM buffered_messages`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused messages left %d buffered (%v)", n, err)
	}

	id, err := uc.PublishMessage(t.Context(), usecase.Message{Message: "paid", CorrelationKey: "order-1", TTL: "PT1H",
		Variables: map[string]any{"amount": 3.0}})
	if err != nil || id == "" {
		t.Fatalf("publishing: %q, %v", id, err)
	}
	var name, key string
	testkit.Eventually(t, 20*time.Second, "the buffered message", func() bool {
		return b.env.DB.QueryRow(t.Context(), `SELECT message_name, correlation_key FROM buffered_messages WHERE message_id = $1`, id).
			Scan(&name, &key) == nil
	})
	if name != "paid" || key != "order-1" {
		t.Errorf("buffered %q/%q, want paid/order-1", name, key)
	}
}
