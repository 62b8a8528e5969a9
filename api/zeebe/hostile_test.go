package zeebe_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/codes"
)

// PublishMessage takes names, keys and timeToLive under the rule of POST
// /v1/messages (api.CheckText, lanes.MaxMessageTTL), before anything
// reaches the broker: the publishing connection stays up.
func TestPublishMessageRefusesLongNamesAndTTLsBeforeTheBroker(t *testing.T) {
	b := setup(t, nil)
	b.w.Broker().TestSignals.Init()
	raw := b.raw(t)
	ctx := ctxAs(t, taskToken)
	for _, c := range []struct {
		req  *pb.PublishMessageRequest
		want string
	}{
		{&pb.PublishMessageRequest{Name: strings.Repeat("n", 256)}, "message is 256 bytes long"},
		{&pb.PublishMessageRequest{Name: "paid", CorrelationKey: strings.Repeat("k", 256)}, "correlation_key is 256 bytes long"},
		{&pb.PublishMessageRequest{Name: "pa\x00id"}, "message holds a NUL"},
		{&pb.PublishMessageRequest{Name: "paid", CorrelationKey: "o-1", TimeToLive: 1e12}, "timeToLive is longer than the maximum time to live, P365D"},
		{&pb.PublishMessageRequest{Name: "paid", CorrelationKey: "o-1", TimeToLive: 1 << 62}, "maximum time to live"},
	} {
		_, err := raw.PublishMessage(ctx, c.req)
		wantStatus(t, err, codes.InvalidArgument, c.want)
	}
	if _, err := raw.PublishMessage(ctx, &pb.PublishMessageRequest{Name: "paid", CorrelationKey: "o-1", TimeToLive: 365 * 24 * 3600 * 1000}); err != nil {
		t.Fatalf("the longest timeToLive: %v", err)
	}
	if gone := b.w.Broker().TestSignals.PublishDisconnected.Drain(); len(gone) > 0 {
		t.Errorf("the publishing connection dropped: %v", gone)
	}
}

// An ActivateJobs whose requestTimeout overflows a duration waits the
// longest long poll, rather than answering at once.
func TestActivateJobsWithTheLargestRequestTimeoutWaits(t *testing.T) {
	b := setup(t, nil)
	b.w.Gateway().TestSignals.Init()
	ctx, cancel := context.WithCancel(ctxAs(t, taskToken))
	defer cancel()
	stream, err := b.raw(t).ActivateJobs(ctx, &pb.ActivateJobsRequest{Type: "none", Worker: "w", Timeout: 60000,
		MaxJobsToActivate: 1, RequestTimeout: math.MaxInt64})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		done <- err
	}()
	// Overflowed, the wait was negative: an answer at once, never a wait.
	if typ := b.w.Gateway().TestSignals.Waiting.WaitOrTimeout(t); typ != "none" {
		t.Fatalf("waiting for %q", typ)
	}
	select {
	case err := <-done:
		t.Fatalf("answered while waiting: %v", err)
	default:
	}
	cancel()
	<-done
}
