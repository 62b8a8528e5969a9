package api_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/zbc"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/testkit"
)

// bearer calls the API with an access token and returns the status and the
// body as they came; fetchAndLock and the admin calls take their own bodies.
func bearer(t *testing.T, b *adminBundle, method, path, accessToken string) (int, string) {
	t.Helper()
	var contentType, body string
	if method == http.MethodPost {
		contentType, body = "application/json", `{"workerId":"w","maxTasks":1,"topics":[]}`
	}
	status, _, out := b.raw(t, method, "http://"+b.w.APIAddr()+path, contentType, body, "Authorization", "Bearer "+accessToken)
	return status, out
}

const fetchPath = "/engine-rest/external-task/fetchAndLock"

// opens says which routes an access token opens: the task API, the admin
// API, the user-task routes both take.
func opens(t *testing.T, b *adminBundle, accessToken string) (tasks, admin, userTasks int) {
	t.Helper()
	tasks, _ = bearer(t, b, "POST", fetchPath, accessToken)
	admin, _ = bearer(t, b, "GET", "/v1/definitions", accessToken)
	userTasks, _ = bearer(t, b, "GET", "/v1/user-tasks", accessToken)
	return tasks, admin, userTasks
}

// golang.org/x/oauth2's client-credentials flow, which Zeebe's Go client
// and zbctl use, gets an access token with either configured token as the
// client secret, whichever way it sends it (HTTP Basic first when it
// detects, or form fields), and the access token opens the routes of the
// secret that bought it, and no others (403 SUTRA.API.FORBIDDEN).
func TestAClientCredentialsTokenOpensTheRoutesOfItsSecretOnly(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleAutoDetect, oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
		for _, tt := range []struct {
			secret, scope          string
			tasks, admin, userTask int
		}{
			{token, "tasks", http.StatusOK, http.StatusForbidden, http.StatusOK},
			{adminToken, "admin", http.StatusForbidden, http.StatusOK, http.StatusOK},
		} {
			cc := clientcredentials.Config{ClientID: "zeebe", ClientSecret: tt.secret, AuthStyle: style,
				TokenURL: "http://" + b.w.APIAddr() + "/oauth/token", EndpointParams: url.Values{"audience": {"zeebe-api"}}}
			tok, err := cc.Token(testkit.Ctx(t))
			if err != nil {
				t.Fatalf("style %d, %s: %v", style, tt.scope, err)
			}
			if tok.Type() != "Bearer" || tok.Extra("scope") != tt.scope || time.Until(tok.Expiry) < 59*time.Minute || time.Until(tok.Expiry) > time.Hour {
				t.Errorf("style %d: %s token of scope %v expiring %s; want Bearer, %s, in 1h", style, tok.Type(), tok.Extra("scope"), tok.Expiry, tt.scope)
			}
			tasks, admin, userTasks := opens(t, b, tok.AccessToken)
			if tasks != tt.tasks || admin != tt.admin || userTasks != tt.userTask {
				t.Errorf("style %d, %s: task API %d, admin API %d, user tasks %d; want %d, %d, %d",
					style, tt.scope, tasks, admin, userTasks, tt.tasks, tt.admin, tt.userTask)
			}
		}
	}
	// The client's own HTTP client carries the token.
	cc := clientcredentials.Config{ClientID: "zeebe", ClientSecret: adminToken, TokenURL: "http://" + b.w.APIAddr() + "/oauth/token"}
	resp, err := cc.Client(testkit.Ctx(t)).Get(b.v1 + "/definitions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/definitions through the client: %d", resp.StatusCode)
	}
}

