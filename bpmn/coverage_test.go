package bpmn

import (
	"slices"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

func parseBody(t *testing.T, body, defs string) *Process {
	t.Helper()
	return mustParse(t, doc(body, defs))
}

func TestParseUserTasks(t *testing.T) {
	p := parseBody(t, `<bpmn:extensionElements><zeebe:userTaskForm id="userTaskForm_1">{"components":[]}</zeebe:userTaskForm></bpmn:extensionElements>
		<bpmn:startEvent id="S"><bpmn:extensionElements><zeebe:formDefinition formKey="camunda-forms:bpmn:userTaskForm_1" /></bpmn:extensionElements></bpmn:startEvent>
		<bpmn:userTask id="Native"><bpmn:extensionElements>
			<zeebe:userTask />
			<zeebe:formDefinition formId="invoice-form" />
			<zeebe:assignmentDefinition assignee="=owner" candidateGroups="sales, managers" candidateUsers="=reviewers" />
			<zeebe:taskSchedule dueDate="2026-01-01T09:00:00Z" followUpDate="=followUp" />
			<zeebe:priorityDefinition priority="80" />
		</bpmn:extensionElements></bpmn:userTask>
		<bpmn:userTask id="Job"><bpmn:extensionElements>
			<zeebe:formDefinition formKey="camunda-forms:bpmn:userTaskForm_1" />
			<zeebe:taskHeaders><zeebe:header key="k" value="v" /></zeebe:taskHeaders>
		</bpmn:extensionElements></bpmn:userTask>
		<bpmn:userTask id="Bare" />`, "")
	native := p.Element("Native")
	if native.Kind != KindTask || !native.User.Native || native.Task.Type.Source() != "" || native.User.FormID != "invoice-form" {
		t.Fatalf("native = %+v %+v", native, native.User)
	}
	u := native.User
	if u.Assignee.Source() != "=owner" || u.CandidateGroups.Source() != "sales, managers" || u.CandidateUsers.Source() != "=reviewers" ||
		u.DueDate.Source() != "2026-01-01T09:00:00Z" || u.FollowUpDate.Source() != "=followUp" || u.Priority.Source() != "80" {
		t.Errorf("user task fields = %+v", u)
	}
	job := p.Element("Job")
	if job.User.Native || job.Task.Type.Source() != UserTaskType || job.User.FormKey != "camunda-forms:bpmn:userTaskForm_1" || job.Task.Headers["k"] != "v" {
		t.Errorf("job-worker user task = %+v %+v", job.Task, job.User)
	}
	if bare := p.Element("Bare"); bare.Kind != KindTask || bare.User == nil || bare.User.Priority != nil || bare.Task.Retries.Source() != "3" {
		t.Errorf("bare user task = %+v", bare)
	}
}

func TestParseRefusesBadUserTaskValues(t *testing.T) {
	for _, tt := range []struct{ name, ext, want string }{
		{"priority out of range", `<zeebe:priorityDefinition priority="101" />`, `priority 101 is not a whole number from 0 to 100`},
		{"due date without zone", `<zeebe:taskSchedule dueDate="2026-01-01T09:00:00" />`, `due date of "U": invalid date-time "2026-01-01T09:00:00": no time zone`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:userTask id="U"><bpmn:extensionElements><zeebe:userTask />`+tt.ext+`</bpmn:extensionElements></bpmn:userTask>`, "")))
			if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %s containing %q", err, fault.BPMNInvalid, tt.want)
			}
		})
	}
}

func TestParseMessageStartEvents(t *testing.T) {
	p := parseBody(t, `<bpmn:startEvent id="ByMessage"><bpmn:extensionElements><zeebe:ioMapping><zeebe:output source="=id" target="orderId" /></zeebe:ioMapping></bpmn:extensionElements>
		<bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent><bpmn:receiveTask id="R" messageRef="M1" />
		<bpmn:sequenceFlow id="F" sourceRef="ByMessage" targetRef="R" />`, msgDefs)
	if p.Start != nil {
		t.Errorf("Start = %v, want nil: the process has no none start event", p.Start.ID)
	}
	starts := p.MessageStarts()
	if len(starts) != 1 || starts[0].ID != "ByMessage" || starts[0].Message.Name != "m2" || len(starts[0].Outputs) != 1 {
		t.Fatalf("MessageStarts = %+v", starts)
	}
	if got := p.MessageNames(); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("MessageNames = %v: a message start starts instances, no instance waits for it", got)
	}
	both := parseBody(t, `<bpmn:startEvent id="None" /><bpmn:startEvent id="ByMessage"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent>`, msgDefs)
	if both.Start == nil || both.Start.ID != "None" || len(both.MessageStarts()) != 1 {
		t.Errorf("none + message start: %+v %+v", both.Start, both.MessageStarts())
	}
	_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="A"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent>
		<bpmn:startEvent id="B"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent>`, msgDefs)))
	if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), `"A" and "B" wait for the same message "m2"`) {
		t.Errorf("duplicate message starts: %v", err)
	}
}

