package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
)

// A modification's preflight says what it would do, writing nothing; the
// modification moves the token as one admin step under its claim, refused
// whole (409, nothing written) while another owner holds the instance.
func TestAModificationMovesATokenAfterItsPreflight(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, func(c *app.Config) { c.ClaimTimeout = 5 * time.Minute })
	b.mustDo(t, "POST", "/instances", map[string]any{"definition": "shop", "instance_id": "m-1", "variables": map[string]any{"orderId": "m-1", "topic": "ship"}},
		http.StatusCreated)
	move := map[string]any{"cancel": []string{"t1"}, "activate": []string{"Task_Ship"}, "variables": map[string]any{"note": "paid by phone"}}

	p := b.mustDo(t, "POST", "/instances/m-1/modification/preflight", move, http.StatusOK)
	tokens, _ := p["tokens"].([]any)
	if p["ok"] != true || len(tokens) != 1 || tokens[0].(map[string]any)["element"] != "Task_Ship" || tokens[0].(map[string]any)["wait"] != "task" {
		t.Errorf("preflight = %v, want one token waiting at Task_Ship", p)
	}
	p = b.mustDo(t, "POST", "/instances/m-1/modification/preflight", map[string]any{"activate": []string{"Nope"}}, http.StatusOK)
	if p["ok"] != false || p["status"] != float64(422) || p["code"] != "SUTRA.ADMIN.MODIFY.REFUSED" {
		t.Errorf("preflight of an unknown element = %v, want the 422 refusal", p)
	}
	before := b.snapshot(t, "m-1")

	// Another owner holds m-1: refused, nothing written.
	if _, err := b.env.DB.Exec(testkit.Ctx(t), `INSERT INTO claims (instance_id, owner) VALUES ('m-1', 'elsewhere/lane/0')`); err != nil {
		t.Fatal(err)
	}
	if status, p := b.do(t, "POST", "/instances/m-1/modification", move); status != http.StatusConflict || p["code"] != "SUTRA.ADMIN.MODIFY.CLAIM_HELD" {
		t.Errorf("a modification of a held instance: %d %v, want 409 SUTRA.ADMIN.MODIFY.CLAIM_HELD", status, p)
	}
	if _, err := b.env.DB.Exec(testkit.Ctx(t), `DELETE FROM claims WHERE instance_id = 'm-1'`); err != nil {
		t.Fatal(err)
	}
	if after := b.snapshot(t, "m-1"); after != before {
		t.Errorf("a refused modification changed m-1:\n%s\nwas\n%s", after, before)
	}
	if status, p := b.do(t, "POST", "/instances/m-1/modification", map[string]any{"cancel": []string{"t1"}}); status != http.StatusUnprocessableEntity ||
		p["code"] != "SUTRA.ADMIN.MODIFY.REFUSED" {
		t.Errorf("a modification leaving no token: %d %v, want 422", status, p)
	}

	p = b.mustDo(t, "POST", "/instances/m-1/modification", move, http.StatusOK)
	tokens, _ = p["tokens"].([]any)
	if p["status"] != "active" || len(tokens) != 1 || tokens[0].(map[string]any)["element"] != "Task_Ship" {
		t.Errorf("modification = %v, want m-1 active with its token at Task_Ship", p)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE instance_id = 'm-1'"); v != 0 {
		t.Errorf("%d subscriptions of m-1 left open by the moved token", v)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'm-1' AND element_id = 'Task_Ship'"); v != 1 {
		t.Errorf("%d Task_Ship tasks of m-1, want 1", v)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM step_history WHERE instance_id = 'm-1' AND cause = 'admin_modify'"); v != 1 {
		t.Errorf("%d admin_modify steps in m-1's history, want 1", v)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'm-1' AND variables->>'note' = 'paid by phone'"); v != 1 {
		t.Error("the modification's variables were not merged")
	}
	b.env.AssertNoClaimsHeld(t)
}