// Zeebe's Go client (v8.4) obtains its token from the worker as it would
// from Camunda's identity provider: form fields, client id, secret and
// audience, and sends it as a Bearer token.
func TestZeebeGoClientsOAuthProviderGetsAnAccessToken(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	cache, err := zbc.NewOAuthYamlCredentialsCache(filepath.Join(t.TempDir(), "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	provider, err := zbc.NewOAuthCredentialsProvider(&zbc.OAuthProviderConfig{ClientID: "zeebe", ClientSecret: token,
		Audience: "zeebe-api", AuthorizationServerURL: "http://" + b.w.APIAddr() + "/oauth/token", Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{}
	if err := provider.ApplyCredentials(testkit.Ctx(t), headers); err != nil {
		t.Fatal(err)
	}
	accessToken, ok := strings.CutPrefix(headers["Authorization"], "Bearer ")
	if !ok {
		t.Fatalf("Authorization %q: want a Bearer token", headers["Authorization"])
	}
	if status, body := bearer(t, b, "POST", fetchPath, accessToken); status != http.StatusOK {
		t.Errorf("fetchAndLock with the client's token: %d %s", status, body)
	}
}

// An access token lasts SUTRA_OAUTH_TOKEN_TTL by the worker's clock, then
// is 401 SUTRA.API.UNAUTHORIZED saying it expired, in each protocol's
// format.
func TestAnAccessTokenExpiresAfterItsTTL(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	b := setupAdminWith(t, app.Options{Clock: clk}, func(c *app.Config) { c.OAuthTokenTTL = 10 * time.Minute })
	tok, answer := issue(t, b, "application/x-www-form-urlencoded",
		url.Values{"grant_type": {"client_credentials"}, "client_id": {"w"}, "client_secret": {token}}.Encode())
	if answer["expires_in"] != float64(600) {
		t.Errorf("expires_in %v, want 600", answer["expires_in"])
	}
	// Camunda's Node SDK reads the expiry from the token itself, a JWT.
	var claims struct {
		Exp   int64
		Scope string
	}
	if parts := strings.Split(tok, "."); len(parts) == 3 {
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		_ = json.Unmarshal(payload, &claims)
	}
	if want := clk.Now().Add(10 * time.Minute).Unix(); claims.Exp != want || claims.Scope != "tasks" {
		t.Errorf("the token's claims say exp %d, scope %q; want %d, tasks", claims.Exp, claims.Scope, want)
	}
	clk.Advance(10*time.Minute - time.Second)
	if status, body := bearer(t, b, "POST", fetchPath, tok); status != http.StatusOK {
		t.Fatalf("a second before its expiry: %d %s", status, body)
	}
	clk.Advance(time.Second)
	for _, path := range []string{fetchPath, "/v1/user-tasks"} {
		method := "GET"
		if path == fetchPath {
			method = "POST"
		}
		status, body := bearer(t, b, method, path, tok)
		if status != http.StatusUnauthorized || codeOf(body) != fault.APIUnauthorized || !strings.Contains(body, "expired") {
			t.Errorf("%s at its expiry: %d %s, want 401 %s saying it expired", path, status, body, fault.APIUnauthorized)
		}
	}
}

// issue asks the token endpoint for a token and returns it with the whole
// answer; anything but 200 fails the test.
func issue(t *testing.T, b *adminBundle, contentType, body string) (string, map[string]any) {
	t.Helper()
	status, header, out := postToken(t, b, contentType, body)
	var answer map[string]any
	_ = json.Unmarshal([]byte(out), &answer)
	if status != http.StatusOK || answer["token_type"] != "Bearer" || header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token: %d %v %s", status, header, out)
	}
	tok, _ := answer["access_token"].(string)
	return tok, answer
}

// postToken posts body to /oauth/token (with the Bearer token raw sends,
// which is no client secret).
func postToken(t *testing.T, b *adminBundle, contentType, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	return b.raw(t, "POST", "http://"+b.w.APIAddr()+"/oauth/token", contentType, body, header...)
}

// A token changed anywhere, claiming another scope, signed with another
// key (the configured token itself) or with none is 401, never 403 or 200.
func TestAForgedOrTamperedAccessTokenIs401(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	tok, _ := issue(t, b, "application/json", `{"grant_type":"client_credentials","client_id":"w","client_secret":"`+token+`"}`)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("access token %q is not a JWT", tok)
	}
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string) string { // a character in the middle: no padding bit
		i := len(s) / 2
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	asAdmin := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(claims), `"scope":"tasks"`, `"scope":"admin"`, 1)))
	exp := jwt.NewNumericDate(time.Now().Add(time.Hour))
	withKey := func(method jwt.SigningMethod, key any, scope string) string {
		s, err := jwt.NewWithClaims(method, jwt.MapClaims{"iss": "sutra", "scope": scope, "exp": exp}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for name, forged := range map[string]string{
		"signature changed":           parts[0] + "." + parts[1] + "." + flip(parts[2]),
		"claims changed":              parts[0] + "." + flip(parts[1]) + "." + parts[2],
		"claims another scope":        parts[0] + "." + asAdmin + "." + parts[2],
		"signed with the token":       withKey(jwt.SigningMethodHS256, []byte(token), "tasks"),
		"admin, signed with a guess":  withKey(jwt.SigningMethodHS256, []byte(adminToken), "admin"),
		"no signature (alg none)":     withKey(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "tasks"),
		"the token's header and body": parts[0] + "." + parts[1] + ".",
	} {
		for _, path := range []string{fetchPath, "/v1/definitions"} {
			method := "GET"
			if path == fetchPath {
				method = "POST"
			}
			if status, body := bearer(t, b, method, path, forged); status != http.StatusUnauthorized || codeOf(body) != fault.APIUnauthorized {
				t.Errorf("%s on %s: %d %s, want 401 %s", name, path, status, body, fault.APIUnauthorized)
			}
		}
	}
	if status, body := bearer(t, b, "POST", fetchPath, tok); status != http.StatusOK {
		t.Errorf("the token itself: %d %s", status, body)
	}
}

// Every replica takes another's access tokens (nothing is stored), until
// the token whose secret bought them is rotated; the new token buys new
// ones, even one that HTTP Basic carries form-encoded (RFC 6749 §2.3.1).
func TestAnAccessTokenOpensEveryReplicaUntilItsSecretIsRotated(t *testing.T) {
	t.Parallel()
	issuer := setupAdmin(t, nil, nil)
	const newToken = "r0tated+:%2F key"
	rotated := setupAdmin(t, nil, func(c *app.Config) { c.API.Token = newToken })
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"w"}, "client_secret": {token}}.Encode()
	taskTok, _ := issue(t, issuer, "application/x-www-form-urlencoded", form)
	adminTok, _ := issue(t, issuer, "application/x-www-form-urlencoded", strings.Replace(form, token, adminToken, 1))
	if status, body := bearer(t, rotated, "POST", fetchPath, taskTok); status != http.StatusUnauthorized || codeOf(body) != fault.APIUnauthorized {
		t.Errorf("a task token bought with the rotated-away secret: %d %s, want 401", status, body)
	}
	// The admin token was not rotated: its access tokens go on.
	if status, body := bearer(t, rotated, "GET", "/v1/definitions", adminTok); status != http.StatusOK {
		t.Errorf("an admin token on the replica that rotated the task token: %d %s", status, body)
	}
	cc := clientcredentials.Config{ClientID: "a b", ClientSecret: newToken, AuthStyle: oauth2.AuthStyleInHeader,
		TokenURL: "http://" + rotated.w.APIAddr() + "/oauth/token"}
	tok, err := cc.Token(testkit.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if status, body := bearer(t, rotated, "POST", fetchPath, tok.AccessToken); status != http.StatusOK {
		t.Errorf("a task token bought with the new secret: %d %s", status, body)
	}
}

