package admin

import (
	"errors"
	"net/http"
	"strings"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// apiError is an admin call's refusal: an HTTP status and a problem.
type apiError struct {
	status int
	p      api.Problem
}

func (e *apiError) Error() string { return e.p.Code + ": " + e.p.Detail }

func refuse(status int, code, detail string) *apiError {
	return &apiError{status: status, p: api.Problem{Code: code, Detail: detail}}
}

// asProblem maps an error of the store, the lanes or the request to the
// status and code an admin caller branches on.
func asProblem(err error) *apiError {
	var ae *apiError
	var inv api.Invalid
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &inv):
		return refuse(http.StatusBadRequest, fault.APIInvalid, inv.Msg)
	case errors.As(err, &tooLarge):
		return refuse(http.StatusRequestEntityTooLarge, fault.APITooLarge, err.Error())
	case errors.Is(err, store.ErrNotFound):
		return refuse(http.StatusNotFound, fault.AdminNotFound, err.Error())
	}
	code := fault.Code(err)
	switch {
	case code == fault.APIInvalid:
		return refuse(http.StatusBadRequest, code, fault.Reason(err))
	case code == fault.NotFound, code == fault.UnknownDefinition, code == fault.TaskNotFound, code == fault.AdminNotFound:
		return refuse(http.StatusNotFound, code, fault.Reason(err))
	case code == fault.InstanceExists, code == fault.NotWaiting, code == fault.MigrateListener:
		return refuse(http.StatusConflict, code, fault.Reason(err))
	case strings.HasPrefix(code, "SUTRA.BPMN."), strings.HasPrefix(code, "SUTRA.DMN."), code == fault.IncidentExpressionLimit, code == fault.MigrateUnreachable, code == fault.MigrateAdHoc,
		code == fault.ModifyRefused:
		p := refuse(http.StatusUnprocessableEntity, code, fault.Reason(err))
		p.p.ElementID = quoted(fault.Reason(err))
		return p
	case code == fault.Unavailable, code == fault.Transient, code == fault.StepFenced:
		// Its cause (the driver's or the broker's words) goes to the log.
		return refuse(http.StatusServiceUnavailable, fault.Unavailable, fault.Summary(err)+": retry")
	case code != "":
		return refuse(http.StatusUnprocessableEntity, code, fault.Reason(err))
	}
	// The cause (a database's words, say) goes to the log, not the caller.
	return refuse(http.StatusInternalServerError, fault.StepFailed, "the call failed; the worker's log has the reason")
}

// quoted is the first double-quoted name in msg: the element a BPMN or
// migration refusal names.
func quoted(msg string) string {
	_, rest, ok := strings.Cut(msg, `"`)
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, `"`)
	if !ok {
		return ""
	}
	return name
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