func TestParseTimerStartEvents(t *testing.T) {
	timer := func(id, kind, value string) string {
		return `<bpmn:startEvent id="` + id + `"><bpmn:timerEventDefinition><bpmn:` + kind + `>` + value + `</bpmn:` + kind + `></bpmn:timerEventDefinition></bpmn:startEvent>`
	}
	p := parseBody(t, timer("Hourly", "timeCycle", "R/PT1H")+timer("Once", "timeDate", "2030-10-10T12:00:00Z")+
		timer("Soon", "timeDuration", "PT5M")+timer("Computed", "timeDate", `=now() + duration("PT1M")`)+
		timer("Constant", "timeCycle", `="R3/" + "PT10M"`)+`<bpmn:endEvent id="E" />`+
		`<bpmn:sequenceFlow id="F" sourceRef="Hourly" targetRef="E" />`, "")
	var ids []string
	for _, s := range p.TimerStarts() {
		if s.Kind != KindStart || s.Timer == nil || s.Parent != nil {
			t.Errorf("timer start %+v", s)
		}
		ids = append(ids, s.ID)
	}
	if !slices.Equal(ids, []string{"Hourly", "Once", "Soon", "Computed", "Constant"}) || p.Start != nil || len(p.MessageStarts()) != 0 {
		t.Errorf("TimerStarts = %v, Start = %v", ids, p.Start)
	}
	if k := p.Element("Soon").Timer.Kind; k != TimerDuration {
		t.Errorf("Soon is a %v timer", k)
	}
	both := parseBody(t, `<bpmn:startEvent id="S" />`+timer("T", "timeCycle", "R/PT1H"), "")
	if both.Start == nil || len(both.TimerStarts()) != 1 {
		t.Errorf("none + timer start: %v %v", both.Start, both.TimerStarts())
	}
	// A value is evaluated when the process is deployed, without variables
	// (as Zeebe does): one that reads a variable, or is not a timer value, is
	// refused then.
	for _, tt := range []struct{ name, body, want string }{
		{"a variable", timer("T", "timeCycle", "=cycle"), `timer start event "T", evaluated without variables as at deploy: evaluates to null`},
		{"a number", timer("T", "timeCycle", "=1 + 1"), `evaluates to float64, want ISO-8601 text`},
		{"a bad cycle", timer("T", "timeCycle", `="R/" + "P0D"`), `timer start event "T", evaluated without variables as at deploy: invalid ISO 8601 cycle "R/P0D"`},
		{"a bad static date", timer("T", "timeDate", "tomorrow"), `timer "T": timeDate`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(doc(tt.body, "")))
			if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %s containing %q", err, fault.BPMNInvalid, tt.want)
			}
		})
	}
}

func TestParseMessageNameExpressions(t *testing.T) {
	defs := `<bpmn:message id="Const" name="=&quot;order-&quot; + &quot;placed&quot;" />
		<bpmn:message id="Dyn" name="=&quot;reply-&quot; + channel"><bpmn:extensionElements><zeebe:subscription correlationKey="=id" /></bpmn:extensionElements></bpmn:message>`
	p := parseBody(t, `<bpmn:startEvent id="Start"><bpmn:messageEventDefinition messageRef="Const" /></bpmn:startEvent>
		<bpmn:receiveTask id="R1" messageRef="Dyn" /><bpmn:receiveTask id="R2" messageRef="Dyn" /><bpmn:receiveTask id="R3" messageRef="M1" />
		<bpmn:eventBasedGateway id="G" /><bpmn:intermediateCatchEvent id="C1"><bpmn:messageEventDefinition messageRef="Dyn" /></bpmn:intermediateCatchEvent>
		<bpmn:intermediateCatchEvent id="C2"><bpmn:messageEventDefinition messageRef="Dyn" /></bpmn:intermediateCatchEvent>
		<bpmn:sequenceFlow id="F1" sourceRef="G" targetRef="C1" /><bpmn:sequenceFlow id="F2" sourceRef="G" targetRef="C2" />`, msgDefs+defs)
	// A constant name is evaluated at deploy, as Zeebe does: a message start may have one.
	if m := p.MessageStarts()[0].Message; m.Name != "order-placed" || m.NameExpression != nil {
		t.Errorf("constant name = %+v", m)
	}
	dyn := p.Element("R1").Message
	if dyn.Name != "" || dyn.NameExpression.Source() != `="reply-" + channel` || dyn.CorrelationKey == nil || p.Element("R2").Message != dyn {
		t.Errorf("name expression = %+v", dyn)
	}
	// Two waits of one event-based gateway on one name expression may differ once evaluated.
	if got := p.MessageNames(); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("MessageNames = %v: a name expression is known only when evaluated", got)
	}
	_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:receiveTask id="R" messageRef="N" />`, `<bpmn:message id="N" name="=1 + 1" />`)))
	if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), `message "N": name "=1 + 1" evaluates to 2, not a non-empty string`) {
		t.Errorf("a constant name that is no string: %v", err)
	}
}

func TestParseThrownCodeExpressions(t *testing.T) {
	defs := msgDefs + `<bpmn:error id="EC" errorCode="=&quot;BO&quot; + &quot;OM&quot;" />
		<bpmn:escalation id="SX" escalationCode="=level" /><bpmn:escalation id="SC" escalationCode="=&quot;LATE&quot;" />`
	p := parseBody(t, `<bpmn:startEvent id="S" /><bpmn:endEvent id="Dyn"><bpmn:errorEventDefinition errorRef="EX" /></bpmn:endEvent>
		<bpmn:endEvent id="Const"><bpmn:errorEventDefinition errorRef="EC" /></bpmn:endEvent>
		<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" /><bpmn:intermediateThrowEvent id="Up"><bpmn:escalationEventDefinition escalationRef="SX" /></bpmn:intermediateThrowEvent>
		<bpmn:endEvent id="UpEnd"><bpmn:escalationEventDefinition escalationRef="SC" /></bpmn:endEvent></bpmn:subProcess>`, defs)
	if c := p.Element("Dyn").Error; c.Code != "" || c.Expression.Source() != "=code" {
		t.Errorf("error code expression = %+v", c)
	}
	if c := p.Element("Const").Error; c.Code != "BOOM" || c.Expression != nil {
		t.Errorf("constant error code = %+v", c)
	}
	if c := p.Element("Up").Escalation; c.Code != "" || c.Expression.Source() != "=level" {
		t.Errorf("escalation code expression = %+v", c)
	}
	if c := p.Element("UpEnd").Escalation; c.Code != "LATE" {
		t.Errorf("constant escalation code = %+v", c)
	}
	for _, tt := range []struct{ name, body, defs, code, want string }{
		{"a constant that is no string", `<bpmn:endEvent id="E"><bpmn:errorEventDefinition errorRef="N" /></bpmn:endEvent>`, `<bpmn:error id="N" errorCode="=42" />`,
			fault.BPMNInvalid, `element "E": errorCode "=42" evaluates to 42, not a non-empty string`},
		{"an escalation catch", `<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" /></bpmn:subProcess><bpmn:boundaryEvent id="B" attachedToRef="Sub"><bpmn:escalationEventDefinition escalationRef="SX" /></bpmn:boundaryEvent>`,
			defs, fault.BPMNUnsupported, `element "B" catches escalation "SX", whose escalationCode is an expression ("=level")`},
		{"an error start of an event subprocess", `<bpmn:subProcess id="ESP" triggeredByEvent="true"><bpmn:startEvent id="ES"><bpmn:errorEventDefinition errorRef="EC" /></bpmn:startEvent></bpmn:subProcess>`,
			defs, fault.BPMNUnsupported, `element "ES" catches error "EC"`},
		{"a code that does not compile", `<bpmn:endEvent id="E"><bpmn:errorEventDefinition errorRef="N" /></bpmn:endEvent>`, `<bpmn:error id="N" errorCode="=(" />`,
			fault.BPMNExpression, `error errorCode of "E"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" />`+tt.body, tt.defs)))
			if !fault.HasCode(err, tt.code) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %s containing %q", err, tt.code, tt.want)
			}
		})
	}
}

