package api

import (
	"net/http"
)

// Problem is an RFC 9457 problem document with our code.
type Problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Code       string `json:"code"`
	InstanceID string `json:"instance_id,omitempty"`
	ElementID  string `json:"element_id,omitempty"`
}

// WriteProblem answers p with status as application/problem+json; its
// type and title follow from the code and the status. A 503 says when to
// retry.
func WriteProblem(w http.ResponseWriter, status int, p Problem) {
	p.Status = status
	p.Title = http.StatusText(status)
	p.Type = "https://sutra.run/problems/" + p.Code
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = jsonEncode(w, p)
}
