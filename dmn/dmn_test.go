package dmn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

// doc wraps body in the definitions Camunda Modeler writes (DMN 1.3).
func doc(body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" xmlns:dmndi="https://www.omg.org/spec/DMN/20191111/DMNDI/" xmlns:camunda="http://camunda.org/schema/1.0/dmn" id="dish" name="Dish" namespace="http://camunda.org/schema/1.0/dmn">` + body + `</definitions>`
}

// tableDoc is one decision "d" with a table of one input (x) and the
// outputs and rules given; a rule is "input entry|output entry|...".
func tableDoc(attrs string, outputs []string, rules ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<decision id="d" name="D"><decisionTable id="t" %s>`, attrs)
	b.WriteString(`<input id="i1" label="x"><inputExpression typeRef="number"><text>x</text></inputExpression></input>`)
	for _, o := range outputs {
		b.WriteString(o)
	}
	for i, r := range rules {
		parts := strings.Split(r, "|")
		fmt.Fprintf(&b, `<rule id="r%d"><inputEntry><text>%s</text></inputEntry>`, i+1, xmlEscape(parts[0]))
		for _, o := range parts[1:] {
			fmt.Fprintf(&b, `<outputEntry><text>%s</text></outputEntry>`, xmlEscape(o))
		}
		b.WriteString(`</rule>`)
	}
	b.WriteString(`</decisionTable></decision>`)
	return doc(b.String())
}

func xmlEscape(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(s)
}

func mustParse(t *testing.T, src string) *Definitions {
	t.Helper()
	d, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

const oneOut = `<output id="o" name="out" typeRef="string"/>`

func TestHitPolicies(t *testing.T) {
	prio := `<output id="o" name="out" typeRef="string"><outputValues><text>"high","mid","low"</text></outputValues></output>`
	two := []string{`<output id="o1" name="a"/>`, `<output id="o2" name="b"/>`}
	cases := []struct {
		name    string
		attrs   string
		outputs []string
		rules   []string
		x       float64
		want    any
		matched []string
	}{
		{"unique", ``, []string{oneOut}, []string{`<5|"small"`, `>=5|"big"`}, 7, "big", []string{"r2"}},
		{"unique none", `hitPolicy="UNIQUE"`, []string{oneOut}, []string{`<5|"small"`}, 7, nil, nil},
		{"any agree", `hitPolicy="ANY"`, []string{oneOut}, []string{`>1|"y"`, `>2|"y"`, `<0|"n"`}, 3, "y", []string{"r1", "r2"}},
		{"first", `hitPolicy="FIRST"`, []string{oneOut}, []string{`<5|"a"`, `-|"b"`}, 3, "a", []string{"r1"}},
		{"priority", `hitPolicy="PRIORITY"`, []string{prio}, []string{`-|"low"`, `>1|"high"`, `>0|"mid"`}, 3, "high", []string{"r1", "r2", "r3"}},
		{"rule order", `hitPolicy="RULE ORDER"`, []string{oneOut}, []string{`-|"b"`, `>1|"a"`, `<0|"c"`}, 3, []any{"b", "a"}, []string{"r1", "r2"}},
		{"rule order none", `hitPolicy="RULE ORDER"`, []string{oneOut}, []string{`<0|"c"`}, 3, []any{}, nil},
		{"output order", `hitPolicy="OUTPUT ORDER"`, []string{prio}, []string{`-|"low"`, `>1|"high"`, `>0|"mid"`}, 3, []any{"high", "mid", "low"}, []string{"r1", "r2", "r3"}},
		{"collect", `hitPolicy="COLLECT"`, []string{oneOut}, []string{`-|"b"`, `>1|"a"`}, 3, []any{"b", "a"}, []string{"r1", "r2"}},
		{"collect sum", `hitPolicy="COLLECT" aggregation="SUM"`, []string{oneOut}, []string{`-|1`, `>1|2`, `>5|4`}, 3, 3.0, []string{"r1", "r2"}},
		{"collect min", `hitPolicy="COLLECT" aggregation="MIN"`, []string{oneOut}, []string{`-|5`, `>1|2`}, 3, 2.0, []string{"r1", "r2"}},
		{"collect max", `hitPolicy="COLLECT" aggregation="MAX"`, []string{oneOut}, []string{`-|5`, `>1|7`}, 3, 7.0, []string{"r1", "r2"}},
		{"collect count", `hitPolicy="COLLECT" aggregation="COUNT"`, []string{oneOut}, []string{`-|"a"`, `>1|"a"`}, 3, 2.0, []string{"r1", "r2"}},
		{"collect count none", `hitPolicy="COLLECT" aggregation="COUNT"`, []string{oneOut}, []string{`<0|"a"`}, 3, 0.0, nil},
		{"collect sum none", `hitPolicy="COLLECT" aggregation="SUM"`, []string{oneOut}, []string{`<0|1`}, 3, nil, nil},
		{"two outputs", ``, two, []string{`[1..5]|"x"|x * 2`}, 3, map[string]any{"a": "x", "b": 6.0}, []string{"r1"}},
		{"default", ``, []string{`<output id="o" name="out"><defaultOutputEntry><text>"none"</text></defaultOutputEntry></output>`}, []string{`<0|"neg"`}, 3, "none", nil},
		{"default listed", `hitPolicy="COLLECT"`, []string{`<output id="o" name="out"><defaultOutputEntry><text>"none"</text></defaultOutputEntry></output>`}, []string{`<0|"neg"`}, 3, []any{"none"}, nil},
		{"empty output cell", `hitPolicy="COLLECT"`, two, []string{`-|"x"|`, `-||`}, 3, []any{map[string]any{"a": "x", "b": nil}, map[string]any{"a": nil, "b": nil}}, []string{"r1", "r2"}},
		{"empty default", ``, []string{`<output id="o" name="out"><defaultOutputEntry><text></text></defaultOutputEntry></output>`}, []string{`<0|"neg"`}, 3, nil, nil},
		{"question mark", ``, []string{oneOut}, []string{`? > 5 and ? < 10|"mid"`, `not(? > 5 and ? < 10)|"out"`}, 7, "mid", []string{"r1"}},
		{"not and list", ``, []string{oneOut}, []string{`not(1, 2, 3)|"other"`, `1, 2, 3|"few"`}, 3, "few", []string{"r2"}},
		{"output null", ``, []string{oneOut}, []string{`>1|x / 0`}, 3, nil, []string{"r1"}},
		{"null and", ``, []string{oneOut}, []string{`? > 1 and missing|"a"`, `-|missing and x < 0`}, 3, false, []string{"r2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := mustParse(t, tableDoc(c.attrs, c.outputs, c.rules...))
			res, err := d.Evaluate(context.Background(), "d", map[string]any{"x": c.x}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Output, c.want) {
				t.Errorf("output = %#v, want %#v", res.Output, c.want)
			}
			var ids []string
			for _, m := range res.Decisions[0].Matched {
				ids = append(ids, m.ID)
			}
			if !reflect.DeepEqual(ids, c.matched) {
				t.Errorf("matched %v, want %v", ids, c.matched)
			}
		})
	}
}

func TestHitPolicyFailures(t *testing.T) {
	cases := []struct {
		name, attrs string
		rules       []string
	}{
		{"unique overlap", ``, []string{`>1|"a"`, `>2|"b"`}},
		{"any disagree", `hitPolicy="ANY"`, []string{`>1|"a"`, `>2|"b"`}},
		{"sum of strings", `hitPolicy="COLLECT" aggregation="SUM"`, []string{`>1|"a"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := mustParse(t, tableDoc(c.attrs, []string{oneOut}, c.rules...))
			_, err := d.Evaluate(context.Background(), "d", map[string]any{"x": 3.0}, Options{})
			if !fault.HasCode(err, fault.IncidentDecisionFailed) || !strings.Contains(err.Error(), `decision "d"`) {
				t.Fatalf("error = %v, want %s naming the decision", err, fault.IncidentDecisionFailed)
			}
		})
	}
}

