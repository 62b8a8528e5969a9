package store_test

import "testing"

func TestTheConnectionLimitCountsTheLiveReplicaRegistrationsAndThisOne(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	if _, err := env.DB.Exec(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES
		('replica/a', 'a', now() + interval '1 minute'), ('replica/b', 'b', now() + interval '1 minute'),
		('replica/gone', 'gone', now() - interval '1 minute'), ('replica/me', 'me', now() + interval '1 minute'),
		('sweeper', 'a', now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	l, err := st.ConnectionLimit(ctx, "replica/", "replica/me")
	if err != nil {
		t.Fatal(err)
	}
	if l.Replicas != 3 || l.Max <= 0 || l.Reserved < 0 {
		t.Fatalf("limit %+v, want 3 replicas (a, b and this one)", l)
	}
}