// The endpoint answers in RFC 6749's terms (§5.2), with the code beside:
// a secret that is no token is 401 invalid_client (challenging with Basic
// when the client sent Basic); another grant is unsupported_grant_type;
// any other mistake, and what the listener refuses, is invalid_request.
func TestTheTokenEndpointRefusesInOAuthTerms(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	const form = "application/x-www-form-urlencoded"
	basic := func(id, secret string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
	}
	for _, tt := range []struct {
		name, contentType, body string
		header                  []string
		status                  int
		oauthErr, code          string
		challenge               bool
	}{
		{"a wrong secret", form, "grant_type=client_credentials&client_id=w&client_secret=nope", nil, 401, "invalid_client", fault.APIUnauthorized, false},
		{"a wrong secret in Basic", form, "grant_type=client_credentials", []string{"Authorization", basic("w", "nope")}, 401, "invalid_client", fault.APIUnauthorized, true},
		{"no secret", form, "grant_type=client_credentials&client_id=w", nil, 401, "invalid_client", fault.APIUnauthorized, false},
		{"a Bearer token is no client secret", form, "grant_type=client_credentials", nil, 401, "invalid_client", fault.APIUnauthorized, false},
		{"a wrong secret in JSON", "application/json", `{"grant_type":"client_credentials","client_secret":"nope"}`, nil, 401, "invalid_client", fault.APIUnauthorized, false},
		{"another grant", form, "grant_type=password&client_secret=" + token, nil, 400, "unsupported_grant_type", fault.APIInvalid, false},
		{"no grant", form, "client_id=w&client_secret=" + token, nil, 400, "invalid_request", fault.APIInvalid, false},
		{"the secret in Basic and in the body", form, "grant_type=client_credentials&client_secret=" + token,
			[]string{"Authorization", basic("w", token)}, 400, "invalid_request", fault.APIInvalid, false},
		{"a field twice", form, "grant_type=client_credentials&client_secret=" + token + "&client_secret=" + token, nil, 400, "invalid_request", fault.APIInvalid, false},
		{"JSON not an object", "application/json", `["client_credentials"]`, nil, 400, "invalid_request", fault.APIInvalid, false},
		{"text", "text/plain", "grant_type=client_credentials&client_secret=" + token, nil, 415, "invalid_request", fault.APIMediaType, false},
		{"too large", form, "grant_type=client_credentials&audience=" + strings.Repeat("a", 9000) + "&client_secret=" + token, nil, 413, "invalid_request", fault.APITooLarge, false},
		{"from another origin", form, "grant_type=client_credentials&client_secret=" + token, []string{"Origin", "http://evil.example"}, 403, "invalid_request", fault.APICrossOrigin, false},
	} {
		status, header, body := postToken(t, b, tt.contentType, tt.body, tt.header...)
		var answer struct{ Error, Code string }
		_ = json.Unmarshal([]byte(body), &answer)
		challenge := strings.HasPrefix(header.Get("WWW-Authenticate"), "Basic ")
		if status != tt.status || answer.Error != tt.oauthErr || answer.Code != tt.code || challenge != tt.challenge || header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s (WWW-Authenticate %q), want %d %s %s, challenge %v", tt.name, status, body,
				header.Get("WWW-Authenticate"), tt.status, tt.oauthErr, tt.code, tt.challenge)
		}
	}
}

// A worker with no token at all has no secret to sell access tokens for:
// its callers need none, and every token request is 401 invalid_client.
func TestAWorkerWithNoTokenIssuesNoAccessToken(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, func(c *app.Config) {
		c.API.Token, c.AdminToken, c.API.Insecure, c.AdminInsecure = "", "", true, true
	})
	for _, secret := range []string{"", token, "anything"} {
		status, _, body := postToken(t, b, "application/x-www-form-urlencoded", "grant_type=client_credentials&client_secret="+secret)
		var answer struct{ Error, Code string }
		_ = json.Unmarshal([]byte(body), &answer)
		if status != http.StatusUnauthorized || answer.Error != "invalid_client" || answer.Code != fault.APIUnauthorized {
			t.Errorf("secret %q: %d %s, want 401 invalid_client", secret, status, body)
		}
	}
}
