package app_test

import (
	"fmt"
	"testing"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
)

// signalStatus is how many instances of definition are in status.
func (b *bundle) signalStatus(t *testing.T, definition, status string) int64 {
	return b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = $1 AND status = $2", definition, status)
}

func (b *bundle) startWaiting(t *testing.T, waiting int64, ids map[string]string) {
	t.Helper()
	for id, def := range ids {
		b.pub.Publish(startOf(def, id, nil))
	}
	b.waitCommitted(t, "instances waiting for the signal", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM signal_subscriptions WHERE signal_name = 'alarm'") == waiting
	})
}

// A broadcast reaches every instance waiting for the signal when it is
// thrown, once, each under its own claim, and starts one instance of the
// definition with a signal start event; an instance that subscribes after
// it is not reached. A non-interrupting boundary event is reached by every
// broadcast.
func TestASignalBroadcastReachesEveryWaitingInstanceOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "testdata/signals.bpmn")
	b.startWaiting(t, 4, map[string]string{"c-1": "sig-catch", "b-1": "sig-boundary", "n-1": "sig-notify", "e-1": "sig-esp"})
	notify := b.version(t, "n-1")

	reach, err := b.w.Store().BroadcastSignal(testkit.Ctx(t), "first", "alarm", map[string]any{"level": 1})
	if err != nil || reach.Subscriptions != 4 || reach.Starts != 1 {
		t.Fatalf("broadcast reached %+v, %v; want 4 subscriptions, 1 start", reach, err)
	}
	b.waitCommitted(t, "every waiting instance reached", func() bool {
		return b.signalStatus(t, "sig-catch", "completed") == 1 && b.signalStatus(t, "sig-boundary", "completed") == 1 &&
			b.signalStatus(t, "sig-esp", "completed") == 1 && b.signalStatus(t, "sig-start", "completed") == 1 &&
			b.version(t, "n-1") == notify+1
	})
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE variables->>'level' = '1'"); n != 5 {
		t.Errorf("%d instances got the signal's variables, want 5", n)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id IN ('b-1', 'e-1')"); n != 0 {
		t.Errorf("%d tasks left on interrupted instances", n)
	}

	// Subscribed after the first broadcast: not reached by it.
	b.startWaiting(t, 2, map[string]string{"c-2": "sig-catch"})
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE instance_id = 'c-2'"); n != 0 || b.version(t, "c-2") != 1 {
		t.Fatalf("c-2 subscribed after the broadcast and got %d relays, version %d", n, b.version(t, "c-2"))
	}

	reach, err = b.w.Store().BroadcastSignal(testkit.Ctx(t), "second", "alarm", nil)
	if err != nil || reach.Subscriptions != 2 || reach.Starts != 1 {
		t.Fatalf("second broadcast reached %+v, %v; want 2 subscriptions, 1 start", reach, err)
	}
	b.waitCommitted(t, "the second broadcast applied", func() bool {
		return b.signalStatus(t, "sig-catch", "completed") == 2 && b.signalStatus(t, "sig-start", "completed") == 2 &&
			b.version(t, "n-1") == notify+2
	})
	// Sent again (a redelivery), a broadcast writes no relay twice.
	relays := `SELECT count(*) FROM outbox WHERE id LIKE 'signal%:second%'`
	if n := b.env.Int(t, relays); n != 3 {
		t.Fatalf("%d relays of the second broadcast, want 3", n)
	}
	if _, err := b.w.Store().BroadcastSignal(testkit.Ctx(t), "second", "alarm", nil); err != nil {
		t.Fatal(err)
	}
	if n := b.env.Int(t, relays); n != 3 {
		t.Errorf("%d relays of the second broadcast once sent again, want 3", n)
	}
	b.env.AssertNoOverlap(t, false)
	b.env.AssertNoClaimsHeld(t)
}

