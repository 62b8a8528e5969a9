package store_test

import (
	"testing"
	"time"
)

func TestRelayFailureCountsAddUpAreForgottenAndTrimmedPastTheRetention(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	for want := 1; want <= 3; want++ {
		if n, err := st.CountRelayFailure(ctx, "m-1"); err != nil || n != want {
			t.Fatalf("count %d = %d (%v)", want, n, err)
		}
	}
	if _, err := st.CountRelayFailure(ctx, "m-2"); err != nil {
		t.Fatal(err)
	}
	if err := st.ForgetRelayFailures(ctx, "m-1"); err != nil {
		t.Fatal(err)
	}
	if n, err := st.CountRelayFailure(ctx, "m-1"); err != nil || n != 1 {
		t.Fatalf("a forgotten relay's next failure counts %d (%v), want 1", n, err)
	}
	if _, err := env.DB.Exec(ctx, "UPDATE relay_attempts SET updated_at = now() - interval '2 hours' WHERE message_id = 'm-2'"); err != nil {
		t.Fatal(err)
	}
	if n, err := st.TrimRelayAttempts(ctx, time.Hour, 10); err != nil || n != 1 {
		t.Fatalf("trimmed %d (%v), want the one count idle past the retention", n, err)
	}
	if n := env.Int(t, "SELECT count(*) FROM relay_attempts WHERE message_id = 'm-1'"); n != 1 {
		t.Fatal("a recent count was trimmed")
	}
}