// A DRG as Camunda Modeler draws it: input data, a decision that requires
// another, names with spaces, the required result under its name and id.
const drg = `
<inputData id="salary" name="Monthly Salary"/>
<decision id="yearly" name="Yearly Salary">
  <informationRequirement id="ir1"><requiredInput href="#salary"/></informationRequirement>
  <literalExpression id="le1"><text>12 * Monthly Salary</text></literalExpression>
</decision>
<decision id="band" name="Salary Band">
  <informationRequirement id="ir2"><requiredDecision href="#yearly"/></informationRequirement>
  <decisionTable id="t2" hitPolicy="FIRST">
    <input id="in1" label="Yearly"><inputExpression typeRef="number"><text>Yearly Salary</text></inputExpression></input>
    <output id="out1" name="band" typeRef="string"/>
    <rule id="high"><inputEntry><text>&gt;= 100000</text></inputEntry><outputEntry><text>"high"</text></outputEntry></rule>
    <rule id="low"><inputEntry><text>-</text></inputEntry><outputEntry><text>"low " + string(yearly)</text></outputEntry></rule>
  </decisionTable>
</decision>`

// bkm is a business knowledge model with a name and a parameter that have
// spaces in them.
const bkm = `<businessKnowledgeModel id="pmt" name="Monthly Payment"><encapsulatedLogic>
  <formalParameter name="loan amount"/><formalParameter name="r"/><formalParameter name="n"/>
  <literalExpression><text>(loan amount*r/12)/(1-(1+r/12)**-n)</text></literalExpression>
</encapsulatedLogic></businessKnowledgeModel>`