func TestParseInclusiveGateways(t *testing.T) {
	flows := `<bpmn:sequenceFlow id="F0" sourceRef="S" targetRef="G" />
		<bpmn:sequenceFlow id="FA" sourceRef="G" targetRef="A"><bpmn:conditionExpression>=a</bpmn:conditionExpression></bpmn:sequenceFlow>
		<bpmn:sequenceFlow id="FB" sourceRef="G" targetRef="B"><bpmn:conditionExpression>=b</bpmn:conditionExpression></bpmn:sequenceFlow>
		<bpmn:sequenceFlow id="FC" sourceRef="G" targetRef="C" />`
	p := parseBody(t, `<bpmn:startEvent id="S" /><bpmn:inclusiveGateway id="G" default="FC" /><bpmn:task id="A" /><bpmn:task id="B" /><bpmn:task id="C" />`+flows, "")
	g := p.Element("G")
	if g.Kind != KindInclusive || g.Default == nil || g.Default.ID != "FC" || len(g.Outgoing) != 3 || g.Outgoing[0].Condition == nil {
		t.Fatalf("gateway = %+v", g)
	}
	_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:inclusiveGateway id="G" /><bpmn:task id="A" /><bpmn:task id="B" /><bpmn:task id="C" />`+flows, "")))
	if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), `flow "FC" out of inclusive gateway "G" has no condition and is not the default`) {
		t.Errorf("unconditioned flow: %v", err)
	}
	single := parseBody(t, `<bpmn:startEvent id="S" /><bpmn:inclusiveGateway id="G" /><bpmn:task id="A" />`+
		`<bpmn:sequenceFlow id="F0" sourceRef="S" targetRef="G" /><bpmn:sequenceFlow id="FA" sourceRef="G" targetRef="A" />`, "")
	if g := single.Element("G"); g.Kind != KindInclusive || g.Outgoing[0].Condition != nil {
		t.Errorf("a single flow needs no condition: %+v", g)
	}
}

func TestParseMultiInstance(t *testing.T) {
	mi := func(seq, attrs, cond string) string {
		return `<bpmn:multiInstanceLoopCharacteristics isSequential="` + seq + `"><bpmn:extensionElements><zeebe:loopCharacteristics ` + attrs +
			` /></bpmn:extensionElements>` + cond + `</bpmn:multiInstanceLoopCharacteristics>`
	}
	p := parseBody(t, `<bpmn:startEvent id="S" />
		<bpmn:serviceTask id="Par"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements>`+
		mi("false", `inputCollection="=items" inputElement="item" outputCollection="results" outputElement="=result.total"`,
			`<bpmn:completionCondition xsi:type="bpmn:tFormalExpression">=numberOfCompletedInstances &gt;= 2</bpmn:completionCondition>`)+`</bpmn:serviceTask>
		<bpmn:subProcess id="Seq"><bpmn:startEvent id="SS" />`+mi("true", `inputCollection="=items" outputCollection="out" outputElement="=item"`, "")+`</bpmn:subProcess>
		<bpmn:task id="Own">`+mi("false", `inputCollection="=items" inputElement="x" outputCollection="out" outputElement="=x"`, "")+`</bpmn:task>
		<bpmn:task id="Expr">`+mi("false", `inputCollection="=items" outputCollection="out" outputElement="=a + 1"`, "")+`</bpmn:task>`, "")
	par := p.Element("Par").Loop
	if par == nil || par.Sequential || par.InputCollection.Source() != "=items" || par.InputElement != "item" || par.OutputCollection != "results" ||
		par.OutputElement.Source() != "=result.total" || par.CompletionCondition == nil || par.OutputLocal != "result" {
		t.Fatalf("parallel loop = %+v", par)
	}
	if seq := p.Element("Seq").Loop; !seq.Sequential || seq.OutputLocal != "item" || p.Element("Seq").SubStart.ID != "SS" {
		t.Errorf("sequential subprocess loop = %+v", seq)
	}
	// The output element reads the input element or computes: no null local is made.
	if own, expr := p.Element("Own").Loop, p.Element("Expr").Loop; own.OutputLocal != "" || expr.OutputLocal != "" {
		t.Errorf("output locals %q %q, want none", own.OutputLocal, expr.OutputLocal)
	}
	for _, bad := range []struct{ attrs, want string }{
		{`inputElement="x"`, "has no inputCollection"},
		{`inputCollection="=items" outputCollection="out"`, "needs both outputCollection and outputElement"},
	} {
		_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:task id="T">`+mi("false", bad.attrs, "")+`</bpmn:task>`, "")))
		if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v", bad.attrs, err)
		}
	}
}

