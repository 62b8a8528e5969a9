package feel_test

import (
	"fmt"
	"time"

	"github.com/sutra-run/worker/feel"
)

func Example() {
	cond := feel.MustCompile(`=order.total > 100 and order.status = "paid"`)
	vars := map[string]any{"order": map[string]any{"total": 150.0, "status": "paid"}}
	ok, err := cond.EvalBool(vars)
	fmt.Println(ok, err)

	key := feel.MustCompile(`=order.id`)
	id, err := key.EvalString(map[string]any{"order": map[string]any{"id": 42.0}})
	fmt.Println(id, err)

	_, err = feel.Compile(`=order.total == 100`)
	fmt.Println(err)
	// Output:
	// true <nil>
	// 42 <nil>
	// SUTRA.BPMN.EXPRESSION: expression "=order.total == 100": == is not FEEL; use = for equality at position 14
}

func ExampleExpr_EvalAt() {
	due := feel.MustCompile(`=date(order.placed) + duration("P30D")`)
	v, err := due.Eval(map[string]any{"order": map[string]any{"placed": "2024-01-31"}})
	fmt.Println(v, err) // a date comes out as its ISO 8601 string

	overdue := feel.MustCompile(`=today() > date(order.due)`)
	now := time.Date(2024, 3, 5, 12, 0, 0, 0, time.UTC)
	ok, err := overdue.EvalBoolAt(map[string]any{"order": map[string]any{"due": "2024-03-01"}}, now)
	fmt.Println(overdue.UsesClock(), ok, err)

	_, err = overdue.EvalBool(map[string]any{"order": map[string]any{"due": "2024-03-01"}})
	fmt.Println(err)
	// Output:
	// 2024-03-01 <nil>
	// true true <nil>
	// feel: evaluating "=today() > date(order.due)": today: the current time is not available here
}
