package store_test

import (
	"encoding/json"
	"testing"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// A broadcast reads the subscriptions to its signal page by page and writes
// one relay to each, carrying the wait and the variables; subscriptions to
// other signals are not reached, and a broadcast sent again writes nothing.
func TestABroadcastRelaysEverySubscriptionPageByPage(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := testkit.Ctx(t)
	st, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{BroadcastPage: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, s := range [][3]string{{"i-1", "t1", "alarm"}, {"i-2", "t1", "alarm"}, {"i-3", "", "alarm"}, {"i-4", "t2", "other"},
		{"i-5", "t4", "alarm"}, {"i-6", "t1", "alarm"}} {
		if _, err := env.DB.Exec(ctx, `INSERT INTO signal_subscriptions (instance_id, token_id, element_id, signal_name)
			VALUES ($1, $2, 'C', $3)`, s[0], s[1], s[2]); err != nil {
			t.Fatal(err)
		}
	}
	reach, err := st.BroadcastSignal(ctx, "b-1", "alarm", map[string]any{"level": 2})
	if err != nil || reach != (store.SignalReach{Subscriptions: 5}) {
		t.Fatalf("reach = %+v, %v; want 5 subscriptions", reach, err)
	}
	rows, err := env.DB.Query(ctx, `SELECT instance_id, routing_key, body FROM outbox WHERE target = 'relay' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, routing string
		var body []byte
		if err := rows.Scan(&id, &routing, &body); err != nil {
			t.Fatal(err)
		}
		var b struct {
			InstanceID string            `json:"instance_id"`
			Signal     store.SignalRelay `json:"signal"`
			Variables  map[string]any    `json:"variables"`
		}
		if err := json.Unmarshal(body, &b); err != nil || routing != store.SignalRouting || b.InstanceID != id ||
			b.Signal.Name != "alarm" || b.Signal.Element != "C" || b.Variables["level"] != 2.0 {
			t.Errorf("relay to %s: %s (%s), %v", id, body, routing, err)
		}
		got = append(got, id+"/"+b.Signal.Token)
	}
	if want := []string{"i-1/t1", "i-2/t1", "i-3/", "i-5/t4", "i-6/t1"}; len(got) != len(want) {
		t.Fatalf("relays to %v, want %v", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("relay %d to %s, want %s", i, got[i], want[i])
			}
		}
	}
	if _, err := st.BroadcastSignal(ctx, "b-1", "alarm", nil); err != nil {
		t.Fatal(err)
	}
	if n := env.Int(t, "SELECT count(*) FROM outbox"); n != 5 {
		t.Errorf("%d outbox rows once the broadcast was sent again, want 5", n)
	}
}
