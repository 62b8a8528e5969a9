package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxTopicLabels is how many distinct pull-task topics keep a label of their
// own on the task metrics, in the order they are first seen; every later one
// counts under topic="other" (OtherTopic). A caller inventing topics (a
// fetchAndLock names any it likes) cannot grow the series without bound.
const MaxTopicLabels = 100

// OtherTopic labels the topics beyond the first MaxTopicLabels.
const OtherTopic = "other"

// topicLabels hands out the bounded topic labels, shared by every task
// metric so that they name the same topics.
type topicLabels struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

func (t *topicLabels) label(topic string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[topic]; ok {
		return topic
	}
	if len(t.seen) >= MaxTopicLabels {
		return OtherTopic
	}
	t.seen[topic] = struct{}{}
	return topic
}

// TopicCounter is a counter vector whose first label is a pull task's topic,
// bounded by MaxTopicLabels. Use WithLabelValues: the embedded vector's other
// accessors do not bound the topic.
type TopicCounter struct {
	*prometheus.CounterVec
	topics *topicLabels
}

// WithLabelValues is the counter of topic (or OtherTopic) and the other
// label values.
func (c *TopicCounter) WithLabelValues(topic string, rest ...string) prometheus.Counter {
	return c.CounterVec.WithLabelValues(append([]string{c.topics.label(topic)}, rest...)...)
}