// A connector template applied to a plain task leaves a job definition on
// it; Zeebe checks the definition but completes the task without a job.
func TestParseUndefinedTaskIgnoresItsJobDefinition(t *testing.T) {
	p := parseBody(t, `<bpmn:startEvent id="S" />
		<bpmn:task id="Templated"><bpmn:extensionElements>
			<zeebe:taskDefinition type="io.camunda:sap:odata:outbound:" retries="1" />
			<zeebe:ioMapping><zeebe:input source="=claimValue" target="creditMemoValue" /><zeebe:output source="=creditMemoValue" target="memo" /></zeebe:ioMapping>
			<zeebe:taskHeaders><zeebe:header key="resultVariable" value="memo" /></zeebe:taskHeaders>
		</bpmn:extensionElements></bpmn:task>
		<bpmn:manualTask id="Manual"><bpmn:extensionElements><zeebe:taskDefinition type="=kind" /></bpmn:extensionElements></bpmn:manualTask>`, "")
	for _, id := range []string{"Templated", "Manual"} {
		if el := p.Element(id); el.Kind != KindThrow || el.Task != nil {
			t.Errorf("%s = %+v, want a pass-through without a job", id, el)
		}
	}
	if el := p.Element("Templated"); len(el.Inputs) != 1 || len(el.Outputs) != 1 {
		t.Errorf("mappings of the templated task = %+v, %+v; Zeebe keeps them", el.Inputs, el.Outputs)
	}
	for _, bad := range []struct{ def, code, want string }{
		{`<zeebe:taskDefinition type=" " />`, fault.BPMNInvalid, "has no type"},
		{`<zeebe:taskDefinition type="=a +" />`, fault.BPMNExpression, "task type"},
		{`<zeebe:taskDefinition type="t" retries="-1" />`, fault.BPMNInvalid, "not a non-negative integer"},
	} {
		_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:task id="T"><bpmn:extensionElements>`+bad.def+`</bpmn:extensionElements></bpmn:task>`, "")))
		if !fault.HasCode(err, bad.code) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want %s %q", bad.def, err, bad.code, bad.want)
		}
	}
}

func TestParsePassThroughTasksScriptsAndCallActivities(t *testing.T) {
	p := parseBody(t, `<bpmn:startEvent id="S" /><bpmn:task id="Undefined" /><bpmn:manualTask id="Manual" />
		<bpmn:scriptTask id="Script"><bpmn:extensionElements><zeebe:script expression="=a + 1" resultVariable="b" /></bpmn:extensionElements></bpmn:scriptTask>
		<bpmn:scriptTask id="ScriptJob"><bpmn:extensionElements><zeebe:taskDefinition type="script" /></bpmn:extensionElements></bpmn:scriptTask>
		<bpmn:businessRuleTask id="RuleJob"><bpmn:extensionElements><zeebe:taskDefinition type="rules" /></bpmn:extensionElements></bpmn:businessRuleTask>
		<bpmn:businessRuleTask id="Rule"><bpmn:extensionElements><zeebe:calledDecision decisionId="dish" resultVariable="d" /></bpmn:extensionElements></bpmn:businessRuleTask>
		<bpmn:businessRuleTask id="RuleAgain"><bpmn:extensionElements><zeebe:calledDecision decisionId="dish" resultVariable="e" bindingType="latest" /></bpmn:extensionElements></bpmn:businessRuleTask>
		<bpmn:businessRuleTask id="RuleTagged"><bpmn:extensionElements><zeebe:calledDecision decisionId="dish" resultVariable="d" bindingType="versionTag" versionTag="v2" /></bpmn:extensionElements></bpmn:businessRuleTask>
		<bpmn:businessRuleTask id="RulePinned"><bpmn:extensionElements><zeebe:calledDecision decisionId="drink" resultVariable="d" bindingType="deployment" versionTag="ignored" /></bpmn:extensionElements></bpmn:businessRuleTask>
		<bpmn:callActivity id="Call"><bpmn:extensionElements><zeebe:calledElement processId="=child" propagateAllChildVariables="false" /></bpmn:extensionElements></bpmn:callActivity>
		<bpmn:callActivity id="CallDefaults"><bpmn:extensionElements><zeebe:calledElement processId="child" propagateAllParentVariables="false" /></bpmn:extensionElements></bpmn:callActivity>`, "")
	for _, id := range []string{"Undefined", "Manual"} {
		if el := p.Element(id); el.Kind != KindThrow || el.Message != nil {
			t.Errorf("%s = %+v, want a pass-through", id, el)
		}
	}
	if el := p.Element("Script"); el.Kind != KindScript || el.Script.Expression.Source() != "=a + 1" || el.Script.ResultVariable != "b" {
		t.Errorf("script = %+v", el)
	}
	for _, id := range []string{"ScriptJob", "RuleJob"} {
		if el := p.Element(id); el.Kind != KindTask || el.Task == nil {
			t.Errorf("%s = %+v, want a pull task", id, el)
		}
	}
	if el := p.Element("Rule"); el.Kind != KindDecision || *el.Decision != (CalledDecision{DecisionRef{"dish", BindingLatest, ""}, "d"}) {
		t.Errorf("business rule task = %+v", el.Decision)
	}
	// The references are distinct, in document order; a tag counts only
	// with bindingType versionTag.
	want := []DecisionRef{{"dish", BindingLatest, ""}, {"dish", BindingVersionTag, "v2"}, {"drink", BindingDeployment, ""}}
	if got := p.CalledDecisions(); !slices.Equal(got, want) {
		t.Errorf("called decisions = %v, want %v", got, want)
	}
	if c := p.Element("Call").Call; p.Element("Call").Kind != KindCallActivity || c.ProcessID.Source() != "=child" ||
		c.PropagateAllChildVariables || !c.PropagateAllParentVariables {
		t.Errorf("call = %+v", c)
	}
	if c := p.Element("CallDefaults").Call; !c.PropagateAllChildVariables || c.PropagateAllParentVariables {
		t.Errorf("call defaults = %+v", c)
	}
	for _, bad := range []struct{ body, want string }{
		{`<bpmn:scriptTask id="X" />`, `scriptTask "X" has neither a zeebe:script nor a zeebe:taskDefinition`},
		{`<bpmn:scriptTask id="X"><bpmn:extensionElements><zeebe:script expression="=1" /></bpmn:extensionElements></bpmn:scriptTask>`, "needs an expression and a resultVariable"},
		{`<bpmn:callActivity id="X" />`, `callActivity "X" has no zeebe:calledElement`},
		{`<bpmn:businessRuleTask id="X" />`, `businessRuleTask "X" has neither a zeebe:calledDecision nor a zeebe:taskDefinition`},
		{`<bpmn:businessRuleTask id="X"><bpmn:extensionElements><zeebe:calledDecision decisionId="d" /></bpmn:extensionElements></bpmn:businessRuleTask>`,
			"needs a decisionId and a resultVariable"},
		{`<bpmn:businessRuleTask id="X"><bpmn:extensionElements><zeebe:calledDecision decisionId="d" resultVariable="r" bindingType="versionTag" /></bpmn:extensionElements></bpmn:businessRuleTask>`,
			"has bindingType versionTag and no versionTag"},
		{`<bpmn:businessRuleTask id="X"><bpmn:extensionElements><zeebe:calledDecision decisionId="d" resultVariable="r" bindingType="newest" /></bpmn:extensionElements></bpmn:businessRuleTask>`,
			`unknown bindingType "newest"`},
	} {
		_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" />`+bad.body, "")))
		if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("err = %v, want %q", err, bad.want)
		}
	}
}

