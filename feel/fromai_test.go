package feel

import (
	"reflect"
	"testing"
)

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

func TestAiParametersListTheFromAiCallsOfAnExpression(t *testing.T) {
	e := MustCompile(`={
  subject: fromAi(toolCall.subject, "The case's subject"),
  body: if x then fromAi(toolCall.case.text, "Its text", "string", {maxLength: 2000}, {required: true}) else "",
  count: fromAi(value: toolCall.count, type: "number"),
  skipped: fromAi("not a path"),
  also: fromAi(toolCall.who, description)
}`)
	got := e.AiParameters()
	want := []AiParameter{
		{Name: "toolCall.subject", Description: "The case's subject"},
		{Name: "toolCall.case.text", Description: "Its text", Type: "string", Schema: map[string]any{"maxLength": 2000.0}, Options: map[string]any{"required": true}},
		{Name: "toolCall.count", Type: "number"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AiParameters = %+v\nwant %+v", got, want)
	}
	if got := MustCompile(`=a + 1`).AiParameters(); got != nil {
		t.Errorf("an expression without fromAi has parameters %v", got)
	}
}
