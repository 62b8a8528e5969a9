package engine_test

import (
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
)

// A close deletes only from the table its wait has rows in: the payment
// closes a message wait (subscriptions only); a wait the state does not
// know is looked for everywhere.
func TestCloseTablesNameOnlyTheTableOfEachClosedWait(t *testing.T) {
	f, err := os.Open("../examples/order.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	proc, err := bpmn.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	started, _, err := engine.Step(proc, engine.Instance{ID: "o"}, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"orderId": "o"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, eff, err := engine.Step(proc, engine.Instance{ID: "o", Version: 1, State: started}, engine.Trigger{Kind: engine.TriggerMessage, Message: "payment-received"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(eff.CloseWaits) == 0 {
		t.Fatal("the payment closed no wait")
	}
	got := engine.CloseTables(proc, started, eff.CloseWaits)
	want := make([]engine.WaitTables, len(eff.CloseWaits))
	for i := range want {
		want[i] = engine.TableSubscriptions
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("close tables = %v, want subscriptions only for %+v", got, eff.CloseWaits)
	}
	if got := engine.CloseTables(proc, started, []engine.WaitRef{{TokenID: "no-such-token"}}); !reflect.DeepEqual(got, []engine.WaitTables{engine.AllWaitTables}) {
		t.Errorf("close tables of an unknown token = %v, want every table", got)
	}
}
