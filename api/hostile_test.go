package api_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
)

// A message name, an id or a correlation key travels in AMQP short strings
// (255 bytes): one longer, with a NUL or not UTF-8 is refused at the call
// with the one rule every surface uses, and a ttl the consumer would refuse
// or that passes the documented maximum is refused too, naming it. None of
// them reaches the broker: the publishing connection stays up and the next
// legitimate message is published.
func TestMessageNamesKeysAndTTLsAreRefusedBeforeTheBroker(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.w.Broker().TestSignals.Init()
	long := strings.Repeat("n", 300)
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"message": long}, "message is 300 bytes long"},
		{map[string]any{"message": "paid", "correlation_key": strings.Repeat("k", 256)}, "correlation_key is 256 bytes long"},
		{map[string]any{"message": "pa\x00id"}, "holds \\u0000"},
		{map[string]any{"message": "paid", "correlation_key": "o-1", "ttl": "garbage"}, "ttl is not an ISO 8601 duration"},
		{map[string]any{"message": "paid", "correlation_key": "o-1", "ttl": "PT1000000000S"}, "ttl is not an ISO 8601 duration"},
		{map[string]any{"message": "paid", "correlation_key": "o-1", "ttl": "P366D"}, "maximum time to live, P365D"},
		{map[string]any{"message": "paid", "correlation_key": "o-1", "ttl": "PT0S"}, "ttl is not positive"},
	} {
		status, body := b.do(t, "POST", "/messages", c.body)
		if detail, _ := body["detail"].(string); status != 400 || body["code"] != fault.APIInvalid || !strings.Contains(detail, c.want) {
			t.Errorf("%.60v: %d %v, want 400 %s saying %q", c.body, status, body, fault.APIInvalid, c.want)
		}
		if detail, _ := body["detail"].(string); strings.Contains(detail, long) {
			t.Errorf("the answer quotes the name whole")
		}
	}
	status, body := b.do(t, "POST", "/messages", map[string]any{"message": "paid", "correlation_key": "o-1", "ttl": "P365D"})
	if status != 202 {
		t.Fatalf("a message with the longest ttl: %d %v", status, body)
	}
	if gone := b.w.Broker().TestSignals.PublishDisconnected.Drain(); len(gone) > 0 {
		t.Errorf("the publishing connection dropped: %v", gone)
	}
}

// CheckText is the one rule: length in bytes, NUL, UTF-8.
func TestCheckTextRefusesLongNULAndNotUTF8(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{strings.Repeat("é", 128): "256 bytes long", "a\x00": "NUL", "a\xff": "UTF-8"} {
		if err := api.CheckText("name", v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", v, err, want)
		}
	}
	if err := api.CheckText("name", strings.Repeat("é", 127)+"n"); err != nil {
		t.Errorf("255 bytes refused: %v", err)
	}
}

// A number past a 32-bit column in a path, a query or a body is a 400
// naming the field, never the driver's words in a 503.
func TestOutOfRangeNumbersAre400NamingTheFieldWithoutDriverText(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	for _, c := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"GET", "/definitions/shop/versions/99999999999", nil, "version"},
		{"GET", "/definitions/shop/versions/99999999999/statistics", nil, "version"},
		{"GET", "/decisions/d/versions/99999999999", nil, "version"},
		{"GET", "/instances?version=99999999999", nil, "version"},
		{"GET", "/decisions?after=d:99999999999", nil, "after's version"},
		{"POST", "/instances", map[string]any{"definition": "shop", "version": 99999999999}, "version"},
		{"POST", "/instances/o-1/migrate", map[string]any{"target_version": 99999999999}, "target_version"},
		{"POST", "/migrations", map[string]any{"definition": "shop", "from_version": 1, "to_version": 99999999999}, "to_version"},
		{"POST", "/decisions/d/evaluation", map[string]any{"version": 99999999999}, "version"},
	} {
		status, body := b.do(t, c.method, c.path, c.body)
		detail, _ := body["detail"].(string)
		if status != 400 || !strings.HasPrefix(detail, c.field+" 99999999999 is out of range") {
			t.Errorf("%s %s: %d %v, want 400 naming %s", c.method, c.path, status, body, c.field)
		}
		if strings.Contains(detail, "int4") || strings.Contains(detail, "encode") {
			t.Errorf("%s %s: driver text in the answer: %s", c.method, c.path, detail)
		}
	}
}

// clientFrom is an HTTP client whose connections come from ip (a loopback
// address of its own: another source).
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// get GETs url with token from client and returns the status, the code
// and the Retry-After header.
func get(t *testing.T, client *http.Client, url, token string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, codeOf(string(body)), resp.Header.Get("Retry-After")
}

// Failed credentials are counted by surface, and a source address that
// keeps failing is refused unchecked (429) until its budget refills, on
// the API and on /oauth/token; a client at another address, and valid
// tokens, never spend it.
func TestASourceThatKeepsFailingItsCredentialsIsThrottledAndCounted(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	b := setupAdminWith(t, app.Options{Clock: clk}, func(c *app.Config) { c.API.AuthFailureBurst = 20 })
	guesser, valid := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	url := b.v1 + "/definitions"
	for range 50 { // valid calls spend nothing
		if st, _, _ := get(t, guesser, url, adminToken); st != 200 {
			t.Fatalf("a valid call: %d", st)
		}
	}
	for i := range 20 {
		if st, code, _ := get(t, guesser, url, "guess"); st != 401 {
			t.Fatalf("guess %d: %d %s, want 401", i, st, code)
		}
	}
	st, code, retry := get(t, guesser, url, "guess")
	if st != 429 || code != fault.APIAuthThrottled || retry != "1" {
		t.Fatalf("guess 21: %d %s Retry-After %q, want 429 %s, 1", st, code, retry, fault.APIAuthThrottled)
	}
	if st, code, _ := get(t, guesser, url, adminToken); st != 429 {
		t.Fatalf("the right token from the throttled source: %d %s, want 429 (nothing is checked)", st, code)
	}
	if st, _, _ := get(t, valid, url, adminToken); st != 200 {
		t.Fatalf("a valid client at another address: %d", st)
	}
	form := "grant_type=client_credentials&client_id=x&client_secret=guess"
	resp, err := guesser.Post("http://"+b.w.APIAddr()+"/oauth/token", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Fatalf("/oauth/token from the throttled source: %d", resp.StatusCode)
	}
	clk.Advance(time.Second) // one failure's worth refilled
	if st, _, _ := get(t, guesser, url, "guess"); st != 401 {
		t.Fatalf("after a second: %d, want 401", st)
	}
	if st, _, _ := get(t, guesser, url, "guess"); st != 429 {
		t.Fatalf("the second guess after a second: %d, want 429", st)
	}
	// 20 failed, 2 throttled, 1 failed and 1 throttled after the second.
	for surface, want := range map[string]float64{"api": 24, "oauth": 1} {
		if n := b.counter(t, "sutra_api_auth_failures_total", "surface", surface); n != want {
			t.Errorf("%v failures of %s, want %v", n, surface, want)
		}
	}
}
