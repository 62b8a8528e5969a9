package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/metrics"
)

// FuzzRequestBodies feeds arbitrary bodies to every decoder of the API and
// what follows them without the database: nothing a client sends panics,
// and a refusal is always a client error (400 or 413), never a 500.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"workerId":"w","maxTasks":5,"asyncResponseTimeout":1000,"topics":[{"topicName":"t","lockDuration":1000,"variables":["a"]}]}`,
		`{"workerId":"w","variables":{"a":{"value":"{\"x\":1}","type":"Json"},"b":{"value":5,"type":"Integer"}}}`,
		`{"workerId":"w","errorMessage":"x","retries":1,"retryTimeout":10}`,
		`{"workerId":"w","errorCode":"E","variables":{"d":{"value":"2024-01-01","type":"Date"}}}`,
		`{"definition":"d","version":1,"instance_id":"i","variables":{"a":[1,{"b":null}]}}`,
		`{"target_version":2,"mapping":{"A":"B"}}`,
		`{"message":"m","correlation_key":"k","ttl":"PT1M"}`,
		`{"workerId":"w","maxTasks":-1,"topics":[{"topicName":"","lockDuration":-5}],"sorting":[{"sortBy":"x"}]}`,
		`[]`, `null`, `{"a":`, "\x00", `{"variables":{"f":{"value":"x","type":"Object","valueInfo":{"serializationDataFormat":"application/json"}}}}`,
	} {
		f.Add([]byte(seed))
	}
	s := New(Deps{Metrics: metrics.New(prometheus.NewRegistry())}, Config{})
	f.Fuzz(func(t *testing.T, body []byte) {
		decode := func(v any) error {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return s.decode(httptest.NewRecorder(), r, v)
		}
		check := func(err error) {
			if err == nil {
				return
			}
			if p := asProblem(err); p.status != http.StatusBadRequest && p.status != http.StatusRequestEntityTooLarge {
				t.Fatalf("body %q refused with %d: %v", body, p.status, err)
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
				check(invalid{err.Error()})
			}
		} else {
			check(err)
		}
		for _, v := range []any{&failureRequest{}, &bpmnErrorRequest{}, &extendLockRequest{}, &startRequest{}, &migrateRequest{},
			&migrationRequest{}, &retryRequest{}, &messageRequest{}, &map[string]any{}} {
			check(decode(v))
		}
	})
}
