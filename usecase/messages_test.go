package usecase_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
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

// A correlation answers the instance a committed step applied it to: a
// message that both ends a wait and starts a definition is fanned out to
// both and answers the waiting instance, ended by then; one with only a
// start answers the instance it started; one nothing waits for is
// ErrNotCorrelated.
func TestACorrelationAnswersTheInstanceItsCommittedStepAppliedItTo(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.env.Deploy(t, "testdata/correlate.bpmn")
	uc := b.w.UseCases()
	ctx := t.Context()

	var inv api.Invalid
	if _, err := uc.CorrelateMessage(ctx, usecase.Conn{}, usecase.Message{Message: "a\x00b"}); !errors.As(err, &inv) {
		t.Errorf("a NUL in the name: %v, want api.Invalid", err)
	}
	_, err := uc.CorrelateMessage(ctx, usecase.Conn{}, usecase.Message{Message: "nobody-waits", CorrelationKey: "k"})
	if !errors.Is(err, usecase.ErrNotCorrelated) || fault.Code(err) != fault.RelayUncorrelated {
		t.Errorf("a message nothing waits for: %v", err)
	}

	if err := uc.StartInstance(ctx, usecase.Conn{}, "w-1", "uc_wait", 0, map[string]any{"orderId": "o-1"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "w-1 waits", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE instance_id = 'w-1'") == 1
	})
	got, err := uc.CorrelateMessage(ctx, usecase.Conn{}, usecase.Message{Message: "uc-go", CorrelationKey: "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.InstanceID != "w-1" || got.InstanceKey != b.env.Int(t, "SELECT zeebe_key FROM instances WHERE id = 'w-1'") || got.MessageKey == 0 {
		t.Errorf("correlated %+v, want w-1", got)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'w-1' AND status = 'completed'"); n != 1 {
		t.Error("w-1 had not ended when the correlation answered")
	}
	testkit.Eventually(t, 20*time.Second, "the start the message was fanned out to", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'uc_started'") == 1
	})

	got, err = uc.CorrelateMessage(ctx, usecase.Conn{}, usecase.Message{Message: "uc-go", CorrelationKey: "o-2"})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = $1 AND definition_key = 'uc_started'", got.InstanceID); n != 1 {
		t.Errorf("correlated %+v, want a new instance of uc_started", got)
	}
}
