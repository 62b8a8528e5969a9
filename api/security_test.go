package api_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

// raw sends one request to the API with the token of its path (tokenFor)
// and returns the status, the headers and the body as they came.
func (b *adminBundle) raw(t *testing.T, method, url, contentType, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenFor(url))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(out)
}

func codeOf(body string) string {
	var e struct{ Code string }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Code
}

// A browser holding the credentials sends a form, a text/plain or a bodiless
// POST from any page without asking the server first (CSRF). Every
// state-changing call, with a body or without, takes only its own media
// type (415), and none from a page of another origin (403); a refused call
// changes nothing.
func TestStateChangingCallsTakeOnlyJSONAndNoCallFromAnotherOrigin(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.startShop(t, "o-1")
	api := "http://" + b.w.APIAddr()
	before := b.snapshot(t, "o-1")
	calls := []struct{ method, url string }{
		{"POST", b.v1 + "/instances/o-1/cancel"},
		{"POST", b.v1 + "/incidents/1/retry"},
		{"POST", b.v1 + "/user-tasks/1/completion"},
		{"PATCH", b.v1 + "/instances/o-1/variables"},
		{"POST", b.v1 + "/definitions"},
		{"POST", api + "/engine-rest/external-task/1/unlock"},
		{"POST", api + "/engine-rest/external-task/1/complete"},
		{"POST", api + "/engine-rest/external-task/fetchAndLock"},
	}
	for _, c := range calls {
		for _, tt := range []struct{ contentType, body string }{
			{"", "{}"},
			{"application/x-www-form-urlencoded", "a=b"},
			{"application/x-www-form-urlencoded", ""},
			{"text/plain", "{}"},
			{"multipart/form-data; boundary=x", "--x--"},
		} {
			status, _, body := b.raw(t, c.method, c.url, tt.contentType, tt.body)
			if status != http.StatusUnsupportedMediaType || codeOf(body) != fault.APIMediaType {
				t.Errorf("%s %s as %q: %d %s, want 415 %s", c.method, c.url, tt.contentType, status, body, fault.APIMediaType)
			}
		}
		// No type and no body: refused under /v1; the task API takes it
		// (Camunda's Node client unlocks so), and a browser sending one
		// names its Origin, checked below.
		status, _, body := b.raw(t, c.method, c.url, "", "")
		if refused := status == http.StatusUnsupportedMediaType; refused != strings.HasPrefix(c.url, b.v1) {
			t.Errorf("%s %s with no type and no body: %d %s", c.method, c.url, status, body)
		}
		ct := "application/json"
		if strings.HasSuffix(c.url, "/definitions") {
			ct = "application/xml"
		}
		for _, origin := range []string{"http://evil.example", "null", "http://" + b.w.APIAddr() + ".evil.example"} {
			status, _, body := b.raw(t, c.method, c.url, ct, "{}", "Origin", origin)
			if status != http.StatusForbidden || codeOf(body) != fault.APICrossOrigin {
				t.Errorf("%s %s from %s: %d %s, want 403 %s", c.method, c.url, origin, status, body, fault.APICrossOrigin)
			}
		}
	}
	if after := b.snapshot(t, "o-1"); after != before {
		t.Errorf("a refused call changed the instance:\nbefore %s\nafter  %s", before, after)
	}
	// The same origin (a page this listener serves) and no Origin (any
	// client that is not a browser) are served.
	if status, _, body := b.raw(t, "POST", b.v1+"/instances/o-1/cancel", "application/json", "", "Origin", api); status != http.StatusOK {
		t.Errorf("cancel from the same origin with no body: %d %s", status, body)
	}
}

// Browsers remember Basic credentials a challenge made them ask for and send
// them with every later call to the origin, from any page: /v1 challenges
// with Bearer only. The scheme's name is case-insensitive (RFC 7235).
func TestV1ChallengesWithBearerOnlyAndTheSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	resp, err := http.Get(b.v1 + "/definitions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if challenge := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized ||
		strings.Contains(strings.ToLower(challenge), "basic") || !strings.HasPrefix(challenge, "Bearer") {
		t.Errorf("GET /v1/definitions without the token: %d, WWW-Authenticate %q: want 401 with a Bearer challenge only", resp.StatusCode, challenge)
	}
	for _, auth := range []string{"bearer " + adminToken, "BEARER " + adminToken, "Bearer  " + adminToken,
		"basic " + base64.StdEncoding.EncodeToString([]byte("user:"+adminToken))} {
		req, _ := http.NewRequest("GET", b.v1+"/definitions", nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: %d, want 200", auth, resp.StatusCode)
		}
	}
}

