package tasks

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/metrics"
)

// FuzzRequestBodies feeds arbitrary bodies to every decoder of the task API
// and what follows them without the database: nothing a client sends
// panics, and a refusal is always a client error (400 or 413), never a 500.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"workerId":"w","maxTasks":5,"asyncResponseTimeout":1000,"topics":[{"topicName":"t","lockDuration":1000,"variables":["a"]}]}`,
		`{"workerId":"w","variables":{"a":{"value":"{\"x\":1}","type":"Json"},"b":{"value":5,"type":"Integer"}}}`,
		`{"workerId":"w","errorMessage":"x","retries":1,"retryTimeout":10}`,
		`{"workerId":"w","errorCode":"E","variables":{"d":{"value":"2024-01-01","type":"Date"}}}`,
		`{"workerId":"w","maxTasks":-1,"topics":[{"topicName":"","lockDuration":-5}],"sorting":[{"sortBy":"x"}]}`,
		`[]`, `null`, `{"a":`, "\x00", `{"variables":{"f":{"value":"x","type":"Object","valueInfo":{"serializationDataFormat":"application/json"}}}}`,
	} {
		f.Add([]byte(seed))
	}
	m := metrics.New(prometheus.NewRegistry())
	log := slog.New(slog.DiscardHandler)
	s := New(api.New(api.Deps{Metrics: m, Logger: log}, api.Config{}), Deps{Metrics: m, Logger: log}, Config{})
	f.Fuzz(func(t *testing.T, body []byte) {
		decode := func(v any) error {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return api.Decode(r, v)
		}
		check := func(err error) {
			if err == nil {
				return
			}
			w := httptest.NewRecorder()
			s.fail(w, httptest.NewRequest(http.MethodPost, "/", nil), err)
			if w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("body %q refused with %d: %v", body, w.Code, err)
			}
		}
		var fetch fetchRequest
		if err := decode(&fetch); err == nil {
			_, err = s.lockQuery(fetch)
			check(err)
		} else {
			check(err)
		}
		var complete completeRequest
		if err := decode(&complete); err == nil {
			_, err = fromTyped(complete.Variables)
			if err != nil {
				check(api.Invalid{Msg: err.Error()})
			}
		} else {
			check(err)
		}
		for _, v := range []any{&failureRequest{}, &bpmnErrorRequest{}, &extendLockRequest{}} {
			check(decode(v))
		}
	})
}
