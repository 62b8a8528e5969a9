package api

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sutra-run/worker/fault"
)

// POST /oauth/token is an OAuth 2.0 token endpoint for the client
// credentials grant (RFC 6749 §4.4), so that clients configured for OAuth
// (Zeebe's Go client and zbctl, Camunda's Java client and Node SDK) work
// unchanged: the client secret is a configured token (SUTRA_API_TOKEN or
// SUTRA_ADMIN_TOKEN), the client id and audience are free, and the access
// token answered opens the secret's scope until it expires.
//
// Access tokens are JWTs (HS256) that every replica checks on its own: the
// key signing those of a scope is derived from the scope's configured
// token, so rotating a token refuses every access token issued for the old
// one. A JWT because Camunda's Node SDK decodes the access token as one to
// read its expiry; signed and checked with golang-jwt rather than by hand.

const (
	tokenRoute = "POST /oauth/token"
	// tokenBodyLimit bounds a token request: four short fields.
	tokenBodyLimit = 8 << 10
	// tokenIssuer is the iss of every access token, checked.
	tokenIssuer = "sutra"
	// DefaultTokenTTL is Credentials.TokenTTL when unset.
	DefaultTokenTTL = time.Hour
)

// issuedClaims are an access token's claims: its scope's claim name, and
// the issuer, time of issue, expiry and a random id.
type issuedClaims struct {
	Scope string `json:"scope"`
	jwt.RegisteredClaims
}

func (c Credentials) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

func (c Credentials) ttl() time.Duration {
	if c.TokenTTL <= 0 {
		return DefaultTokenTTL
	}
	return c.TokenTTL
}

// key signs the access tokens of sc. It is derived from sc's token rather
// than the token itself, so that the one secret is never used for two
// things; none when sc has no token.
func (c Credentials) key(sc Scope) ([]byte, error) {
	for _, d := range scopes {
		if d.scope == sc && c.token(sc) != "" {
			return hkdf.Key(sha256.New, []byte(c.token(sc)), nil, "sutra oauth access token: "+d.claim, sha256.Size)
		}
	}
	return nil, errors.New("no token is configured for this scope")
}

// Issue exchanges secret, when it is the configured token of a scope
// (compared in constant time), for an access token of that scope lasting
// TokenTTL. Any other secret is SUTRA.API.UNAUTHORIZED; so is every secret
// when no token is configured (an insecure scope has no secret to present
// and its callers need no access token).
func (c Credentials) Issue(secret []byte) (token string, sc Scope, err error) {
	var claim string
	for _, d := range scopes {
		if want := c.token(d.scope); want != "" && subtle.ConstantTimeCompare(secret, []byte(want)) == 1 && sc == 0 {
			sc, claim = d.scope, d.claim
		}
	}
	if sc == 0 {
		if c.TaskToken == "" && c.AdminToken == "" {
			return "", 0, fault.New(fault.APIUnauthorized, "this worker has no SUTRA_API_TOKEN or SUTRA_ADMIN_TOKEN, so no secret and no access token: call it without one")
		}
		return "", 0, fault.New(fault.APIUnauthorized, "the client secret is not a token of this worker (SUTRA_API_TOKEN or SUTRA_ADMIN_TOKEN)")
	}
	key, err := c.key(sc)
	if err != nil {
		return "", 0, err
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	now := c.now()
	token, err = jwt.NewWithClaims(jwt.SigningMethodHS256, issuedClaims{Scope: claim, RegisteredClaims: jwt.RegisteredClaims{
		Issuer:    tokenIssuer,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(c.ttl())),
		ID:        base64.RawURLEncoding.EncodeToString(nonce),
	}}).SignedString(key)
	return token, sc, err
}

// verify is the scope of an access token Issue made: its signature is
// checked (in constant time) with the key of the scope it claims, then its
// expiry. An expired token's error is jwt.ErrTokenExpired.
func (c Credentials) verify(token []byte) (Scope, error) {
	var claims issuedClaims
	var sc Scope
	_, err := jwt.ParseWithClaims(string(token), &claims, func(*jwt.Token) (any, error) {
		for _, d := range scopes {
			if d.claim == claims.Scope {
				sc = d.scope
			}
		}
		return c.key(sc)
	}, jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithIssuer(tokenIssuer),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(c.now))
	if err != nil {
		return 0, err
	}
	return sc, nil
}

