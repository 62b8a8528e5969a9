package feel

import "testing"

func TestFromAiReturnsItsValue(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=fromAi(s)`, want: "paid"},
		{src: `=fromAi(n, "the amount")`, want: 5.0},
		{src: `=fromAi(n, null, "number")`, want: 5.0},
		{src: `=fromAi(missing, "a value the agent did not give")`, want: nil},
		{src: `=fromAi(value: s, description: "status", type: "string", schema: {enum: ["paid"]}, options: {required: true})`, want: "paid"},
		{src: `={subject: fromAi(s, "subject") + "!"}.subject`, want: "paid!"},
		{src: `=fromAi(s, 1)`, err: `fromAi: argument "description" must be a string, got a number`},
		{src: `=fromAi(s, "d", "string", "schema")`, err: `fromAi: argument "schema" must be a context, got a string`},
	})
}

func TestFromAiArity(t *testing.T) {
	for _, src := range []string{`=fromAi()`, `=fromAi(1, "a", "b", {}, {}, 6)`} {
		if _, err := Compile(src); err == nil {
			t.Errorf("Compile(%s) accepted a call of the wrong arity", src)
		}
	}
}
