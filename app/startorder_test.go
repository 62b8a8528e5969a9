package app_test

import (
	"context"
	"log/slog"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

// signalingHandler passes records on and signals each one whose message is
// msg.
type signalingHandler struct {
	slog.Handler
	msg    string
	signal chan struct{}
}

func (h signalingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.signal <- struct{}{}:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h signalingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return signalingHandler{h.Handler.WithAttrs(as), h.msg, h.signal}
}

func (h signalingHandler) WithGroup(name string) slog.Handler {
	return signalingHandler{h.Handler.WithGroup(name), h.msg, h.signal}
}

func TestStartReturnsOnlyOnceTheConsumerConsumes(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Publisher(t) // declares the relay queue
	// Another connection consumes the relay queue exclusively: the worker's
	// consumer is refused until it lets go.
	conn, err := amqp.Dial(env.Config.AMQPURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume(env.Config.RelayQueue, "holder", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{}, 1)
	log := slog.New(signalingHandler{testkit.Logger(t).Handler(), "not consuming; trying again", refused})
	type started struct {
		w   *app.Worker
		err error
	}
	done := make(chan started, 1)
	go func() {
		w, err := app.Start(testkit.Ctx(t), apptest.Config(env), app.Options{Logger: log})
		done <- started{w, err}
	}()
	select {
	case <-refused:
	case s := <-done:
		if s.w != nil {
			defer s.w.Stop(context.Background())
		}
		t.Fatalf("Start returned (%v) before its consumer could consume", s.err)
	case <-testkit.Ctx(t).Done():
		t.Fatal("the consumer was never refused")
	}
	select {
	case s := <-done:
		if s.w != nil {
			defer s.w.Stop(context.Background())
		}
		t.Fatalf("Start returned (%v) while its consumer was refused", s.err)
	default:
	}
	if err := ch.Close(); err != nil { // lets go of the queue
		t.Fatal(err)
	}
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer s.w.Stop(context.Background())
	if !s.w.Consumer().Connected() {
		t.Fatal("Start returned and the consumer is not consuming")
	}
	if err := s.w.Ready(context.Background()); err != nil {
		t.Fatalf("not ready when Start returned: %v", err)
	}
}
