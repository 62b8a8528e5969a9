package admin

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// An outage's answer says what the worker was doing, never the driver's or
// the server's words (a statement, a value, an address), which go to the
// log; an error without a code is a bare 500.
func TestProblemsNeverQuoteTheCause(t *testing.T) {
	driver := errors.New(`failed to encode args[1]: unable to encode 99999999999 into binary format for int4 (OID 23)`)
	for _, err := range []error{
		fault.Wrap(fault.Unavailable, driver, "reading definition shop@1"),
		fault.Wrap(fault.Transient, driver, "reading definition shop@1"),
		errors.Join(errors.New("reading definition shop@1"), driver),
	} {
		p := asProblem(err)
		if strings.Contains(p.p.Detail, "int4") || p.status < http.StatusInternalServerError {
			t.Errorf("%v: %d %q", err, p.status, p.p.Detail)
		}
	}
}

// The use cases' refusals are fault codes; the admin API answers each with
// the status its callers branch on, as it did when the handlers refused.
func TestTheUseCasesCodesMapToTheirStatuses(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fault.New(fault.APIInvalid, "a timer incident's retry takes no variables"), http.StatusBadRequest, fault.APIInvalid},
		{fault.New(fault.NotWaiting, "incident 7 is resolved"), http.StatusConflict, fault.NotWaiting},
		{fault.New(fault.AdminNotFound, "decision \"d\" is not deployed"), http.StatusNotFound, fault.AdminNotFound},
		{claimHeld("retry", fault.New("SUTRA.ADMIN.RETRY.CLAIM_HELD", "held")), http.StatusConflict, "SUTRA.ADMIN.RETRY.CLAIM_HELD"},
	} {
		p := asProblem(c.err)
		if p.status != c.status || p.p.Code != c.code {
			t.Errorf("%v: %d %s %q, want %d %s", c.err, p.status, p.p.Code, p.p.Detail, c.status, c.code)
		}
	}
}