// espDoc is a process with an event subprocess of each trigger at process
// level and one inside a subprocess.
const espDoc = `<bpmn:startEvent id="S" />
	<bpmn:subProcess id="OnMessage" triggeredByEvent="true"><bpmn:startEvent id="MsgStart" isInterrupting="false"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent></bpmn:subProcess>
	<bpmn:subProcess id="OnTimer" triggeredByEvent="true"><bpmn:startEvent id="TimerStart"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:startEvent></bpmn:subProcess>
	<bpmn:subProcess id="OnError" triggeredByEvent="true"><bpmn:startEvent id="ErrStart"><bpmn:errorEventDefinition errorRef="E1" /></bpmn:startEvent></bpmn:subProcess>
	<bpmn:subProcess id="Sub"><bpmn:startEvent id="SubStart" />
		<bpmn:subProcess id="OnEscalation" triggeredByEvent="true"><bpmn:startEvent id="EscStart" isInterrupting="false"><bpmn:escalationEventDefinition /></bpmn:startEvent></bpmn:subProcess>
	</bpmn:subProcess>`

func TestParseEventSubprocesses(t *testing.T) {
	p := parseBody(t, espDoc, msgDefs)
	var ids []string
	for _, esp := range p.EventSubs {
		ids = append(ids, esp.ID+"/"+esp.SubStart.ID)
	}
	if !slices.Equal(ids, []string{"OnMessage/MsgStart", "OnTimer/TimerStart", "OnError/ErrStart"}) {
		t.Errorf("process event subprocesses = %v", ids)
	}
	if m := p.Element("MsgStart"); !m.IsEventSubStart() || m.Interrupting || m.Message.Name != "m2" {
		t.Errorf("message start = %+v", m)
	}
	if e := p.Element("ErrStart"); !e.Interrupting || e.Error.Code != "BOOM" {
		t.Errorf("error start = %+v", e)
	}
	sub := p.Element("Sub")
	if len(sub.EventSubs) != 1 || sub.EventSubs[0].SubStart.Escalation == nil || sub.EventSubs[0].SubStart.Escalation.Code != "" || sub.SubStart.ID != "SubStart" {
		t.Errorf("subprocess event subprocesses = %+v", sub.EventSubs)
	}
	if got := p.MessageNames(); !slices.Equal(got, []string{"m2"}) {
		t.Errorf("MessageNames = %v: an event subprocess's message is waited for by instances", got)
	}
	for _, bad := range []struct{ body, want string }{
		{`<bpmn:subProcess id="E" triggeredByEvent="true"><bpmn:startEvent id="ES" /></bpmn:subProcess>`, `start event "ES" of event subprocess "E" has no message, timer, signal, error or escalation trigger`},
		{`<bpmn:subProcess id="E" triggeredByEvent="true" />`, `event subprocess "E" has 0 start events`},
		{`<bpmn:subProcess id="E" triggeredByEvent="true"><bpmn:startEvent id="ES" isInterrupting="false"><bpmn:errorEventDefinition /></bpmn:startEvent></bpmn:subProcess>`, `error start event "ES" of event subprocess "E" must interrupt`},
		{`<bpmn:subProcess id="E1" triggeredByEvent="true"><bpmn:startEvent id="A"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent></bpmn:subProcess>
		  <bpmn:subProcess id="E2" triggeredByEvent="true"><bpmn:startEvent id="B"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent></bpmn:subProcess>`, `"E1" and "E2" start on the same message "m2"`},
		{`<bpmn:subProcess id="E" triggeredByEvent="true"><bpmn:startEvent id="ES"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1M</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:startEvent></bpmn:subProcess>
		  <bpmn:endEvent id="X" /><bpmn:sequenceFlow id="F" sourceRef="E" targetRef="X" />`, `sequence flow "F" leaves subProcess "E"`},
		{`<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent></bpmn:subProcess>`, `start event "SS" of subprocess "Sub" has a trigger`},
	} {
		_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" />`+bad.body, msgDefs)))
		if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("err = %v, want %q", err, bad.want)
		}
	}
	_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:subProcess id="E" triggeredByEvent="true"><bpmn:startEvent id="ES">
		<bpmn:timerEventDefinition><bpmn:timeCycle>R/PT1M</bpmn:timeCycle></bpmn:timerEventDefinition></bpmn:startEvent></bpmn:subProcess>`, "")))
	if !fault.HasCode(err, fault.BPMNUnsupported) || !strings.Contains(err.Error(), `"ES" (startEvent): a timeCycle on an interrupting start event`) {
		t.Errorf("cycle on an interrupting start: %v", err)
	}
}

func TestParseLinkAndEscalationEvents(t *testing.T) {
	p := parseBody(t, `<bpmn:startEvent id="S" />
		<bpmn:intermediateThrowEvent id="GoTo"><bpmn:linkEventDefinition name="next" /></bpmn:intermediateThrowEvent>
		<bpmn:intermediateCatchEvent id="Landing"><bpmn:linkEventDefinition name="next" /></bpmn:intermediateCatchEvent>
		<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />
			<bpmn:intermediateThrowEvent id="Raise"><bpmn:escalationEventDefinition escalationRef="Esc" /></bpmn:intermediateThrowEvent>
			<bpmn:endEvent id="RaiseEnd"><bpmn:escalationEventDefinition escalationRef="Esc" /></bpmn:endEvent>
		</bpmn:subProcess>
		<bpmn:boundaryEvent id="Caught" cancelActivity="false" attachedToRef="Sub"><bpmn:escalationEventDefinition escalationRef="Esc" /></bpmn:boundaryEvent>
		<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="GoTo" />`, `<bpmn:escalation id="Esc" escalationCode="LATE" />`)
	if goTo := p.Element("GoTo"); goTo.Kind != KindLink || goTo.LinkTarget != p.Element("Landing") || p.Element("Landing").Kind != KindThrow {
		t.Errorf("link = %+v", goTo)
	}
	if r, e := p.Element("Raise"), p.Element("RaiseEnd"); r.Kind != KindThrow || r.Escalation.Code != "LATE" || e.Kind != KindEnd || e.Escalation.Code != "LATE" {
		t.Errorf("escalation throws = %+v %+v", r, e)
	}
	if b := p.Element("Caught"); b.Interrupting || b.Escalation.Code != "LATE" || b.AttachedTo != p.Element("Sub") {
		t.Errorf("escalation boundary = %+v", b)
	}
	// A call activity's child escalates to it, as in Zeebe.
	p = parseBody(t, `<bpmn:startEvent id="S" /><bpmn:callActivity id="Call"><bpmn:extensionElements><zeebe:calledElement processId="child" /></bpmn:extensionElements></bpmn:callActivity>
		<bpmn:boundaryEvent id="Late" attachedToRef="Call"><bpmn:escalationEventDefinition escalationRef="Esc" /></bpmn:boundaryEvent>
		<bpmn:boundaryEvent id="Any" cancelActivity="false" attachedToRef="Call"><bpmn:escalationEventDefinition /></bpmn:boundaryEvent>`,
		`<bpmn:escalation id="Esc" escalationCode="LATE" />`)
	if b := p.Element("Late"); !b.Interrupting || b.Escalation.Code != "LATE" || b.AttachedTo != p.Element("Call") {
		t.Errorf("escalation boundary on the call activity = %+v", b)
	}
	if b := p.Element("Any"); b.Interrupting || b.Escalation == nil || b.Escalation.Code != "" || len(p.Element("Call").Boundaries) != 2 {
		t.Errorf("catch-all escalation boundary on the call activity = %+v", b)
	}
	for _, bad := range []struct{ body, want string }{
		{`<bpmn:intermediateThrowEvent id="T"><bpmn:linkEventDefinition name="nowhere" /></bpmn:intermediateThrowEvent>`, `link throw event "T" has no catch event named "nowhere"`},
		{`<bpmn:intermediateCatchEvent id="A"><bpmn:linkEventDefinition name="x" /></bpmn:intermediateCatchEvent><bpmn:intermediateCatchEvent id="B"><bpmn:linkEventDefinition name="x" /></bpmn:intermediateCatchEvent>`, `link catch events "A" and "B" have the same name "x"`},
		{`<bpmn:intermediateThrowEvent id="T"><bpmn:escalationEventDefinition /></bpmn:intermediateThrowEvent>`, `escalation end or throw event "T" has no escalationRef`},
		{`<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements></bpmn:serviceTask><bpmn:boundaryEvent id="B" attachedToRef="T"><bpmn:escalationEventDefinition /></bpmn:boundaryEvent>`, `escalation boundary event "B" is attached to serviceTask "T"`},
	} {
		_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" />`+bad.body, "")))
		if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("err = %v, want %q", err, bad.want)
		}
	}
}