// tokenRequest is what a token request carries, in a form or in JSON.
type tokenRequest struct {
	GrantType    string `json:"grant_type"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	Audience     string `json:"audience"`
}

// oauthProtocol answers in RFC 6749's error format (§5.2), with our code
// beside it; a refusal of the listener's (a body too large, no room) is an
// invalid_request.
var oauthProtocol = Protocol{Refuse: func(w http.ResponseWriter, status int, code, msg string) {
	writeOAuthError(w, status, "invalid_request", code, msg)
}}

func writeOAuthError(w http.ResponseWriter, status int, oauthErr, code, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, status, struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
		Code        string `json:"code"`
	}{oauthErr, msg, code})
}

// serveTokens serves POST /oauth/token, to every caller: the request itself
// carries the credential. It takes a form, as RFC 6749 says, and JSON,
// which some clients send. A form is what a page of another origin can
// post without asking first; sameOrigin refuses such a page (a browser
// names its origin), and the answer holds nothing the request did not.
func (s *Server) serveTokens() {
	s.mux.HandleFunc(tokenRoute, s.chain(oauthProtocol, Route{
		Pattern:   tokenRoute,
		BodyTypes: []string{"application/x-www-form-urlencoded", "application/json"},
		BodyLimit: tokenBodyLimit,
		Handler:   s.issueToken,
	}))
}

func (s *Server) issueToken(w http.ResponseWriter, r *http.Request) {
	req, basic, err := readTokenRequest(r)
	switch {
	case err != nil:
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", fault.APIInvalid, err.Error())
		return
	case req.GrantType == "":
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", fault.APIInvalid, "grant_type is missing: this endpoint takes grant_type=client_credentials")
		return
	case req.GrantType != "client_credentials":
		writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type", fault.APIInvalid,
			fmt.Sprintf("grant_type %.64q: this endpoint takes client_credentials only", req.GrantType))
		return
	}
	if retry, err := s.deps.AuthFailures.Throttled(SurfaceOAuth, r.RemoteAddr); err != nil {
		s.throttled(w, oauthProtocol, retry, err)
		return
	}
	token, sc, err := s.cfg.Credentials.Issue([]byte(req.ClientSecret))
	if err != nil {
		s.deps.AuthFailures.Failed(SurfaceOAuth, r.RemoteAddr)
		if basic {
			// RFC 6749 §5.2: the scheme the client authenticated with.
			w.Header().Set("WWW-Authenticate", `Basic realm="sutra"`)
		}
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", fault.Code(err), fault.Reason(err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusOK, struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Scope       string `json:"scope"`
	}{token, "Bearer", int64(s.cfg.Credentials.ttl() / time.Second), claimOf(sc)})
}

// readTokenRequest reads a token request's fields from its body, and its
// client credentials from HTTP Basic when it has them there (basic): each
// form-encoded (RFC 6749 §2.3.1), as golang.org/x/oauth2 sends them. A
// request may authenticate one way only, and name a field once.
func readTokenRequest(r *http.Request) (req tokenRequest, basic bool, err error) {
	if mediaTypeOf(r) == "application/json" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return req, false, err
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return req, false, fmt.Errorf("the body is not a JSON object of strings: %v", err)
		}
	} else {
		if err := r.ParseForm(); err != nil {
			return req, false, err
		}
		for name, field := range map[string]*string{"grant_type": &req.GrantType, "client_id": &req.ClientID,
			"client_secret": &req.ClientSecret, "audience": &req.Audience} {
			switch v := r.PostForm[name]; len(v) {
			case 0:
			case 1:
				*field = v[0]
			default:
				return req, false, fmt.Errorf("%s is given %d times", name, len(v))
			}
		}
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		return req, false, nil
	}
	if req.ClientSecret != "" {
		return req, true, errors.New("the client secret is both in the Authorization header and in the body: send it once")
	}
	if req.ClientID, err = url.QueryUnescape(id); err == nil {
		req.ClientSecret, err = url.QueryUnescape(secret)
	}
	if err != nil {
		return req, true, fmt.Errorf("the Basic credentials are not form-encoded: %v", err)
	}
	return req, true, nil
}

func claimOf(sc Scope) string {
	for _, d := range scopes {
		if d.scope == sc {
			return d.claim
		}
	}
	return ""
}