// A business knowledge model is called from a literal expression, in order
// or by name, or by a boxed invocation.
func TestKnowledgeModels(t *testing.T) {
	d := mustParse(t, doc(bkm+`<inputData id="a" name="Amount"/>
<decision id="call" name="Call"><literalExpression><text>Monthly Payment(Amount, 0.0375, 360)</text></literalExpression></decision>
<decision id="named" name="Named"><literalExpression><text>Monthly Payment(n: 360, loan amount: Amount, r: 0.0375)</text></literalExpression></decision>
<decision id="boxed" name="Boxed"><invocation>
  <literalExpression><text>Monthly Payment</text></literalExpression>
  <binding><parameter name="loan amount"/><literalExpression><text>Amount</text></literalExpression></binding>
  <binding><parameter name="r"/><literalExpression><text>0.0375</text></literalExpression></binding>
  <binding><parameter name="n"/><literalExpression><text>360</text></literalExpression></binding>
</invocation></decision>
<decision id="unbound" name="Unbound"><invocation>
  <literalExpression><text>Monthly Payment</text></literalExpression>
  <binding><parameter name="r"/></binding>
</invocation></decision>`))
	for id, want := range map[string]any{"call": 2778.69354943277, "named": 2778.69354943277, "boxed": 2778.69354943277, "unbound": nil} {
		res, err := d.Evaluate(context.Background(), id, map[string]any{"Amount": 600000.0}, Options{})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if f, ok := want.(float64); ok {
			if g, ok := res.Output.(float64); !ok || math.Abs(g-f) > 1e-9 {
				t.Errorf("%s = %#v, want %v", id, res.Output, want)
			}
		} else if res.Output != want {
			t.Errorf("%s = %#v, want %v", id, res.Output, want)
		}
	}
}

// Boxed expressions evaluate as the FEEL they stand for.
func TestBoxedExpressions(t *testing.T) {
	lit := func(s string) string {
		return `<literalExpression><text>` + xmlEscape(s) + `</text></literalExpression>`
	}
	entry := func(name, expr string) string {
		v := ""
		if name != "" {
			v = `<variable name="` + name + `"/>`
		}
		return `<contextEntry>` + v + expr + `</contextEntry>`
	}
	cases := map[string]struct {
		body string
		want any
	}{
		"context":   {`<context>` + entry("unit price", lit("x")) + entry("total", lit("unit price * 2")) + `</context>`, map[string]any{"unit price": 3.0, "total": 6.0}},
		"result":    {`<context>` + entry("a", lit("x + 1")) + entry("", lit("a * 10")) + `</context>`, 40.0},
		"nested":    {`<context>` + entry("inner", `<context>`+entry("b", lit("1"))+`</context>`) + entry("", lit("inner.b")) + `</context>`, 1.0},
		"list":      {`<list>` + lit("x") + lit(`"a"`) + `<literalExpression/></list>`, []any{3.0, "a", nil}},
		"relation":  {`<relation><column name="n"/><column name="s"/><row>` + lit("1") + lit(`"a"`) + `</row><row>` + lit("x") + lit(`"b"`) + `</row></relation>`, []any{map[string]any{"n": 1.0, "s": "a"}, map[string]any{"n": 3.0, "s": "b"}}},
		"if":        {`<conditional><if>` + lit("x > 2") + `</if><then>` + lit(`"big"`) + `</then><else>` + lit(`"small"`) + `</else></conditional>`, "big"},
		"filter":    {`<filter><in>` + lit("[1, 2, 3, 4]") + `</in><match>` + lit("item >= x") + `</match></filter>`, []any{3.0, 4.0}},
		"for":       {`<for iteratorVariable="i"><in>` + lit("[1, 2]") + `</in><return>` + lit("i * x") + `</return></for>`, []any{3.0, 6.0}},
		"some":      {`<some iteratorVariable="i"><in>` + lit("[1, 2]") + `</in><satisfies>` + lit("i > x") + `</satisfies></some>`, false},
		"every":     {`<every iteratorVariable="i"><in>` + lit("[4, 5]") + `</in><satisfies>` + lit("i > x") + `</satisfies></every>`, true},
		"function":  {`<context>` + entry("twice", `<functionDefinition><formalParameter name="v"/>`+lit("v * 2")+`</functionDefinition>`) + entry("", lit("twice(x)")) + `</context>`, 6.0},
		"invoke in": {`<context>` + entry("p", `<invocation>`+lit("Monthly Payment")+`<binding><parameter name="loan amount"/>`+lit("x * 200000")+`</binding><binding><parameter name="r"/>`+lit("0.0375")+`</binding><binding><parameter name="n"/>`+lit("360")+`</binding></invocation>`) + entry("", lit("floor(p)")) + `</context>`, 2778.0},
	}
	for name, c := range cases {
		d := mustParse(t, doc(bkm+`<decision id="d" name="D">`+c.body+`</decision>`))
		res, err := d.Evaluate(context.Background(), "d", map[string]any{"x": 3.0}, Options{})
		if err != nil || !reflect.DeepEqual(res.Output, c.want) {
			t.Errorf("%s: %#v, %v; want %#v", name, res, err, c.want)
		}
	}
}