func TestParseLocalVariableMappings(t *testing.T) {
	p := parseBody(t, `<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:extensionElements><zeebe:ioMapping>
		<zeebe:input target="total" /><zeebe:input source="=order.id" target="orderId" /></zeebe:ioMapping></bpmn:extensionElements>
		<bpmn:startEvent id="SS" /></bpmn:subProcess>
		<bpmn:receiveTask id="R" messageRef="M1"><bpmn:extensionElements><zeebe:ioMapping><zeebe:input source="=1" target="tries" /></zeebe:ioMapping></bpmn:extensionElements></bpmn:receiveTask>`, msgDefs)
	in := p.Element("Sub").Inputs
	if len(in) != 2 || in[0].Source != nil || in[0].Target != "total" || in[1].Source.Source() != "=order.id" {
		t.Errorf("inputs = %+v", in)
	}
	if len(p.Element("R").Inputs) != 1 {
		t.Errorf("receive task inputs = %+v", p.Element("R").Inputs)
	}
	_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:intermediateThrowEvent id="T"><bpmn:extensionElements><zeebe:ioMapping><zeebe:input target="x" /></zeebe:ioMapping></bpmn:extensionElements>
		<bpmn:messageEventDefinition messageRef="M2" /></bpmn:intermediateThrowEvent>`, msgDefs)))
	if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), "a message or signal payload needs one") {
		t.Errorf("payload input without source: %v", err)
	}
}

func TestParseAllReadsEveryExecutableProcess(t *testing.T) {
	src := doc(`<bpmn:startEvent id="S" />`, `<bpmn:process id="q" isExecutable="true"><bpmn:startEvent id="S" /><bpmn:userTask id="U" /></bpmn:process>
		<bpmn:process id="r" isExecutable="false"><bpmn:startEvent id="S" /></bpmn:process>`)
	ps, err := ParseAll(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].ID != "p" || ps[1].ID != "q" || ps[1].Element("U") == nil || ps[0].Element("U") != nil {
		t.Fatalf("processes = %+v", ps)
	}
	_, err = Parse(strings.NewReader(src))
	if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), `2 executable processes ("p", "q"); Parse reads one, ParseAll reads each`) {
		t.Errorf("Parse: %v", err)
	}
	bad := doc(`<bpmn:startEvent id="S" />`, `<bpmn:process id="q" isExecutable="true"><bpmn:startEvent id="S" /><bpmn:complexGateway id="G" /></bpmn:process>`)
	if _, err := ParseAll(strings.NewReader(bad)); !fault.HasCode(err, fault.BPMNUnsupported) || !strings.Contains(err.Error(), `"G" (complexGateway)`) {
		t.Errorf("ParseAll with one bad process: %v", err)
	}
}

func TestParseRefusesCamunda7FilesAsSuch(t *testing.T) {
	c7 := func(rootAttrs, body string) string {
		return `<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:camunda="http://camunda.org/schema/1.0/bpmn"
			xmlns:modeler="http://camunda.org/schema/modeler/1.0" id="D" ` + rootAttrs + `><bpmn:process id="p" isExecutable="true">` + body + `</bpmn:process></bpmn:definitions>`
	}
	for _, tt := range []struct{ name, src, want string }{
		{"execution platform", c7(`modeler:executionPlatform="Camunda Platform"`, `<bpmn:startEvent id="S" />`), `(modeler:executionPlatform="Camunda Platform")`},
		{"camunda attribute", c7("", `<bpmn:startEvent id="S" /><bpmn:serviceTask id="T" camunda:class="com.acme.Charge" />`), `(camunda:class on serviceTask "T")`},
		{"camunda extension", c7("", `<bpmn:startEvent id="S"><bpmn:extensionElements><camunda:formData /></bpmn:extensionElements></bpmn:startEvent>`), `(camunda:formData on formData)`},
		{"zeebe namespace declared but unused", c7(`xmlns:zeebe="http://camunda.org/schema/zeebe/1.0"`, `<bpmn:startEvent id="S" camunda:asyncBefore="true" />`),
			`(camunda:asyncBefore on startEvent "S")`},
		{"Camunda 7 platform with zeebe extensions", c7(`modeler:executionPlatform="Camunda Platform" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0"`,
			`<bpmn:startEvent id="S" /><bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements></bpmn:serviceTask>`),
			`(modeler:executionPlatform="Camunda Platform")`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.src))
			if !fault.HasCode(err, fault.BPMNUnsupported) {
				t.Fatalf("err = %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "this is a Camunda 7 (Camunda Platform) file "+tt.want+": Sutra runs the Camunda 8 (Zeebe) dialect") ||
				strings.Count(msg, fault.BPMNUnsupported) != 1 {
				t.Errorf("err = %v", err)
			}
		})
	}
	// Camunda 8's web modeler marks its files with camunda:diagramRelationId on the root.
	mustParse(t, strings.Replace(doc(`<bpmn:startEvent id="S" />`, ""), `id="Definitions_1"`,
		`xmlns:camunda="http://camunda.org/schema/1.0/bpmn" camunda:diagramRelationId="x" id="Definitions_1"`, 1))
}

