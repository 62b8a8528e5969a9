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
