package engine

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenCases run one small process per element through a fixed sequence of
// triggers. The golden file records every step's trigger, effects and
// resulting tokens, so any change in what the store is asked to write shows
// up in review.
var goldenCases = []struct {
	name, process, defs string
	triggers            []Trigger
}{
	{"none-start-and-end", `<bpmn:startEvent id="S" /><bpmn:endEvent id="E" />` + flow("F", "S", "E"), "",
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"a": 1.0}}}},
	{"message-catch", `<bpmn:startEvent id="S" />` + catchMsg("C", "M1") + flow("F", "S", "C"),
		`<bpmn:message id="M1" name="m1"><bpmn:extensionElements><zeebe:subscription correlationKey="=id" /></bpmn:extensionElements></bpmn:message>`,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"id": "k-1"}}, {Kind: TriggerMessage, Message: "m1", CorrelationKey: "k-1", Variables: map[string]any{"b": true}}}},
	{"receive-task", `<bpmn:startEvent id="S" />` + receive("R", "M1") + flow("F", "S", "R"), msgDefs,
		[]Trigger{{Kind: TriggerStart}, {Kind: TriggerMessage, Message: "m1"}}},
	{"timer-catch-duration", `<bpmn:startEvent id="S" />` + timerCatch("T", "timeDuration", "PT15M") + flow("F", "S", "T"), "",
		[]Trigger{{Kind: TriggerStart}, {Kind: TriggerTimer, TokenID: "t1", Element: "T"}}},
	{"timer-catch-date", `<bpmn:startEvent id="S" />` + timerCatch("T", "timeDate", "=at") + flow("F", "S", "T"), "",
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"at": "2025-04-01T09:00:00+02:00"}}, {Kind: TriggerTimer, TokenID: "t1", Element: "T"}}},
	{"message-throw", `<bpmn:startEvent id="S" /><bpmn:intermediateThrowEvent id="T"><bpmn:messageEventDefinition messageRef="MOut" /></bpmn:intermediateThrowEvent><bpmn:endEvent id="E" />` +
		flow("F1", "S", "T") + flow("F2", "T", "E"), publishDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}}}},
	{"message-end", `<bpmn:startEvent id="S" /><bpmn:endEvent id="E"><bpmn:messageEventDefinition messageRef="MOut" /></bpmn:endEvent>` + flow("F1", "S", "E"), publishDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}}}},
	{"send-task", `<bpmn:startEvent id="S" /><bpmn:sendTask id="T" messageRef="MOut" />` + flow("F1", "S", "T"), publishDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}}}},
	{"terminate-end", `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="P" />` + receive("R", "M1") + `<bpmn:endEvent id="E"><bpmn:terminateEventDefinition /></bpmn:endEvent>` +
		flow("F1", "S", "P") + flow("F2", "P", "R") + flow("F3", "P", "E"), msgDefs,
		[]Trigger{{Kind: TriggerStart}}},
	{"error-end-in-subprocess", subProcess, subDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"mode": "fail"}}, {Kind: TriggerMessage, Message: "m1"}}},
	{"subprocess-completes", subProcess, subDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"mode": "ok"}}, {Kind: TriggerMessage, Message: "m1"}, {Kind: TriggerMessage, Message: "m3"}}},
	{"boundary-message-interrupting", subProcess, subDefs,
		[]Trigger{{Kind: TriggerStart}, {Kind: TriggerMessage, Message: "m2"}}},
	{"service-task", taskProcess, taskDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"total": 5.0}}},
			{Kind: TriggerTaskFailed, TokenID: "t1", Retries: 1, ErrorMessage: "timeout"},
			{Kind: TriggerTaskCompleted, TokenID: "t1", Variables: map[string]any{"receipt": "r-1"}}}},
	{"service-task-retries-exhausted", taskProcess, taskDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"total": 5.0}}},
			{Kind: TriggerTaskFailed, TokenID: "t1", Retries: 0, ErrorMessage: "card service down"}}},
	{"boundary-error", taskProcess, taskDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"total": 5.0}}},
			{Kind: TriggerTaskError, TokenID: "t1", ErrorCode: "DECLINED", Variables: map[string]any{"why": "limit"}}}},
	{"boundary-timer-cycle-and-interrupting", boundaryTimers, "",
		[]Trigger{{Kind: TriggerStart}, {Kind: TriggerTimer, TokenID: "t1", Element: "Remind"}, {Kind: TriggerTimer, TokenID: "t1", Element: "Expire"}}},
	{"exclusive-gateway", `<bpmn:startEvent id="S" /><bpmn:exclusiveGateway id="G" default="FD" />` + receive("A", "M1") + receive("B", "M2") +
		flow("F0", "S", "G") + cond("FA", "G", "A", "=n &gt; 1") + flow("FD", "G", "B"), msgDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"n": 2.0}}}},
	{"parallel-gateway", `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" /><bpmn:parallelGateway id="Join" /><bpmn:endEvent id="E" />` +
		receive("A", "M1") + receive("B", "M2") + flow("F0", "S", "Fork") + flow("FA", "Fork", "A") + flow("FB", "Fork", "B") +
		flow("FA2", "A", "Join") + flow("FB2", "B", "Join") + flow("F9", "Join", "E"), msgDefs,
		[]Trigger{{Kind: TriggerStart}, {Kind: TriggerMessage, Message: "m1"}, {Kind: TriggerMessage, Message: "m2"}}},
	{"event-based-gateway", `<bpmn:startEvent id="S" /><bpmn:eventBasedGateway id="G" />` + catchMsg("Paid", "M1") +
		timerCatch("Timeout", "timeDuration", "PT30M") + `<bpmn:endEvent id="E1" /><bpmn:endEvent id="E2" />` +
		flow("F0", "S", "G") + flow("F1", "G", "Paid") + flow("F2", "G", "Timeout") + flow("F3", "Paid", "E1") + flow("F4", "Timeout", "E2"), msgDefs,
		[]Trigger{{Kind: TriggerStart}, {Kind: TriggerTimer, TokenID: "t1", Element: "Timeout"}}},
	{"user-task", userTaskProcess(nativeUserTask), "",
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"owner": "ada", "reviewers": "bob,cy", "due": "2025-03-05T17:00:00Z", "urgency": 8.0}},
			{Kind: TriggerTaskCompleted, TokenID: "t1", Variables: map[string]any{"approved": true}}}},
	{"message-start", messageStarts, messageStartDefs,
		[]Trigger{{Kind: TriggerStart, Element: "Ordered", Message: "order-placed", Variables: map[string]any{"order": map[string]any{"id": "o-7"}}},
			{Kind: TriggerMessage, Message: "paid", CorrelationKey: "o-7"}}},
	{"message-name-expression", namedWaits, nameDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"channel": "sms", "id": "c-1"}},
			{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"channel": "email"}},
			{Kind: TriggerMessage, Message: "reply-sms", CorrelationKey: "c-1"}}},
	{"thrown-code-expressions", thrownCodes, thrownCodeDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"level": "LATE", "reason": "LIMIT"}}}},
	{"inclusive-gateway", courses, msgDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"courses": []any{"steak", "pasta"}}}}},
	{"timer-start", timerStarts, msgDefs,
		[]Trigger{{Kind: TriggerStart, Element: "Hourly"}, {Kind: TriggerMessage, Message: "m1"}}},
	{"multi-instance-parallel", miTask("false", "", ""), "",
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"items": []any{"a", "b"}}},
			{Kind: TriggerTaskCompleted, TokenID: "t3", Variables: map[string]any{"result": "rb"}},
			{Kind: TriggerTaskCompleted, TokenID: "t2", Variables: map[string]any{"result": "ra"}}}},
	{"multi-instance-sequential-completion-condition",
		miTask("true", "", `<bpmn:completionCondition>=result = "enough"</bpmn:completionCondition>`), "",
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"items": []any{"a", "b", "c"}}},
			{Kind: TriggerTaskCompleted, TokenID: "t2", Variables: map[string]any{"result": "more"}},
			{Kind: TriggerTaskCompleted, TokenID: "t4", Variables: map[string]any{"result": "enough"}}}},
	{"multi-instance-interrupted", miTask("false", "", ""), "",
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"items": []any{"a", "b"}}},
			{Kind: TriggerTimer, TokenID: "t1", Element: "Late"}}},
	{"pass-through-script-and-link", passThrough, msgDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"name": "ada", "price": 2.5, "qty": 4.0}}}},
	{"subprocess-local-variables", localScope, msgDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"id": "o-1"}}},
			{Kind: TriggerTaskCompleted, TokenID: "t2", Variables: map[string]any{"attempt": 2.0, "outcome": "ok"}}}},
	{"escalation", escalations, escalationDefs, []Trigger{{Kind: TriggerStart}}},
	{"event-subprocesses", eventSubs, eventSubDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}},
			{Kind: TriggerMessage, Message: "update", CorrelationKey: "o-1"},
			{Kind: TriggerTimer, TokenID: "", Element: "TimeoutStart"}}},
	{"call-activity", caller(`<zeebe:calledElement processId="=childKey" />`, `<zeebe:output source="=tracking" target="tracking" />`), callerDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"childKey": "shipping", "order": map[string]any{"id": "o-1"}}},
			{Kind: TriggerChildCompleted, TokenID: "t1", Element: "Call", Variables: map[string]any{"tracking": "T-9", "other": 1.0}}}},
	{"call-activity-child", child, callerDefs + msgDefs,
		[]Trigger{{Kind: TriggerStart, Parent: &ParentRef{InstanceID: "p-1", TokenID: "t1", Element: "Call"}, Variables: map[string]any{"fail": false}},
			{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"tracking": "T-9"}}}},
	{"cancel", caller(`<zeebe:calledElement processId="shipping" />`), callerDefs,
		[]Trigger{{Kind: TriggerStart}, {Kind: TriggerCancel}}},
	{"uuid", uuidProcess, "", []Trigger{{Kind: TriggerStart, Variables: map[string]any{"ids": []any{}}}}},
	{"retry", taskProcess, taskDefs,
		[]Trigger{{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"total": 5.0}}},
			{Kind: TriggerTaskFailed, TokenID: "t1", Retries: 0, ErrorMessage: "card service down"},
			{Kind: TriggerRetry, TokenID: "t1", Retries: 2},
			{Kind: TriggerTaskFailed, TokenID: "t1", Retries: 1, RetryTimeout: time.Minute, ErrorMessage: "again"}}},
}

func TestGoldenTracesPerElement(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			x := newInstance(t, parse(t, gc.process, gc.defs))
			var b strings.Builder
			for n, tr := range gc.triggers {
				x.now = t0.Add(time.Duration(n) * time.Minute)
				eff := x.step(tr)
				writeJSON(t, &b, "trigger", tr)
				writeJSON(t, &b, "effects", eff)
				writeJSON(t, &b, "state", struct {
					Status    Status
					Variables map[string]any
					Tokens    []Token
					Seq       int64
				}{x.in.State.Status, x.in.State.Variables, x.in.State.Tokens, x.in.State.Seq})
				b.WriteString("\n")
			}
			path := filepath.Join("testdata", "golden", gc.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGoldenTracesPerElement -update to create it)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("trace differs from %s (rerun with -update after checking the change):\n%s", path, got)
			}
		})
	}
}

func writeJSON(t *testing.T, b *strings.Builder, label string, v any) {
	t.Helper()
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(label + ": ")
	b.Write(out)
	b.WriteString("\n")
}