// Input data of a temporal type, or a structure holding one, are read as
// such from their strings; decisions pass dates on as dates and hand them
// out as strings.
func TestTemporalValues(t *testing.T) {
	d := mustParse(t, doc(`<itemDefinition name="tOrder"><itemComponent name="due date"><typeRef>date</typeRef></itemComponent>
<itemComponent name="n"><typeRef>number</typeRef></itemComponent></itemDefinition>
<itemDefinition name="tDays" isCollection="true"><typeRef>date</typeRef></itemDefinition>
<inputData id="i1" name="Start"><variable name="Start" typeRef="date"/></inputData>
<inputData id="i2" name="Order"><variable name="Order" typeRef="tOrder"/></inputData>
<inputData id="i3" name="Days"><variable name="Days" typeRef="tDays"/></inputData>
<decision id="next" name="Next"><literalExpression><text>Start + duration("P1D")</text></literalExpression></decision>
<decision id="after" name="After">
  <informationRequirement><requiredDecision href="#next"/></informationRequirement>
  <literalExpression><text>[Next + duration("P1D"), Order.due date - Next, Days[1] &lt; Days[2], Order.n]</text></literalExpression>
</decision>`))
	vars := map[string]any{"Start": "2024-01-31", "Order": map[string]any{"due date": "2024-02-11", "n": 3.0}, "Days": []any{"2024-01-01", "2024-01-02"}}
	res, err := d.Evaluate(context.Background(), "after", vars, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"2024-02-02", "P10D", true, 3.0}
	if !reflect.DeepEqual(res.Output, want) || res.Decisions[0].Output != "2024-02-01" {
		t.Errorf("output = %#v, decisions %+v; want %#v", res.Output, res.Decisions, want)
	}
	if vars["Start"] != "2024-01-31" {
		t.Errorf("the caller's variables changed: %v", vars)
	}
}

// A decision service is a function of its input data then its input
// decisions; it evaluates its decisions in the order of their requirements and
// gives its output decision's result, or a context of several.
func TestDecisionServices(t *testing.T) {
	d := mustParse(t, doc(`<decisionService id="s1" name="Greet"><outputDecision href="#g"/><encapsulatedDecision href="#full"/>
<inputDecision href="#title"/><inputData href="#n"/></decisionService>
<decisionService id="s2" name="Both"><outputDecision href="#g"/><outputDecision href="#full"/><inputDecision href="#title"/><inputData href="#n"/></decisionService>
<inputData id="n" name="Name"/>
<decision id="title" name="Title"><literalExpression><text>"Dr"</text></literalExpression></decision>
<decision id="full" name="Full Name"><informationRequirement><requiredDecision href="#title"/></informationRequirement><literalExpression><text>Title + " " + Name</text></literalExpression></decision>
<decision id="g" name="Greeting"><informationRequirement><requiredDecision href="#full"/></informationRequirement><literalExpression><text>"Hello " + Full Name</text></literalExpression></decision>
<decision id="use" name="Use"><literalExpression><text>[Greet("Ada", "Ms"), Greet(Name: "Bo", Title: "Mr"), Both("Ada", "Ms"), Greet("Ms")]</text></literalExpression></decision>`))
	res, err := d.Evaluate(context.Background(), "use", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"Hello Ms Ada", "Hello Mr Bo", map[string]any{"Greeting": "Hello Ms Ada", "Full Name": "Ms Ada"}, nil}
	if !reflect.DeepEqual(res.Output, want) {
		t.Errorf("output = %#v, want %#v", res.Output, want)
	}
}

