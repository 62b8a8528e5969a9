package broker_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

// A refusal no reconnect can cure fails the first connection attempt with
// fault.Misconfigured and what to change; an unreachable broker does not.
func TestARefusalAtTheFirstConnectionSaysWhatToChange(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(testkit.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	wrongPassword := *base
	wrongPassword.User = url.UserPassword(base.User.Username(), "not-the-password")
	noVhost := *base
	noVhost.Path = "/sutra-no-such-vhost"
	for _, c := range []struct {
		name, url, hint string
	}{
		{"wrong password", wrongPassword.String(), "credentials in SUTRA_AMQP_URL"},
		{"missing virtual host", noVhost.String(), "virtual host"},
		{"malformed URL", "amqp://guest:guest@127.0.0.1:notaport/", "not a valid AMQP URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testkit.New(t)
			o := start(t, env, c.url, "sutra-test-refusal/"+env.Schema)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := o.FirstRefusal(ctx)
			if fault.Code(err) != fault.Misconfigured || !strings.Contains(err.Error(), c.hint) {
				t.Fatalf("FirstRefusal = %v, want %s saying %q", err, fault.Misconfigured, c.hint)
			}
		})
	}
	t.Run("unreachable broker", func(t *testing.T) {
		env := testkit.New(t)
		o := start(t, env, "amqp://guest:guest@127.0.0.1:1/", "sutra-test-refusal/"+env.Schema)
		if err := o.FirstRefusal(context.Background()); err != nil {
			t.Fatalf("FirstRefusal = %v for a broker that is down, want nil (keep dialing)", err)
		}
		if err := o.TestSignals.Disconnected.WaitOrTimeout(t); fault.Code(err) == fault.Misconfigured {
			t.Fatalf("a refused TCP connection classified as misconfiguration: %v", err)
		}
	})
}

func TestAQueueDeclaredWithOtherArgumentsIsARefusalAtStartAndLaterAnError(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	queue := env.Config.RelayQueue
	redeclare := func(args amqp.Table) {
		withChannel(t, func(ch *amqp.Channel) error {
			if _, err := ch.QueueDelete(queue, false, false, false); err != nil {
				return err
			}
			_, err := ch.QueueDeclare(queue, true, false, false, false, args)
			return err
		})
	}
	redeclare(amqp.Table{"x-max-length": int32(10)})
	o := start(t, env, testkit.AMQPURL(), "sutra-test-refusal/"+env.Schema)
	err := o.FirstRefusal(context.Background())
	if fault.Code(err) != fault.Misconfigured || !strings.Contains(err.Error(), "other arguments") {
		t.Fatalf("FirstRefusal = %v, want %s naming the arguments", err, fault.Misconfigured)
	}

	// Fixed: the owner connects. Broken again later: each reconnect is a
	// refusal, reported as such rather than as a lost connection.
	redeclare(nil)
	o.TestSignals.Connected.WaitOrTimeout(t)
	o.TestSignals.Disconnected.Drain() // the refusals before the fix
	redeclare(amqp.Table{"x-max-length": int32(10)})
	testkit.CloseBrokerConnection(t, "sutra-test-refusal/"+env.Schema)
	// The close itself comes first; the reconnects after it are refused.
	for fault.Code(o.TestSignals.Disconnected.WaitOrTimeout(t)) != fault.Misconfigured {
	}
}
