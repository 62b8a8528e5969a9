package zeebe

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sutra-run/worker/fault"
)

// A gateway answer never quotes the driver's or the server's words: an
// outage says what the gateway was doing, an error without a code is a
// bare Internal; the cause stays behind for the log.
func TestStatusesNeverQuoteTheCause(t *testing.T) {
	driver := errors.New(`unable to encode 99999999999 into binary format for int4 (OID 23)`)
	for err, want := range map[error]codes.Code{
		fault.Wrap(fault.Unavailable, driver, "looking up definition 7"): codes.Unavailable,
		errors.Join(errors.New("looking up definition 7"), driver):       codes.Internal,
	} {
		got := statusOf(err)
		st := status.Convert(got)
		if st.Code() != want || strings.Contains(st.Message(), "int4") {
			t.Errorf("%v: %s %q, want %s without the cause", err, st.Code(), st.Message(), want)
		}
		if !errors.Is(got, driver) {
			t.Errorf("%v: the cause is lost for the log", err)
		}
	}
}