// A Zeebe file with camunda: leftovers runs as Zeebe, which ignores them.
func TestParseRunsZeebeFilesWithCamunda7Leftovers(t *testing.T) {
	hybrid := func(rootAttrs, body string) string {
		return `<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:camunda="http://camunda.org/schema/1.0/bpmn"
			xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" xmlns:modeler="http://camunda.org/schema/modeler/1.0" id="D" ` + rootAttrs +
			`><bpmn:process id="p" isExecutable="true" camunda:historyTimeToLive="180">` + body + `</bpmn:process></bpmn:definitions>`
	}
	p := mustParse(t, hybrid("", `<bpmn:startEvent id="S" />
		<bpmn:serviceTask id="T" camunda:asyncBefore="true" camunda:class="com.acme.Charge"><bpmn:extensionElements>
			<camunda:inputOutput><camunda:inputParameter name="x">1</camunda:inputParameter></camunda:inputOutput>
			<zeebe:taskDefinition type="charge" />
		</bpmn:extensionElements></bpmn:serviceTask><bpmn:sequenceFlow id="F" sourceRef="S" targetRef="T" />`))
	if el := p.Element("T"); el.Kind != KindTask || el.Task.Type.Source() != "charge" || len(el.Inputs) != 0 {
		t.Errorf("T = %+v", el)
	}
	// The modeler's Camunda 8 platform is a sign of Zeebe too.
	cloudOnly := hybrid(`modeler:executionPlatform="Camunda Cloud"`, `<bpmn:startEvent id="S" camunda:asyncAfter="true" />`)
	if p := mustParse(t, cloudOnly); p.Start.ID != "S" {
		t.Errorf("start = %v", p.Start)
	}
}