// A decision may give a function to the decisions requiring it; it has no
// JSON form, so it is null in the results reported, and evaluating it
// alone fails.
func TestFunctionValuedDecision(t *testing.T) {
	d := mustParse(t, doc(`<decision id="inc" name="Inc"><literalExpression><text>function(a: number) a + 1</text></literalExpression></decision>
<decision id="use" name="Use"><informationRequirement><requiredDecision href="#inc"/></informationRequirement><literalExpression><text>Inc(41)</text></literalExpression></decision>`))
	res, err := d.Evaluate(context.Background(), "use", nil, Options{})
	if err != nil || res.Output != 42.0 || res.Decisions[0].Output != nil {
		t.Errorf("Evaluate(use) = %+v, %v; want 42, the function decision null", res, err)
	}
	if _, err := d.Evaluate(context.Background(), "inc", nil, Options{}); !errors.Is(err, feel.ErrFunctionResult) || !fault.HasCode(err, fault.IncidentDecisionFailed) {
		t.Errorf("Evaluate(inc) = %v; want %s wrapping feel.ErrFunctionResult", err, fault.IncidentDecisionFailed)
	}
}

// instance of names the model's item definitions: structures, collections,
// function items, one naming another declared later.
func TestItemDefinitionsAsTypes(t *testing.T) {
	d := mustParse(t, doc(`<itemDefinition name="tOrders" isCollection="true"><typeRef>tOrder</typeRef></itemDefinition>
<itemDefinition name="tOrder"><itemComponent name="due date"><typeRef>date</typeRef></itemComponent>
<itemComponent name="n"><typeRef>number</typeRef></itemComponent></itemDefinition>
<itemDefinition name="tPrice"><functionItem outputTypeRef="number"><parameters name="o" typeRef="tOrder"/></functionItem></itemDefinition>
<itemDefinition name="tSmall"><typeRef>number</typeRef><allowedValues><text>[0..9]</text></allowedValues></itemDefinition>
<decision id="d" name="D"><literalExpression><text>[[{due date: date("2024-01-31"), n: 1}] instance of tOrders, [{n: 1}] instance of tOrders,
(function(o: tOrder) 1) instance of tPrice, (function(o: string) 1) instance of tPrice, 12 instance of tSmall]</text></literalExpression></decision>`))
	res, err := d.Evaluate(context.Background(), "d", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Allowed values do not narrow the type (as the TCK has it).
	if want := []any{true, false, true, false, true}; !reflect.DeepEqual(res.Output, want) {
		t.Errorf("output = %#v, want %#v", res.Output, want)
	}
}

// Types sharing components would multiply the coercion's source: past a
// bound the input is left as given, and Parse stays quick.
func TestCoercionOfWideTypesIsBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&b, `<itemDefinition name="t%d">`, i)
		for j := 0; j < 10; j++ {
			fmt.Fprintf(&b, `<itemComponent name="c%d"><typeRef>t%d</typeRef></itemComponent>`, j, i+1)
		}
		b.WriteString(`</itemDefinition>`)
	}
	b.WriteString(`<itemDefinition name="t8"><itemComponent name="d"><typeRef>date</typeRef></itemComponent></itemDefinition>
<inputData id="i" name="In"><variable name="In" typeRef="t0"/></inputData>
<decision id="d" name="D"><literalExpression><text>In</text></literalExpression></decision>`)
	d := mustParse(t, doc(b.String()))
	if len(d.coerce) != 0 {
		t.Fatalf("coercions = %d, want none past the bound", len(d.coerce))
	}
}

