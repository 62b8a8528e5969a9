package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
)

// A batch cancels every instance its filter matches, over several pages of
// its walk, through the single cancel: an instance whose claim another
// owner holds is put off and cancelled once the claim is let go, nothing
// lost; what the filter does not match is left alone.
func TestABatchCancelsWhatItsFilterMatchesAndWaitsOutAHeldClaim(t *testing.T) {
	t.Parallel()
	const n = 70 // more than two of the runner's pages (32)
	// The injected claim must not go stale while the batch meets it.
	b := setupAdmin(t, nil, func(c *app.Config) { c.ClaimTimeout = 5 * time.Minute })
	for i := range n {
		b.mustDo(t, "POST", "/instances", map[string]any{"definition": "shop", "instance_id": fmt.Sprintf("s-%02d", i),
			"variables": map[string]any{"orderId": fmt.Sprintf("s-%02d", i)}}, http.StatusCreated)
	}
	b.mustDo(t, "POST", "/instances", map[string]any{"definition": "tasks", "instance_id": "other"}, http.StatusCreated)
	// Another owner holds s-05, as a step of another replica would.
	if _, err := b.env.DB.Exec(testkit.Ctx(t), `INSERT INTO claims (instance_id, owner) VALUES ('s-05', 'elsewhere/lane/0')`); err != nil {
		t.Fatal(err)
	}

	p := b.mustDo(t, "POST", "/batches", map[string]any{"operation": "cancel", "filter": map[string]any{"definition": "shop", "status": "active"}},
		http.StatusAccepted)
	id := fmt.Sprint(p["id"])
	var m map[string]any
	testkit.Eventually(t, 2*time.Minute, "the batch put off by the held claim", func() bool {
		_, m = b.do(t, "GET", "/batches/"+id, nil)
		return m["retrying"] == float64(1) && m["done"] == float64(n-1)
	})
	if m["state"] != "running" {
		t.Errorf("a batch with an instance to retry: %v, want running", m)
	}
	if _, err := b.env.DB.Exec(testkit.Ctx(t), `DELETE FROM claims WHERE instance_id = 's-05' AND owner = 'elsewhere/lane/0'`); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 2*time.Minute, "the batch done", func() bool {
		_, m = b.do(t, "GET", "/batches/"+id, nil)
		return m["state"] == "done"
	})
	if m["done"] != float64(n) || m["failed"] != float64(0) || m["retrying"] != float64(0) || len(m["refused"].(map[string]any)) != 0 ||
		m["operation"] != "cancel" || m["total"] != nil {
		t.Errorf("batch = %v, want %d done", m, n)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'shop' AND status = 'cancelled'"); v != n {
		t.Errorf("%d of %d shop instances cancelled", v, n)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'other' AND status = 'active'"); v != 1 {
		t.Error("the batch cancelled an instance its filter does not match")
	}

	// By ids: an ended instance and one that does not exist are refused, by
	// code.
	p = b.mustDo(t, "POST", "/batches", map[string]any{"operation": "cancel", "ids": []string{"s-01", "nope", "other"}}, http.StatusAccepted)
	id = fmt.Sprint(p["id"])
	testkit.Eventually(t, time.Minute, "the batch by ids done", func() bool {
		_, m = b.do(t, "GET", "/batches/"+id, nil)
		return m["state"] == "done"
	})
	refused := m["refused"].(map[string]any)
	if m["total"] != float64(3) || m["done"] != float64(1) || refused["SUTRA.RUNTIME.RESUME.NOT_WAITING"] == nil || m["failed"] != float64(0) {
		t.Errorf("batch by ids = %v, want other done, s-01 refused NOT_WAITING, nope refused", m)
	}
	var sum float64
	for _, c := range refused {
		sum += c.(float64)
	}
	if sum != 2 {
		t.Errorf("refused %v, want 2 in all", refused)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestABatchRequestIsChecked(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	for _, body := range []map[string]any{
		{"operation": "cancel"},
		{"operation": "cancel", "ids": []string{"a"}, "filter": map[string]any{}},
		{"operation": "cancel", "ids": []string{}},
		{"operation": "cancel", "ids": []string{""}},
		{"operation": "delete", "ids": []string{"a"}},
		{"operation": "migrate", "ids": []string{"a"}},
		{"operation": "cancel", "ids": []string{"a"}, "target_version": 2},
		{"operation": "retry", "filter": map[string]any{"variable": "x"}},
	} {
		if status, p := b.do(t, "POST", "/batches", body); status != http.StatusBadRequest {
			t.Errorf("POST /v1/batches %v: %d %v, want 400", body, status, p)
		}
	}
	if status, p := b.do(t, "GET", "/batches/nope", nil); status != http.StatusNotFound {
		t.Errorf("GET /v1/batches/nope: %d %v, want 404", status, p)
	}
}

// mustDo calls the admin API and fails the test on another status.
func (b *adminBundle) mustDo(t *testing.T, method, path string, body any, want int) map[string]any {
	t.Helper()
	status, p := b.do(t, method, path, body)
	if status != want {
		t.Fatalf("%s %s: %d %v, want %d", method, path, status, p, want)
	}
	return p
}

// A retry batch retries the open incidents of what its filter matches: one
// whose retry stops again in a new incident is failed, not done.
func TestABatchRetriesIncidentsAndCountsThoseThatFailAgain(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/gate.bpmn")
	for i := range 5 {
		b.mustDo(t, "POST", "/instances", map[string]any{"definition": "gate", "instance_id": fmt.Sprintf("g-%d", i)}, http.StatusCreated)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM incidents WHERE resolved_at IS NULL"); v != 5 {
		t.Fatalf("%d open incidents, want 5", v)
	}
	for i := range 4 { // g-4 keeps failing
		b.mustDo(t, "PATCH", fmt.Sprintf("/instances/g-%d/variables", i), map[string]any{"pass": 1}, http.StatusOK)
	}
	p := b.mustDo(t, "POST", "/batches", map[string]any{"operation": "retry", "filter": map[string]any{"definition": "gate"}}, http.StatusAccepted)
	var m map[string]any
	testkit.Eventually(t, time.Minute, "the retry batch done", func() bool {
		_, m = b.do(t, "GET", fmt.Sprint("/batches/", p["id"]), nil)
		return m["state"] == "done"
	})
	if m["done"] != float64(4) || m["failed"] != float64(1) || len(m["refused"].(map[string]any)) != 0 {
		t.Errorf("retry batch = %v, want 4 done, 1 failed", m)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'gate' AND status = 'completed'"); v != 4 {
		t.Errorf("%d instances completed by their retry, want 4", v)
	}
}

// A batch whose replica died (its lease lapsed) is resumed by another from
// the last instance it settled: what it had done is not done again.
func TestABatchLeftByADeadReplicaResumesFromItsCursor(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	for i := range 10 {
		id := fmt.Sprintf("s-%d", i)
		b.mustDo(t, "POST", "/instances", map[string]any{"definition": "shop", "instance_id": id, "variables": map[string]any{"orderId": id}},
			http.StatusCreated)
	}
	// As a replica leaves it that settled s-0 to s-4 (by its cursor) and
	// died: its lease lapsed a second ago.
	if _, err := b.env.DB.Exec(testkit.Ctx(t), `INSERT INTO batches (id, operation, filter, walked_to, done, locked_by, locked_until)
		VALUES ('left', 'cancel', '{"Definition": "shop"}', 's-4', 5, 'dead/admin', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	testkit.Eventually(t, time.Minute, "the batch resumed and done", func() bool {
		_, m = b.do(t, "GET", "/batches/left", nil)
		return m["state"] == "done"
	})
	if m["done"] != float64(10) || m["failed"] != float64(0) || len(m["refused"].(map[string]any)) != 0 {
		t.Errorf("resumed batch = %v, want 10 done", m)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM instances WHERE id <= 's-4' AND status = 'active'"); v != 5 {
		t.Errorf("%d of s-0..s-4, behind the cursor, still active, want 5", v)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM instances WHERE id > 's-4' AND status = 'cancelled'"); v != 5 {
		t.Errorf("%d of s-5..s-9 cancelled, want 5", v)
	}
}
