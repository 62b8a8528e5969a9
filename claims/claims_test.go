package claims_test

import (
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// setup returns a store on a fresh schema with one started, released instance "i-1".
func setup(t *testing.T) (*testkit.Env, *store.Store) {
	t.Helper()
	env := testkit.New(t)
	env.Deploy(t, "../examples/order.bpmn")
	st, err := store.Open(testkit.Ctx(t), env.Config.DatabaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := claims.New(st, claims.LaneOwner("r1", 0), time.Minute, nil)
	h, err := c.Claim(testkit.Ctx(t), claims.Request{InstanceID: "i-1", StartKey: "order"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WriteStep(testkit.Ctx(t), engine.State{Status: engine.StatusActive, Variables: map[string]any{}}, engine.Effects{}, claims.Extras{}); err != nil {
		t.Fatal(err)
	}
	return env, st
}

func TestOwnerIDsAreLaneScopedAndAdminIsDistinct(t *testing.T) {
	if claims.LaneOwner("r1", 0) == claims.LaneOwner("r1", 1) {
		t.Fatal("two lanes share an owner id")
	}
	for n := range 100 {
		if claims.LaneOwner("r1", n) == claims.AdminOwner("r1") {
			t.Fatalf("lane %d has the admin owner id", n)
		}
	}
}

func TestSameOwnerReclaimSucceedsAndRefreshesTheClaim(t *testing.T) {
	t.Parallel()
	env, st := setup(t)
	ctx := testkit.Ctx(t)
	lane := claims.New(st, claims.LaneOwner("r1", 3), time.Minute, nil)
	if _, err := lane.Claim(ctx, claims.Request{InstanceID: "i-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "UPDATE claims SET claimed_at = now() - interval '10 seconds' WHERE instance_id = 'i-1'"); err != nil {
		t.Fatal(err)
	}
	h, err := lane.Claim(ctx, claims.Request{InstanceID: "i-1"})
	if err != nil {
		t.Fatalf("re-claim by the same owner refused: %v", err)
	}
	if age := env.Int(t, "SELECT extract(epoch FROM now() - claimed_at)::int FROM claims WHERE instance_id = 'i-1'"); age > 2 {
		t.Errorf("re-claim did not refresh claimed_at (age %ds)", age)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	env.AssertNoClaimsHeld(t)
}

func TestAHeldClaimIsRefusedToOtherLanesAndToAdmin(t *testing.T) {
	t.Parallel()
	_, st := setup(t)
	ctx := testkit.Ctx(t)
	lane := claims.New(st, claims.LaneOwner("r1", 0), time.Minute, nil)
	h, err := lane.Claim(ctx, claims.Request{InstanceID: "i-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []*claims.Claimer{
		claims.New(st, claims.AdminOwner("r1"), time.Minute, nil),
		claims.New(st, claims.LaneOwner("r1", 1), time.Minute, nil),
		claims.New(st, claims.LaneOwner("r2", 0), time.Minute, nil),
	} {
		_, err := other.Claim(ctx, claims.Request{InstanceID: "i-1"})
		var held *store.ClaimHeldError
		if !errors.As(err, &held) || fault.Code(err) != fault.ClaimHeld {
			t.Fatalf("%s claimed a held instance: err = %v", other.Owner(), err)
		}
		if held.Holder != lane.Owner() {
			t.Errorf("refusal names holder %q, want %q", held.Holder, lane.Owner())
		}
	}
	// And an admin claim is never re-entered by a lane.
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	admin := claims.New(st, claims.AdminOwner("r1"), time.Minute, nil)
	if _, err := admin.Claim(ctx, claims.Request{InstanceID: "i-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lane.Claim(ctx, claims.Request{InstanceID: "i-1"}); fault.Code(err) != fault.ClaimHeld {
		t.Fatalf("lane re-entered the admin claim: err = %v", err)
	}
}

func TestAStaleClaimIsTakenOverAndTheOldHoldersCommitIsFenced(t *testing.T) {
	t.Parallel()
	env, st := setup(t)
	ctx := testkit.Ctx(t)
	slow := claims.New(st, claims.LaneOwner("r1", 0), time.Second, nil)
	h, err := slow.Claim(ctx, claims.Request{InstanceID: "i-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "UPDATE claims SET claimed_at = now() - interval '5 seconds' WHERE instance_id = 'i-1'"); err != nil {
		t.Fatal(err)
	}
	fast := claims.New(st, claims.LaneOwner("r2", 0), time.Second, nil)
	h2, err := fast.Claim(ctx, claims.Request{InstanceID: "i-1"})
	if err != nil {
		t.Fatalf("stale claim not taken over: %v", err)
	}
	err = h.WriteStep(ctx, engine.State{Status: engine.StatusActive}, engine.Effects{
		Subscriptions: []engine.Subscription{{TokenID: "t9", Element: "e", Message: "m", CorrelationKey: "k"}},
	}, claims.Extras{InboxID: "late"})
	if fault.Code(err) != fault.StepFenced {
		t.Fatalf("old holder's commit: err = %v, want %s", err, fault.StepFenced)
	}
	if n := env.Int(t, "SELECT count(*) FROM subscriptions") + env.Int(t, "SELECT count(*) FROM inbox"); n != 0 {
		t.Errorf("fenced commit left %d rows behind", n)
	}
	if err := h2.WriteStep(ctx, engine.State{Status: engine.StatusActive}, engine.Effects{}, claims.Extras{}); err != nil {
		t.Fatalf("new holder's commit: %v", err)
	}
	if v := env.Int(t, "SELECT version FROM instances WHERE id = 'i-1'"); v != 2 {
		t.Errorf("version = %d, want 2", v)
	}
}

func TestClaimTellsNotFoundFromHeldAndDuplicate(t *testing.T) {
	t.Parallel()
	env, st := setup(t)
	ctx := testkit.Ctx(t)
	c := claims.New(st, claims.LaneOwner("r1", 0), time.Minute, nil)
	if _, err := c.Claim(ctx, claims.Request{InstanceID: "missing"}); fault.Code(err) != fault.NotFound {
		t.Errorf("missing instance: err = %v", err)
	}
	if _, err := env.DB.Exec(ctx, "INSERT INTO inbox (message_id, instance_id) VALUES ('m-1', 'i-1')"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, claims.Request{InstanceID: "i-1", InboxID: "m-1"}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("applied message: err = %v", err)
	}
	env.AssertNoClaimsHeld(t)
}

// A claim that applied on the server but failed in the client must not stay
// behind: its lane would re-enter it on every redelivery, refreshing it so
// that the sweep never clears it, and every other lane would bounce forever.

func TestAClaimWhoseRowDoesNotDecodeIsReleased(t *testing.T) {
	t.Parallel()
	env, st := setup(t)
	ctx := testkit.Ctx(t)
	if _, err := env.DB.Exec(ctx, `UPDATE instances SET tokens = '{"tokens": 5}' WHERE id = 'i-1'`); err != nil {
		t.Fatal(err)
	}
	c := claims.New(st, claims.LaneOwner("r1", 7), time.Minute, nil)
	if _, err := c.Claim(ctx, claims.Request{InstanceID: "i-1"}); err == nil || fault.Code(err) != "" {
		t.Fatalf("claim of an undecodable row: err = %v, want a permanent error (no code)", err)
	}
	if n := env.Int(t, "SELECT count(*) FROM claim_audit WHERE instance_id = 'i-1' AND new_owner = $1", c.Owner()); n != 1 {
		t.Fatalf("the claim statement applied %d times, want once (the test must take the claim)", n)
	}
	env.AssertNoClaimsHeld(t)
}

func TestAClaimWhoseConnectionIsKilledAfterTheStatementWasSentIsReleased(t *testing.T) {
	t.Parallel()
	env, _ := setup(t)
	ctx := testkit.Ctx(t)
	const owner = "r1/lane/5"
	// The claim statement runs for 2 s on the server (room for the poll below
	// to see it on a busy machine); meanwhile its
	// connection is killed and the client's cancel request is lost, so the
	// claim commits while the client has already failed.
	if _, err := env.DB.Exec(ctx, `
		CREATE FUNCTION slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.owner = '`+owner+`' THEN PERFORM pg_sleep(2); END IF; RETURN NEW; END $$;
		CREATE TRIGGER slow_claim BEFORE INSERT ON claims FOR EACH ROW EXECUTE FUNCTION slow_claim()`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(env.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.NewProxy(t, u.Host)
	proxy.DropCancelRequests()
	q := u.Query()
	q.Set("sslmode", "disable") // so the proxy can recognise cancel requests
	u.RawQuery = q.Encode()
	st, err := store.Open(ctx, proxy.Through(t, u.String()), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := claims.New(st, owner, time.Minute, nil)
	// The scenario needs the server to commit the claim after the client
	// failed; on a loaded machine the server may instead notice the dead
	// connection first and roll it back (safe, but proving nothing), so it
	// is tried again on a fresh instance, a few times at most.
	applied := false
	for attempt := 1; attempt <= 3 && !applied; attempt++ {
		id := fmt.Sprintf("i-%d", attempt)
		claimed := make(chan error, 1)
		go func() {
			_, err := c.Claim(ctx, claims.Request{InstanceID: id})
			claimed <- err
		}()
		testkit.Eventually(t, 10*time.Second, "the claim statement running", func() bool {
			return env.Int(t, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%INSERT INTO claims%'") == 1
		})
		proxy.Reset()
		if err := <-claimed; err == nil {
			t.Fatal("a claim whose connection died succeeded")
		} else {
			t.Logf("claim of %s: %v", id, err)
		}
		// The claim's transaction ends within its 2 s sleep and its commit;
		// 15 s is room for a loaded machine.
		for deadline := time.Now().Add(15 * time.Second); !applied && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			applied = env.Int(t, "SELECT count(*) FROM claim_audit WHERE instance_id = $1 AND new_owner = $2", id, owner) == 1
		}
		if !applied {
			t.Logf("attempt %d: the server rolled the claim back; trying again", attempt)
		}
	}
	if !applied {
		t.Fatal("in 3 attempts the server never committed a claim whose client had failed: the scenario did not arise")
	}
	testkit.Eventually(t, 5*time.Second, "no claim left held", func() bool {
		return env.Int(t, "SELECT count(*) FROM claims") == 0
	})
}

// A release the database refuses for a moment for want of connection slots
// (SQLSTATE 53300, as when a killed connection's replacement finds the
// server full) is asked again: the claim does not wait for the sweep.
func TestAReleaseRefusedForWantOfConnectionsIsAskedAgain(t *testing.T) {
	t.Parallel()
	env, st := setup(t)
	ctx := testkit.Ctx(t)
	// The first release's delete fails as a full server would refuse it (a
	// sequence counts the tries: the failed transaction does not undo it).
	if _, err := env.DB.Exec(ctx, `
		CREATE SEQUENCE release_tries;
		CREATE FUNCTION refuse_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('release_tries') = 1 THEN
				RAISE EXCEPTION 'sorry, too many clients already' USING ERRCODE = '53300';
			END IF;
			RETURN OLD;
		END $$;
		CREATE TRIGGER refuse_once BEFORE DELETE ON claims FOR EACH ROW EXECUTE FUNCTION refuse_once()`); err != nil {
		t.Fatal(err)
	}
	c := claims.New(st, claims.LaneOwner("r1", 3), time.Minute, nil)
	h, err := c.Claim(ctx, claims.Request{InstanceID: "i-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n := env.Int(t, "SELECT last_value FROM release_tries"); n != 2 {
		t.Fatalf("the release's delete ran %d times, want 2: refused once, then done", n)
	}
	env.AssertNoClaimsHeld(t)
}