func TestRequiredDecisions(t *testing.T) {
	d := mustParse(t, doc(drg))
	if d.Version != "1.3" || d.Name != "Dish" || !reflect.DeepEqual(d.InputData, []string{"Monthly Salary"}) {
		t.Fatalf("definitions = %+v", d)
	}
	if got := d.Decision("band").Requires; !reflect.DeepEqual(got, []string{"yearly"}) {
		t.Fatalf("requires = %v", got)
	}
	res, err := d.Evaluate(context.Background(), "band", map[string]any{"Monthly Salary": 5000.0}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "low 60000" {
		t.Errorf("output = %#v", res.Output)
	}
	want := []DecisionResult{
		{ID: "yearly", Name: "Yearly Salary", Output: 60000.0},
		{ID: "band", Name: "Salary Band", Table: true, Output: "low 60000",
			Inputs:  []Evaluated{{ID: "in1", Name: "Yearly", Value: 60000.0}},
			Matched: []MatchedRule{{ID: "low", Index: 2, Outputs: []Evaluated{{ID: "out1", Name: "band", Value: "low 60000"}}}}},
	}
	if !reflect.DeepEqual(res.Decisions, want) {
		t.Errorf("decisions = %+v\nwant %+v", res.Decisions, want)
	}
}

func TestEvaluateFailures(t *testing.T) {
	d := mustParse(t, doc(drg))
	ctx := context.Background()
	if _, err := d.Evaluate(ctx, "nope", nil, Options{}); !fault.HasCode(err, fault.IncidentDecisionFailed) {
		t.Errorf("unknown decision: %v", err)
	}
	// A missing input is null; as DMN's FEEL has it, 12 * null is null
	// rather than a failure, and so is "low " + string(null).
	res, err := d.Evaluate(ctx, "band", nil, Options{})
	if err != nil || res.Output != nil || res.Decisions[0].Output != nil {
		t.Errorf("missing input: %+v, %v; want null", res, err)
	}
	past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, err = d.Evaluate(past, "band", map[string]any{"Monthly Salary": 1.0}, Options{})
	if !fault.HasCode(err, fault.IncidentExpressionLimit) || !feel.IsLimit(err) {
		t.Errorf("past deadline: %v", err)
	}
	cancelled, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := d.Evaluate(cancelled, "band", map[string]any{"Monthly Salary": 1.0}, Options{}); !fault.HasCode(err, fault.IncidentDecisionFailed) || feel.IsLimit(err) {
		t.Errorf("cancelled: %v", err)
	}
}

// A failed evaluation names the decision that failed and keeps what the
// decisions before it evaluated to, as Zeebe reports it.
func TestAFailureNamesTheFailedDecisionAndKeepsThoseBefore(t *testing.T) {
	unique := strings.NewReplacer(`hitPolicy="FIRST"`, `hitPolicy="UNIQUE"`, `&gt;= 100000`, `-`).Replace(drg)
	d := mustParse(t, doc(unique))
	_, err := d.Evaluate(context.Background(), "band", map[string]any{"Monthly Salary": 10.0}, Options{})
	var f *Failure
	if !errors.As(err, &f) || !fault.HasCode(err, fault.IncidentDecisionFailed) || !strings.Contains(err.Error(), "UNIQUE") {
		t.Fatalf("err = %v, want a *Failure with %s naming the hit policy", err, fault.IncidentDecisionFailed)
	}
	want := []DecisionResult{{ID: "yearly", Name: "Yearly Salary", Output: 120.0}, {ID: "band", Name: "Salary Band", Table: true}}
	if f.DecisionID != "band" || !reflect.DeepEqual(f.Evaluated, want) {
		t.Errorf("failure at %q after %+v, want band after %+v", f.DecisionID, f.Evaluated, want)
	}
}

// An input entry over a large variable is bounded by the expression limits.
func TestEvaluateLimits(t *testing.T) {
	d := mustParse(t, tableDoc(``, []string{oneOut}, `big|"in"`))
	big := make([]any, 10000)
	for i := range big {
		big[i] = float64(i)
	}
	_, err := d.Evaluate(context.Background(), "d", map[string]any{"x": -1.0, "big": big}, Options{Env: feel.Env{Limits: feel.Limits{MaxSteps: 1000}}})
	if !fault.HasCode(err, fault.IncidentExpressionLimit) || !feel.IsLimit(err) {
		t.Fatalf("error = %v, want %s", err, fault.IncidentExpressionLimit)
	}
}

func TestParseRefused(t *testing.T) {
	table := func(body string) string {
		return doc(`<decision id="d" name="D"><decisionTable>` + body + `</decisionTable></decision>`)
	}
	in := `<input><inputExpression><text>x</text></inputExpression></input>`
	cases := []struct {
		name, src, code, says string
	}{
		{"not xml", "<definitions", fault.DMNInvalid, "reading"},
		{"bpmn", `<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"/>`, fault.DMNInvalid, "not the definitions"},
		{"dmn 1.1", `<definitions xmlns="http://www.omg.org/spec/DMN/20151101/dmn.xsd"/>`, fault.DMNInvalid, "not the definitions"},
		{"deep", doc(strings.Repeat("<x:a xmlns:x='urn:x'>", MaxDepth) + strings.Repeat("</x:a>", MaxDepth)), fault.DMNInvalid, "dmn.MaxDepth"},
		{"many", doc(strings.Repeat("<x:b xmlns:x='urn:x'/>", MaxElements)), fault.DMNInvalid, "dmn.MaxElements"},
		{"large", doc(strings.Repeat(" ", MaxBytes)), fault.DMNInvalid, "dmn.MaxBytes"},
		{"no logic", doc(`<decision id="d" name="D"/>`), fault.DMNInvalid, "neither"},
		{"duplicate", doc(`<decision id="d" name="A"><literalExpression><text>1</text></literalExpression></decision><decision id="d" name="B"><literalExpression><text>2</text></literalExpression></decision>`), fault.DMNInvalid, "two decisions"},
		{"missing requirement", doc(`<decision id="d" name="D"><informationRequirement><requiredDecision href="#e"/></informationRequirement><literalExpression><text>1</text></literalExpression></decision>`), fault.DMNInvalid, `"e"`},
		{"cycle", doc(`<decision id="a" name="A"><informationRequirement><requiredDecision href="#b"/></informationRequirement><literalExpression><text>B</text></literalExpression></decision><decision id="b" name="B"><informationRequirement><requiredDecision href="#a"/></informationRequirement><literalExpression><text>A</text></literalExpression></decision>`), fault.DMNInvalid, "requires itself"},
		{"bad expression", doc(`<decision id="d" name="D"><literalExpression><text>1 +</text></literalExpression></decision>`), fault.DMNInvalid, "literal expression"},
		{"bad entry", table(in + oneOut + `<rule id="r"><inputEntry><text>&lt;</text></inputEntry><outputEntry><text>1</text></outputEntry></rule>`), fault.DMNInvalid, `rule "r" input entry 1`},
		{"short rule", table(in + oneOut + `<rule id="r"><outputEntry><text>1</text></outputEntry></rule>`), fault.DMNInvalid, `rule "r"`},
		{"hit policy", doc(`<decision id="d" name="D"><decisionTable hitPolicy="SOME">` + in + oneOut + `</decisionTable></decision>`), fault.DMNInvalid, "SOME"},
		{"aggregation without collect", doc(`<decision id="d" name="D"><decisionTable hitPolicy="FIRST" aggregation="SUM">` + in + oneOut + `</decisionTable></decision>`), fault.DMNInvalid, "COLLECT"},
		{"no output", table(in), fault.DMNInvalid, "no output"},
		{"variable output values", table(in + `<output name="o"><outputValues><text>x</text></outputValues></output>`), fault.DMNInvalid, "not constants"},
		{"bkm without logic", doc(`<businessKnowledgeModel id="k" name="K"/>`), fault.DMNInvalid, "no encapsulated logic"},
		{"bkm table", doc(`<businessKnowledgeModel id="k" name="K"><encapsulatedLogic><decisionTable/></encapsulatedLogic></businessKnowledgeModel>`), fault.DMNUnsupported, "a <decisionTable> as its logic is not supported"},
		{"service without output", doc(`<decisionService id="s" name="S"/>`), fault.DMNInvalid, "has no output decision"},
		{"service of a table", doc(`<decisionService id="s" name="S"><outputDecision href="#d"/></decisionService><decision id="d" name="D"><decisionTable/></decision>`), fault.DMNUnsupported, "decision \"d\" is a decision table"},
		{"service input unknown", doc(`<decisionService id="s" name="S"><inputData href="#x"/></decisionService>`), fault.DMNInvalid, "is not in the file"},
		{"java function", doc(`<decision id="d" name="D"><functionDefinition kind="Java"/></decision>`), fault.DMNUnsupported, "kind Java"},
		{"table in context", doc(`<decision id="d" name="D"><context><contextEntry><decisionTable/></contextEntry></context></decision>`), fault.DMNUnsupported, "<decisionTable> is not supported inside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.src))
			if !fault.HasCode(err, c.code) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error = %v, want %s saying %q", err, c.code, c.says)
			}
		})
	}
}

