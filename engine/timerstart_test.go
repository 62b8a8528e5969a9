package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

func timerStart(id, kind, value string) string {
	return `<bpmn:startEvent id="` + id + `"><bpmn:timerEventDefinition><bpmn:` + kind + `>` + value + `</bpmn:` + kind +
		`></bpmn:timerEventDefinition></bpmn:startEvent>`
}

// timerStarts has a none start event and an hourly timer start event whose
// output mapping marks the instances it starts; both lead to a receive task.
var timerStarts = `<bpmn:startEvent id="S" />
<bpmn:startEvent id="Hourly"><bpmn:extensionElements><zeebe:ioMapping><zeebe:output source="=&quot;schedule&quot;" target="origin" /></zeebe:ioMapping></bpmn:extensionElements>
  <bpmn:timerEventDefinition><bpmn:timeCycle>R/PT1H</bpmn:timeCycle></bpmn:timerEventDefinition></bpmn:startEvent>` +
	receive("R", "M1") + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="R" /><bpmn:sequenceFlow id="F2" sourceRef="Hourly" targetRef="R" />`

func TestTimerStartStartsAnInstanceThere(t *testing.T) {
	x := newInstance(t, parse(t, timerStarts, msgDefs))
	x.step(Trigger{Kind: TriggerStart, Element: "Hourly"})
	if tok := x.token("R"); tok.Flow != "F2" || tok.Wait != WaitMessage {
		t.Errorf("token = %+v", tok)
	}
	if !reflect.DeepEqual(x.in.State.Variables, map[string]any{"origin": "schedule"}) {
		t.Errorf("variables = %v: the start event's outputs apply", x.in.State.Variables)
	}
	onlyTimer := parse(t, timerStart("T", "timeDate", "2030-01-01T00:00:00Z"), "")
	for _, tt := range []struct {
		name string
		def  *bpmn.Process
		tr   Trigger
	}{
		{"no none start event", onlyTimer, Trigger{Kind: TriggerStart}},
		{"an event subprocess's timer start", parse(t, `<bpmn:startEvent id="S" /><bpmn:subProcess id="ESP" triggeredByEvent="true">`+
			timerStart("ET", "timeDuration", "PT1M")+`</bpmn:subProcess>`, ""), Trigger{Kind: TriggerStart, Element: "ET"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := newInstance(t, tt.def).fail(tt.tr); !fault.HasCode(err, fault.NoStartEvent) {
				t.Errorf("err = %v, want %s", err, fault.NoStartEvent)
			}
		})
	}
}

func TestNextStart(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	type call struct {
		after time.Time
		fired int
		due   time.Time // zero: no more firings
	}
	deploy := t0 // 2025-03-01T12:00:00Z
	tests := []struct {
		name, kind, value string
		calls             []call
	}{
		{"bounded cycle", "timeCycle", "R3/PT10M", []call{
			{deploy, 0, deploy.Add(10 * time.Minute)},
			{deploy.Add(10 * time.Minute), 1, deploy.Add(20 * time.Minute)},
			{deploy.Add(20 * time.Minute), 2, deploy.Add(30 * time.Minute)},
			{deploy.Add(30 * time.Minute), 3, time.Time{}},
		}},
		{"unbounded cycle counts from the due time that fired", "timeCycle", "R/PT1H", []call{
			{deploy, 0, deploy.Add(time.Hour)},
			{deploy.Add(5 * time.Hour), 1000, deploy.Add(6 * time.Hour)},
		}},
		{"cycle with a start to come", "timeCycle", "R2/2030-01-01T00:00:00Z/P1D", []call{
			{deploy, 0, at("2030-01-01T00:00:00Z")},
			{at("2030-01-01T00:00:00Z"), 1, at("2030-01-02T00:00:00Z")},
			{at("2030-01-02T00:00:00Z"), 2, time.Time{}},
		}},
		{"cycle with a start passed", "timeCycle", "R/2020-01-31T00:00:00Z/P1M", []call{
			{deploy, 0, at("2025-03-31T00:00:00Z")},
		}},
		{"date", "timeDate", "2030-10-10T12:00:00Z", []call{
			{deploy, 0, at("2030-10-10T12:00:00Z")},
			{at("2030-10-10T12:00:00Z"), 1, time.Time{}},
		}},
		{"date passed at deploy is due at once", "timeDate", "2020-01-01T00:00:00Z", []call{{deploy, 0, at("2020-01-01T00:00:00Z")}}},
		{"date computed at deploy", "timeDate", `=now() + duration("PT1M")`, []call{{deploy, 0, deploy.Add(time.Minute)}}},
		{"duration", "timeDuration", "PT5M", []call{
			{deploy, 0, deploy.Add(5 * time.Minute)},
			{deploy.Add(5 * time.Minute), 1, time.Time{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			el := parse(t, timerStart("T", tt.kind, tt.value), "").Element("T")
			for _, c := range tt.calls {
				due, ok, err := NextStart(el, c.after, c.fired)
				if err != nil || ok != !c.due.IsZero() || !due.Equal(c.due) {
					t.Errorf("NextStart(after %s, fired %d) = %s, %v, %v; want %s", c.after, c.fired, due, ok, err, c.due)
				}
			}
		})
	}
}

func TestNextStartRefuses(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:subProcess id="ESP" triggeredByEvent="true">`+timerStart("ET", "timeDuration", "PT1M")+`</bpmn:subProcess>`+
		timerStart("Bad", "timeCycle", "=string(now())"), "")
	for _, tt := range []struct {
		name string
		el   *bpmn.Element
		code string
	}{
		{"a none start event", def.Element("S"), fault.NoStartEvent},
		{"an event subprocess's timer start", def.Element("ET"), fault.NoStartEvent},
		{"nothing", nil, fault.NoStartEvent},
		{"a value that is no cycle at deploy", def.Element("Bad"), fault.BPMNInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok, err := NextStart(tt.el, t0, 0); ok || !fault.HasCode(err, tt.code) {
				t.Errorf("NextStart = %v, %v; want %s", ok, err, tt.code)
			}
		})
	}
}
