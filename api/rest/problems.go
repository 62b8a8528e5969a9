package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// problem is Camunda's error body (RFC 9457), with the SUTRA.* code in its
// detail and as a member of its own.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
	Code     string `json:"code"`
}

func (p *problem) Error() string { return p.Detail }

// notFoundCode answers a path /v2 does not serve.
const notFoundCode = fault.AdminNotFound

// refuse is a refusal with status and code; its detail starts with the
// code.
func refuse(status int, code, reason string) *problem {
	return &problem{Status: status, Code: code, Detail: code + ": " + reason}
}

// titles are the titles Camunda gives each status (its gRPC-born names).
var titles = map[int]string{
	http.StatusBadRequest:            "INVALID_ARGUMENT",
	http.StatusUnauthorized:          "UNAUTHORIZED",
	http.StatusForbidden:             "FORBIDDEN",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusConflict:              "INVALID_STATE",
	http.StatusRequestEntityTooLarge: "PAYLOAD_TOO_LARGE",
	http.StatusUnsupportedMediaType:  "UNSUPPORTED_MEDIA_TYPE",
	http.StatusTooManyRequests:       "RESOURCE_EXHAUSTED",
	http.StatusInternalServerError:   "INTERNAL",
	http.StatusServiceUnavailable:    "UNAVAILABLE",
	http.StatusGatewayTimeout:        "DEADLINE_EXCEEDED",
}

// writeProblem answers p for the call at path as application/problem+json.
// A refusal over a limit is 503 RESOURCE_EXHAUSTED, its detail naming the
// limit, with Retry-After.
func writeProblem(w http.ResponseWriter, path string, p *problem) {
	p.Title = titles[p.Status]
	if p.Title == "" {
		p.Title = strings.ToUpper(strings.ReplaceAll(http.StatusText(p.Status), " ", "_"))
	}
	if p.Code == fault.APIBusy {
		p.Title = "RESOURCE_EXHAUSTED"
	}
	if p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	p.Type = "https://sutra.run/problems/" + p.Code
	p.Instance = path
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// protocolAt writes the listener's refusals (credentials, body limits,
// caps) of the route at path as problems; their instance is the route's
// path (its keys as {key}), since the listener refuses before the call
// reaches the route.
func protocolAt(path string) api.Protocol {
	return api.Protocol{
		Refuse: func(w http.ResponseWriter, status int, code, msg string) {
			writeProblem(w, path, refuse(status, code, msg))
		},
		Challenge: `Bearer realm="sutra"`,
		// Camunda's clients send a cancellation or a resolution with no
		// body and no media type.
		UntypedBodiless: true,
	}
}

// problemOf is the one table from what a use case, the store or a
// request's decoding answers to /v2's status and code.
func problemOf(err error) *problem {
	var p *problem
	var inv api.Invalid
	var tooLarge *http.MaxBytesError
	var lock *store.LockError
	var notAssignee *store.NotAssigneeError
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &inv):
		return refuse(http.StatusBadRequest, fault.APIInvalid, inv.Msg)
	case errors.As(err, &tooLarge):
		return refuse(http.StatusRequestEntityTooLarge, fault.APITooLarge, err.Error())
	case errors.Is(err, store.ErrNotFound):
		return refuse(http.StatusNotFound, fault.NotFound, err.Error())
	case errors.As(err, &lock):
		return refuse(http.StatusConflict, fault.TaskLockLost, err.Error())
	case errors.As(err, &notAssignee):
		return refuse(http.StatusConflict, fault.TaskNotAssignee, err.Error())
	case errors.Is(err, context.Canceled):
		return refuse(http.StatusServiceUnavailable, fault.Unavailable, "the call was cancelled: retry")
	case errors.Is(err, context.DeadlineExceeded):
		return refuse(http.StatusGatewayTimeout, fault.Unavailable, "the call did not finish in time: retry")
	}
	code, reason := fault.Code(err), fault.Reason(err)
	switch {
	case code == fault.APIInvalid, code == fault.RelayInvalid, code == fault.NoStartEvent,
		strings.HasPrefix(code, "SUTRA.BPMN."), strings.HasPrefix(code, "SUTRA.DMN."):
		return refuse(http.StatusBadRequest, code, reason)
	case code == fault.NotFound, code == fault.AdminNotFound, code == fault.TaskNotFound, code == fault.UnknownDefinition:
		return refuse(http.StatusNotFound, code, reason)
	case code == fault.TaskLockLost, code == fault.TaskNotAssignee, code == fault.NotWaiting, code == fault.InstanceExists:
		return refuse(http.StatusConflict, code, reason)
	case code == fault.APITooLarge, code == fault.StepTooLarge:
		return refuse(http.StatusRequestEntityTooLarge, code, reason)
	case code == fault.APIBusy:
		return refuse(http.StatusServiceUnavailable, code, reason)
	case code == fault.ClaimHeld, code == fault.StepFenced, strings.HasSuffix(code, ".CLAIM_HELD"):
		// Another step holds the instance: a race to retry.
		return refuse(http.StatusServiceUnavailable, code, reason+": retry")
	case code == fault.Unavailable, code == fault.Transient:
		// The cause (the driver's or the broker's words) goes to the log.
		return refuse(http.StatusServiceUnavailable, code, fault.Summary(err)+": retry")
	case code != "":
		return refuse(http.StatusBadRequest, code, reason)
	}
	return refuse(http.StatusInternalServerError, fault.StepFailed, "the call failed; the worker's log has the reason")
}
