package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

// historyOf reads a page of GET /v1/instances/{id}/history.
func (b *adminBundle) historyOf(t *testing.T, id, query string) ([]map[string]any, any) {
	t.Helper()
	status, out := b.do(t, "GET", "/instances/"+id+"/history"+query, nil)
	if status != http.StatusOK {
		t.Fatalf("GET history of %s%s: %d %v", id, query, status, out)
	}
	steps, _ := asList(out["steps"])
	return steps, out["next"]
}

func TestTheHistoryNamesWhatAdvancedEachStepUnderWhichOwnerAndThePathItTook(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.startShop(t, "o-1")
	if status, p := b.do(t, "PATCH", "/instances/o-1/variables", map[string]any{"note": "rush"}); status != http.StatusOK {
		t.Fatalf("PATCH variables: %d %v", status, p)
	}
	b.pub.Publish(testkit.Relay{MessageID: "paid-o-1", Body: map[string]any{"instance_id": "o-1", "message": "payment-received"}})
	b.applied(t, "paid-o-1")

	steps, next := b.historyOf(t, "o-1", "")
	if next != nil || len(steps) != 3 {
		t.Fatalf("history of o-1: %v (next %v), want its 3 steps", steps, next)
	}
	want := []struct {
		version            float64
		cause, detail      string
		ownerSuffix, msgID string
		passed             string
	}{
		{3, "relay", "message payment-received", "/lane/", "paid-o-1", "[Event_Paid F2]"},
		{2, "admin_variables", "note", "/admin", "", "[]"},
		{1, "start", "start relay", "/lane/", "start-o-1", "[Start F1]"},
	}
	for i, w := range want {
		s := steps[i]
		msg, _ := s["message_id"].(string)
		if s["version"] != w.version || s["cause"] != w.cause || s["detail"] != w.detail || msg != w.msgID ||
			!strings.Contains(fmt.Sprint(s["owner"]), w.ownerSuffix) || s["bounces"] != nil || s["committed_at"] == nil {
			t.Errorf("step %d: %v, want version %v, cause %s (%s), owner …%s…, message %q, no bounce count", i, s, w.version, w.cause, w.detail, w.ownerSuffix, w.msgID)
		}
		if _, list := s["passed"].([]any); !list || fmt.Sprint(s["passed"]) != w.passed || s["passed_cut"] != false {
			t.Errorf("step %d passed %v (cut %v), want %s, not cut", i, s["passed"], s["passed_cut"], w.passed)
		}
	}
	// Paged by cursor, newest first.
	first, next := b.historyOf(t, "o-1", "?limit=2")
	rest, last := b.historyOf(t, "o-1", fmt.Sprintf("?limit=2&after=%v", next))
	if len(first) != 2 || next != "2" || len(rest) != 1 || rest[0]["version"] != 1.0 || last != nil {
		t.Errorf("pages of 2: %v (next %v) then %v (next %v)", first, next, rest, last)
	}
	if status, p := b.do(t, "GET", "/instances/nope/history", nil); status != http.StatusNotFound || p["code"] != fault.NotFound {
		t.Errorf("history of a missing instance: %d %v", status, p)
	}
	if status, _ := b.do(t, "GET", "/instances/o-1/history?after=x", nil); status != http.StatusBadRequest {
		t.Errorf("a bad cursor: %d, want 400", status)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestWithTheHistoryOffStepsRunAndWriteNoHistoryRow(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, func(c *app.Config) { c.StepHistory = false })
	b.startShop(t, "o-1")
	b.pub.Publish(testkit.Relay{MessageID: "paid-o-1", Body: map[string]any{"instance_id": "o-1", "message": "payment-received"}})
	b.applied(t, "paid-o-1")
	if steps, next := b.historyOf(t, "o-1", ""); len(steps) != 0 || next != nil {
		t.Fatalf("history of o-1 with SUTRA_STEP_HISTORY=false: %v (next %v), want none", steps, next)
	}
	var version int
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT version FROM instances WHERE id = 'o-1'").Scan(&version); err != nil || version != 2 {
		t.Fatalf("o-1 at version %d (%v), want its 2 steps applied", version, err)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestAMigrationPreflightAnswersWhatTheMigrationWouldDoAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.startShop(t, "o-1")
	b.env.Deploy(t, "testdata/shop-v2.bpmn")
	before := b.snapshot(t, "o-1")

	status, p := b.do(t, "POST", "/instances/o-1/migrate/preflight", map[string]any{"target_version": 2,
		"mapping": map[string]string{"Event_Paid": "Event_PaymentReceived"}})
	tokens, _ := asList(p["tokens"])
	if status != http.StatusOK || p["ok"] != true || p["status"] != 200.0 || len(tokens) != 1 ||
		tokens[0]["from"] != "Event_Paid" || tokens[0]["to"] != "Event_PaymentReceived" || tokens[0]["wait"] != "message" {
		t.Errorf("preflight of a good mapping: %d %v", status, p)
	}
	status, p = b.do(t, "POST", "/instances/o-1/migrate/preflight", map[string]any{"target_version": 2})
	if status != http.StatusOK || p["ok"] != false || p["status"] != 422.0 || p["code"] != fault.MigrateUnreachable ||
		!strings.Contains(fmt.Sprint(p["detail"]), "Event_Paid") {
		t.Errorf("preflight of a mapping that leaves a token nowhere: %d %v", status, p)
	}
	status, p = b.do(t, "POST", "/instances/o-1/migrate/preflight", map[string]any{"target_version": 9})
	if status != http.StatusOK || p["ok"] != false || p["status"] != 404.0 || p["code"] != fault.AdminNotFound {
		t.Errorf("preflight to a version not deployed: %d %v", status, p)
	}
	if status, p := b.do(t, "POST", "/instances/nope/migrate/preflight", map[string]any{"target_version": 2}); status != http.StatusNotFound || p["code"] != fault.NotFound {
		t.Errorf("preflight of a missing instance: %d %v", status, p)
	}
	if status, _ := b.do(t, "POST", "/instances/o-1/migrate/preflight", map[string]any{}); status != http.StatusBadRequest {
		t.Errorf("preflight without a target: %d, want 400", status)
	}
	if after := b.snapshot(t, "o-1"); after != before {
		t.Fatalf("a preflight changed the instance:\nbefore %s\nafter  %s", before, after)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM step_history WHERE instance_id = 'o-1'"); n != 1 {
		t.Errorf("%d history rows, want the start's alone: a preflight is no step", n)
	}
}
