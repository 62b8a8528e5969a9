package usecase_test

import (
	"testing"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/operations"
	"github.com/sutra-run/worker/usecase"
)

func TestAnInstanceIsStartedGivenVariablesAndCancelledEachAsAnAnsweredStep(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uc, ctx, conn := b.w.UseCases(), t.Context(), usecase.Conn{}
	status := func() (st string, vars map[string]any) {
		t.Helper()
		if err := b.env.DB.QueryRow(ctx, `SELECT status, variables FROM instances WHERE id = 'a-1'`).Scan(&st, &vars); err != nil {
			t.Fatal(err)
		}
		return st, vars
	}

	idled := 0
	if err := uc.StartInstance(ctx, usecase.Conn{Idle: func() { idled++ }}, "a-1", "tasks", 0,
		map[string]any{"topic": "adm", "timeout": "PT1H"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := status(); st != "active" || idled != 1 {
		t.Fatalf("after the start the instance is %q and the call gave its connection back %d times, want active and 1", st, idled)
	}
	if err := uc.StartInstance(ctx, conn, "a-1", "tasks", 0, nil); fault.Code(err) != fault.InstanceExists {
		t.Errorf("a second start of a-1: %v, want %s", err, fault.InstanceExists)
	}
	if err := uc.SetVariables(ctx, conn, "a-1", map[string]any{"x": 1.0}); err != nil {
		t.Fatal(err)
	}
	if _, vars := status(); vars["x"] != 1.0 || vars["topic"] != "adm" {
		t.Errorf("variables after the merge: %v, want x added to topic", vars)
	}

	// Another owner holds the instance: refused, nothing waits or changes.
	if _, err := b.env.DB.Exec(ctx, `INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('a-1', 'elsewhere/lane/0', now())`); err != nil {
		t.Fatal(err)
	}
	if err := uc.CancelInstance(ctx, conn, "a-1"); fault.Code(err) != operations.ClaimHeld(operations.OpCancel) {
		t.Errorf("a cancel while another owner holds the claim: %v, want %s", err, operations.ClaimHeld(operations.OpCancel))
	}
	if _, err := b.env.DB.Exec(ctx, `DELETE FROM claims WHERE instance_id = 'a-1'`); err != nil {
		t.Fatal(err)
	}
	if st, _ := status(); st != "active" {
		t.Fatalf("a refused cancel left the instance %q", st)
	}

	if err := uc.CancelInstance(ctx, conn, "a-1"); err != nil {
		t.Fatal(err)
	}
	if st, _ := status(); st != "cancelled" {
		t.Errorf("after the cancel the instance is %q, want cancelled", st)
	}
}
