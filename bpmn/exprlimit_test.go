package bpmn

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

// TestADeployWithAConstantBlowupIsRefusedNamingTheElementAndTheLimit: a
// constant expression is evaluated at deploy, under the evaluation limits,
// so one that builds an exponential value is a refusal, not a deploy that
// grows until the kernel kills it.
func TestADeployWithAConstantBlowupIsRefusedNamingTheElementAndTheLimit(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, `=string({b0: ["%s", "%s"]`, strings.Repeat("s", 4000), strings.Repeat("s", 4000))
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, ", b%d: [b%d, b%d]", i, i-1, i-1)
	}
	b.WriteString("})")
	script := `<bpmn:startEvent id="S" /><bpmn:scriptTask id="Blowup"><bpmn:extensionElements>
		<zeebe:script expression="` + strings.ReplaceAll(b.String(), `"`, "&quot;") + `" resultVariable="r" /></bpmn:extensionElements></bpmn:scriptTask>
		<bpmn:sequenceFlow id="F" sourceRef="S" targetRef="Blowup" />`
	_, err := Parse(strings.NewReader(doc(script, "")))
	if !fault.HasCode(err, fault.IncidentExpressionLimit) || !feel.IsLimit(err) {
		t.Fatalf("err = %.300v, want %s", err, fault.IncidentExpressionLimit)
	}
	if msg := fault.Reason(err); !strings.HasPrefix(msg, `script of "Blowup": `) || !strings.Contains(msg, "SUTRA_FEEL_MAX_") {
		t.Errorf("refusal %.300q does not name the element first and the limit", msg)
	}
}