// Parse reads the namespaces of DMN 1.3, 1.4 and 1.5.
func TestVersions(t *testing.T) {
	for ns, v := range versions {
		src := `<definitions xmlns="` + ns + `" id="x"><decision id="d" name="D"><literalExpression><text>"ok"</text></literalExpression></decision></definitions>`
		d := mustParse(t, src)
		res, err := d.Evaluate(context.Background(), "d", nil, Options{})
		if d.Version != v || err != nil || res.Output != "ok" {
			t.Errorf("%s: version %q, %v, %v", ns, d.Version, res, err)
		}
	}
}

func TestQuote(t *testing.T) {
	q := newQuoter(map[string]bool{"Monthly Salary": true, "Monthly Salary Max": true, "plain": true, "a-b": true})
	cases := map[string]string{
		"12 * Monthly Salary":                 "12 * `Monthly Salary`",
		"Monthly Salary Max - Monthly Salary": "`Monthly Salary Max` - `Monthly Salary`",
		`"Monthly Salary" + plain`:            `"Monthly Salary" + plain`,
		"`Monthly Salary`":                    "`Monthly Salary`",
		"xMonthly Salary":                     "xMonthly Salary",
		"Monthly Salaryx":                     "Monthly Salaryx",
		"a-b + a - b":                         "`a-b` + a - b",
		`"esc \" Monthly Salary"`:             `"esc \" Monthly Salary"`,
	}
	for in, want := range cases {
		if got, err := q.quote(in); err != nil || got != want {
			t.Errorf("quote(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	d := mustParse(t, doc(drg))
	done := make(chan error)
	for i := range 8 {
		go func() {
			res, err := d.Evaluate(context.Background(), "band", map[string]any{"Monthly Salary": float64(i * 10000)}, Options{})
			if err == nil && i >= 1 && res.Output != "high" {
				err = fmt.Errorf("salary %d: %v", i*10000, res.Output)
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// Many names sharing a first word, written in a long expression, would take
// time quadratic in the file's size to find: refused once over the budget.
func TestQuoteWorkBounded(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, `<inputData id="i%d" name="a %s%d"/>`, i, strings.Repeat("b", 100), i)
	}
	b.WriteString(`<decision id="d" name="D"><literalExpression><text>`)
	b.WriteString(strings.Repeat("a + ", 250_000) + "a")
	b.WriteString(`</text></literalExpression></decision>`)
	start := time.Now()
	_, err := Parse(strings.NewReader(doc(b.String())))
	if !fault.HasCode(err, fault.DMNInvalid) || !strings.Contains(err.Error(), "too much work") {
		t.Fatalf("error = %v, want %s for too much work", err, fault.DMNInvalid)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("refusing took %v", took)
	}
}

// An input without a label is named by its expression, as the Modeler
// shows it.
func TestInputNames(t *testing.T) {
	d := mustParse(t, doc(`<decision id="d" name="D"><decisionTable><input id="i"><inputExpression><text>x + 1</text></inputExpression></input>`+
		oneOut+`<rule id="r"><inputEntry><text>-</text></inputEntry><outputEntry><text>"a"</text></outputEntry></rule></decisionTable></decision>`))
	res, err := d.Evaluate(context.Background(), "d", map[string]any{"x": 1.0}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Decisions[0].Inputs, []Evaluated{{ID: "i", Name: "x + 1", Value: 2.0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("inputs = %+v, want %+v", got, want)
	}
}

// A decision sees the results of the decisions it requires directly, and
// not those of their own requirements.
func TestScopeIsDirectRequirements(t *testing.T) {
	d := mustParse(t, doc(`
<decision id="c" name="C"><literalExpression><text>1</text></literalExpression></decision>
<decision id="b" name="B"><informationRequirement><requiredDecision href="#c"/></informationRequirement><literalExpression><text>C + 1</text></literalExpression></decision>
<decision id="a" name="A"><informationRequirement><requiredDecision href="#b"/></informationRequirement><literalExpression><text>[B, c = null, C = null]</text></literalExpression></decision>`))
	res, err := d.Evaluate(context.Background(), "a", map[string]any{"C": nil}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{2.0, true, true}; !reflect.DeepEqual(res.Output, want) {
		t.Errorf("output = %#v, want %#v", res.Output, want)
	}
	if len(res.Decisions) != 3 {
		t.Errorf("decisions = %+v, want c, b and a", res.Decisions)
	}
}

// A DRG as Camunda Modeler 5 saves it for Camunda 8 (modeled on Camunda's
// dish example): the result of the required decision "dish" is read by
// its id, empty input cells match anything, COLLECT lists the beverages.
func TestModelerDRG(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "dinner.dmn"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		season   string
		guests   float64
		children bool
		want     []any
	}{
		{"Fall", 4, false, []any{"Aecht Schlenkerla Rauchbier", "Water"}},
		{"Winter", 10, true, []any{"Guiness", "Apple Juice", "Water"}},
		{"Summer", 2, false, []any{"Pinot Noir", "Water"}},
	}
	for _, c := range cases {
		vars := map[string]any{"season": c.season, "guestCount": c.guests, "guestsWithChildren": c.children}
		res, err := d.Evaluate(context.Background(), "beverages", vars, Options{})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !reflect.DeepEqual(res.Output, c.want) {
			t.Errorf("%+v: beverages = %#v, want %#v", c, res.Output, c.want)
		}
	}
	// No rule of the unique table matches: null, and no beverage but water.
	res, err := d.Evaluate(context.Background(), "beverages", map[string]any{"season": "Monsoon", "guestCount": 3.0, "guestsWithChildren": false}, Options{})
	if err != nil || !reflect.DeepEqual(res.Output, []any{"Water"}) || res.Decisions[0].Output != nil {
		t.Errorf("unknown season: %+v, %v", res, err)
	}
}