func TestParseErrorsCarryTheCodeAndTheValueOnce(t *testing.T) {
	for _, tt := range []struct{ name, body, code, value string }{
		{"expression", `<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" /><bpmn:endEvent id="A" />
			<bpmn:sequenceFlow id="F" sourceRef="G" targetRef="A"><bpmn:conditionExpression>=a &gt;&gt; 1</bpmn:conditionExpression></bpmn:sequenceFlow>`, fault.BPMNExpression, `"=a >> 1"`},
		{"timer", `<bpmn:startEvent id="S" /><bpmn:intermediateCatchEvent id="E"><bpmn:timerEventDefinition><bpmn:timeDuration>15 minutes</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>`,
			fault.BPMNInvalid, `"15 minutes"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(doc(tt.body, "")))
			msg := err.Error()
			if !fault.HasCode(err, tt.code) || strings.Count(msg, tt.code) != 1 || strings.Count(msg, tt.value) != 1 {
				t.Errorf("err = %v, want %s and %s once each", err, tt.code, tt.value)
			}
		})
	}
}

func TestParseCoverageSeed(t *testing.T) {
	p := parseBody(t, coverageSeed, msgDefs+`<bpmn:escalation id="Esc" escalationCode="LATE" />`)
	checkConsistent(t, p)
	if p.Element("CT").Timer == nil || p.Element("Sub").Loop == nil || len(p.Element("Sub").EventSubs) != 1 {
		t.Errorf("seed parsed incompletely")
	}
}