// PostgreSQL's text cannot hold a NUL, and an id longer than
// lanes.MaxIDBytes is refused before it is stored or logged: 400 with a
// code, never the database's words or the id echoed back.
func TestNULsAndOverlongIDsAre400WithACodeAndNeitherDatabaseTextNorTheID(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.start(t, "t-1", "nul", nil)
	tasks := b.fetch(t, "w", "nul", 1, time.Minute, 0)
	if len(tasks) != 1 {
		t.Fatalf("fetched %v", tasks)
	}
	long := strings.Repeat("i", lanes.MaxIDBytes+1)
	api := "http://" + b.w.APIAddr()
	for _, tt := range []struct{ name, method, url, body string }{
		{"a completion's variable", "POST", api + "/engine-rest/external-task/" + tasks[0].ID + "/complete",
			`{"workerId":"w","variables":{"note":{"value":"a\u0000b","type":"String"}}}`},
		{"a variable's name", "POST", b.v1 + "/instances", `{"definition":"tasks","variables":{"a\u0000":1}}`},
		{"an instance id in the path", "GET", b.v1 + "/instances/a%00b", ""},
		{"a query", "GET", b.v1 + "/instances?definition=a%00b", ""},
		{"a long instance id in the path", "GET", b.v1 + "/instances/" + long, ""},
		{"a long instance id in a start", "POST", b.v1 + "/instances", `{"definition":"tasks","instance_id":"` + long + `"}`},
		{"a long instance id in a message", "POST", b.v1 + "/messages", `{"message":"m","instance_id":"` + long + `"}`},
		{"a long message id", "POST", b.v1 + "/messages", `{"message":"m","message_id":"` + long + `"}`},
		{"a long task id", "POST", api + "/engine-rest/external-task/" + long + "/unlock", ""},
	} {
		ct := ""
		if tt.method != "GET" {
			ct = "application/json"
		}
		status, _, body := b.raw(t, tt.method, tt.url, ct, tt.body)
		if status != http.StatusBadRequest || codeOf(body) != fault.APIInvalid || strings.Contains(body, long[:32]) ||
			strings.Contains(body, "SQLSTATE") || strings.Contains(body, "Unicode") || strings.Contains(body, "0x00") {
			t.Errorf("%s: %d %.300s, want 400 %s with neither database text nor the id", tt.name, status, body, fault.APIInvalid)
		}
	}
	// A backslash followed by "u0000" is text like any other.
	if status, _, body := b.raw(t, "POST", b.v1+"/instances", "application/json", `{"definition":"tasks","instance_id":"esc","variables":{"s":"\\u0000","topic":"x"}}`); status != http.StatusCreated {
		t.Errorf("an escaped backslash before u0000: %d %s, want 201", status, body)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 't-1' AND outcome IS NOT NULL"); n != 0 {
		t.Error("the refused completion was recorded")
	}
}

// With SUTRA_API_TLS_CERT and SUTRA_API_TLS_KEY the API listener speaks
// HTTPS only.
func TestTheAPIListenerServesTLSWithTheConfiguredCertificate(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t)
	b := setupAdmin(t, nil, func(c *app.Config) { c.API.TLSCert, c.API.TLSKey = certFile, keyFile })
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+b.w.APIAddr()+"/v1/definitions", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("HTTPS call: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Errorf("HTTPS call: %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	if resp, err := http.Get("http://" + b.w.APIAddr() + "/v1/definitions"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest { // Go's answer to plain HTTP on a TLS port
			t.Errorf("plain HTTP on the TLS listener: %d", resp.StatusCode)
		}
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their files and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sutra test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// A token opens its own scope only: a task worker's SUTRA_API_TOKEN never
// acts on the admin API, an operator's SUTRA_ADMIN_TOKEN never locks a
// task; either is 403 SUTRA.API.FORBIDDEN in the format of the route's
// protocol. User tasks take both: people's tools are task workers, and
// operators work them too.
func TestEachTokenOpensItsOwnAPIAndTheOtherIs403Forbidden(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	v1, rest := b.v1, b.base
	fetch := `{"workerId":"w","maxTasks":1,"topics":[]}`
	for _, tt := range []struct {
		method, url, body, token string
		status                   int
		code, contentType        string
	}{
		{"GET", v1 + "/definitions", "", adminToken, http.StatusOK, "", "application/json"},
		{"GET", v1 + "/definitions", "", token, http.StatusForbidden, fault.APIForbidden, "application/problem+json"},
		{"POST", v1 + "/instances/x/cancel", "", token, http.StatusForbidden, fault.APIForbidden, "application/problem+json"},
		{"GET", v1 + "/definitions", "", "wrong", http.StatusUnauthorized, fault.APIUnauthorized, "application/problem+json"},
		{"POST", rest + "/external-task/fetchAndLock", fetch, token, http.StatusOK, "", "application/json"},
		{"POST", rest + "/external-task/fetchAndLock", fetch, adminToken, http.StatusForbidden, fault.APIForbidden, "application/json"},
		{"POST", rest + "/external-task/fetchAndLock", fetch, "wrong", http.StatusUnauthorized, fault.APIUnauthorized, "application/json"},
		{"GET", v1 + "/user-tasks", "", token, http.StatusOK, "", "application/json"},
		{"GET", v1 + "/user-tasks", "", adminToken, http.StatusOK, "", "application/json"},
	} {
		req, _ := http.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+tt.token)
		if tt.method != http.MethodGet {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || codeOf(string(raw)) != tt.code || resp.Header.Get("Content-Type") != tt.contentType {
			t.Errorf("%s %s with %q: %d %s %s, want %d %q as %s", tt.method, tt.url, tt.token, resp.StatusCode,
				resp.Header.Get("Content-Type"), raw, tt.status, tt.code, tt.contentType)
		}
	}
}
