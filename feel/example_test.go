package feel_test

import (
	"fmt"

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
