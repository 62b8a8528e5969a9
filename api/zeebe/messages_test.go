package zeebe_test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sutra-run/worker/internal/testkit"
)

// buffered waits until the relay with message id id is buffered.
func (b *bundle) buffered(t *testing.T, id string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "message "+id+" buffered", func() bool {
		var n int
		err := b.env.DB.QueryRow(testkit.Ctx(t), `SELECT count(*) FROM buffered_messages WHERE message_id = $1`, id).Scan(&n)
		return err == nil && n == 1
	})
}

func TestPublishMessageBufferedWithTTLCorrelatesWhenTheSubscriptionOpens(t *testing.T) {
	b := setup(t, nil)
	b.deploy(t, "payment.bpmn")
	ctx := testkit.Ctx(t)
	msg, err := b.client.NewPublishMessageCommand().MessageName("paid").CorrelationKey("o-7").TimeToLive(time.Minute).
		VariablesFromMap(map[string]any{"amount": 7})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := msg.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Key < firstKey || resp.TenantId != "<default>" {
		t.Fatalf("published %+v", resp)
	}
	// Published without a messageId, its key is its relay's message id.
	b.buffered(t, strconv.FormatInt(resp.Key, 10))
	var ttl time.Duration
	if err := b.env.DB.QueryRow(ctx, `SELECT expires_at - created_at FROM buffered_messages`).Scan(&ttl); err != nil {
		t.Fatal(err)
	}
	if ttl < 59*time.Second || ttl > 61*time.Second {
		t.Errorf("buffered for %s, want the minute of its timeToLive", ttl)
	}
	r := <-createWithResult(t, b.client, "o-7", time.Minute)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.resp.Variables != `{"amount":7,"orderId":"o-7"}` {
		t.Errorf("variables %s", r.resp.Variables)
	}
}

func TestPublishMessageIDIsDeduplicated(t *testing.T) {
	b := setup(t, nil)
	ctx := testkit.Ctx(t)
	publish := func() error {
		_, err := b.client.NewPublishMessageCommand().MessageName("paid").CorrelationKey("o-1").MessageId("m-1").
			TimeToLive(time.Minute).Send(ctx)
		return err
	}
	if err := publish(); err != nil {
		t.Fatal(err)
	}
	b.buffered(t, "m-1")
	wantStatus(t, publish(), codes.AlreadyExists, "m-1")
	_, err := b.client.NewPublishMessageCommand().MessageName("paid").CorrelationKey("o-1").TenantId("other").Send(ctx)
	wantStatus(t, err, codes.InvalidArgument, "tenant")
}
