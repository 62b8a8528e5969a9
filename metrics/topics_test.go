package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A caller can name any topic; the task metrics keep a series for the first
// MaxTopicLabels and count the rest under "other", so their series stay
// bounded however many topics are invented.
func TestTaskMetricsKeepTheFirstTopicsAndCountTheRestAsOther(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	for i := range 3 * MaxTopicLabels {
		m.TasksLocked.WithLabelValues(fmt.Sprintf("topic-%d", i)).Inc()
		m.TasksCompleted.WithLabelValues(fmt.Sprintf("topic-%d", i), "completed").Inc()
	}
	m.TasksLocked.WithLabelValues("topic-0").Inc() // a topic seen first keeps its series
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	locked := map[string]float64{}
	for _, f := range families {
		switch f.GetName() {
		case "sutra_tasks_locked_total":
			for _, s := range f.GetMetric() {
				locked[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
			}
		case "sutra_tasks_completed_total":
			if n := len(f.GetMetric()); n != MaxTopicLabels+1 {
				t.Errorf("sutra_tasks_completed_total has %d series, want %d and other", n, MaxTopicLabels)
			}
		}
	}
	if len(locked) != MaxTopicLabels+1 {
		t.Errorf("sutra_tasks_locked_total has %d series, want %d and other", len(locked), MaxTopicLabels)
	}
	if locked[OtherTopic] != 2*MaxTopicLabels || locked["topic-0"] != 2 {
		t.Errorf("other counts %v locks (want %d), topic-0 %v (want 2)", locked[OtherTopic], 2*MaxTopicLabels, locked["topic-0"])
	}
}
