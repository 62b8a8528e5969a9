package feel

import (
	"errors"
	"reflect"
	"runtime"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// FuzzCompile checks that Compile never panics and refuses only with
// fault.BPMNExpression, that a compiled expression evaluates without a
// run-time panic, and that its canonical String compiles to an expression that
// prints the same and evaluates the same.
func FuzzCompile(f *testing.F) {
	for _, src := range []string{
		`=order.total > 100 and status = "paid"`,
		`=not(a) or not b and c != null`,
		`=-(n + 1.5) * 2 / i - jn`,
		`=order.customer.id = "c-1"`,
		`=s + "\u00e9\n\"" = "paid"`,
		`=missing != null and missing > 5`,
		`=(a = b) = (c < d)`,
		`=.5 + 007`,
		`=x == 1`, `=f(x)`, `=[1]`, `=not a = b`, `=1 < 2 < 3`, `=if a then b else c`,
		`="unterminated`, `=1/0`, `=a.`, `PT15M`, `=`, "=\xff",
	} {
		f.Add(src)
	}
	env := vars()
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src)
		if err != nil {
			if !fault.HasCode(err, fault.BPMNExpression) {
				t.Fatalf("Compile(%q) error %v has code %q", src, err, fault.Code(err))
			}
			return
		}
		v1, err1 := e.Eval(env)
		// expr's VM turns panics into errors, so a helper bug (nil map,
		// bad type assertion) would otherwise pass as an evaluation error.
		if re := runtime.Error(nil); errors.As(err1, &re) {
			t.Fatalf("Eval(%q) panicked: %v", src, err1)
		}
		_, _ = e.EvalBool(env)
		_, _ = e.EvalString(env)

		canon := e.String()
		e2, err := Compile(canon)
		if err != nil {
			t.Fatalf("Compile(%q) succeeded but its canonical form %q is refused: %v", src, canon, err)
		}
		if again := e2.String(); again != canon {
			t.Fatalf("canonical form is not stable: %q -> %q -> %q", src, canon, again)
		}
		v2, err2 := e2.Eval(env)
		if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("%q = %#v, %v but canonical %q = %#v, %v", src, v1, err1, canon, v2, err2)
		}
	})
}