// A signal end event broadcasts once its step committed, through the
// outbox: it reaches an instance of another definition waiting for it.
func TestASignalEndEventReachesAnotherWaitingInstance(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "testdata/signals.bpmn")
	b.startWaiting(t, 1, map[string]string{"c-1": "sig-catch"})
	b.pub.Publish(startOf("sig-thrower", "t-1", map[string]any{"which": "alarm", "from": "t-1"}))
	b.waitCommitted(t, "the thrown signal reached c-1 and started sig-start", func() bool {
		return b.signalStatus(t, "sig-catch", "completed") == 1 && b.signalStatus(t, "sig-start", "completed") == 1 &&
			b.signalStatus(t, "sig-thrower", "completed") == 1
	})
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'c-1' AND variables->>'from' = 't-1'"); n != 1 {
		t.Errorf("c-1 did not get the thrower's variables")
	}
	b.env.AssertNoOverlap(t, false)
	b.env.AssertNoClaimsHeld(t)
}

// A broadcast cut short between two pages (the process died; here the
// database refuses the second page) was recorded before it began: once
// its hold lapses, a restarted worker's outbox publisher sends it and the
// relay path finishes it under the same id. Every waiting instance
// completes, each reached once.
func TestABroadcastCutShortIsFinishedAfterARestart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(c *app.Config) { c.SignalBroadcastPage = 2 })
	b.env.Deploy(t, "testdata/signals.bpmn")
	ids := map[string]string{}
	for i := range 5 {
		ids[fmt.Sprintf("c-%d", i)] = "sig-catch"
	}
	b.startWaiting(t, 5, ids)
	ctx := testkit.Ctx(t)
	// The crash: the second page's first relay fails its insert.
	if _, err := b.env.DB.Exec(ctx, `CREATE FUNCTION crash() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		IF NEW.id LIKE 'signal:cut:%' AND (SELECT count(*) FROM outbox WHERE id LIKE 'signal:cut:%') >= 2 THEN
			RAISE EXCEPTION 'injected crash';
		END IF;
		RETURN NEW; END $$;
		CREATE TRIGGER crash BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION crash()`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.w.Store().RecordAndBroadcastSignal(ctx, "cut", "alarm", nil); err == nil {
		t.Fatal("the broadcast survived its crash")
	}
	b.waitCommitted(t, "the first page applied", func() bool { return b.signalStatus(t, "sig-catch", "completed") == 2 })
	b.stop(t, b.w)
	if _, err := b.env.DB.Exec(ctx, `DROP TRIGGER crash ON outbox`); err != nil {
		t.Fatal(err)
	}
	if n := b.env.Int(t, `SELECT count(*) FROM outbox WHERE id = 'cut' AND published_at IS NULL`); n != 1 {
		t.Fatalf("the broadcast is not recorded (%d rows)", n)
	}
	// Its hold lapsed: a row is made due by writing it so.
	if _, err := b.env.DB.Exec(ctx, `UPDATE outbox SET locked_until = now() - interval '1 second' WHERE id = 'cut'`); err != nil {
		t.Fatal(err)
	}
	b.start(t, nil)
	b.w.Outbox().Wake()
	b.waitCommitted(t, "every waiting instance completed", func() bool { return b.signalStatus(t, "sig-catch", "completed") == 5 })
	if n := b.env.Int(t, `SELECT count(*) FROM outbox WHERE id LIKE 'signal:cut:%'`); n != 5 {
		t.Errorf("%d relays of the broadcast, want one per waiting instance", n)
	}
	// Sent again by a caller, it writes nothing twice.
	reach, err := b.w.Store().RecordAndBroadcastSignal(ctx, "cut", "alarm", nil)
	if err != nil || reach.Subscriptions != 0 {
		t.Fatalf("the retry reached %+v, %v", reach, err)
	}
	if n := b.env.Int(t, `SELECT count(*) FROM outbox WHERE id LIKE 'signal:cut:%'`); n != 5 {
		t.Errorf("%d relays once retried, want 5", n)
	}
	b.env.AssertNoOverlap(t, false)
	b.env.AssertNoClaimsHeld(t)
}
