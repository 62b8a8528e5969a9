package api

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
)

// Scope is what one credential opens. A route takes the credentials of one
// or more scopes (Tasks|Admin); a credential of another scope is refused
// with 403 SUTRA.API.FORBIDDEN, so that a token handed to a task worker
// never cancels an instance, and an operator's never locks a task.
type Scope uint8

const (
	// Tasks is the task workers' scope (SUTRA_API_TOKEN): external tasks,
	// and user tasks for the tools people work them with.
	Tasks Scope = 1 << iota
	// Admin is the operators' scope (SUTRA_ADMIN_TOKEN): the admin API.
	Admin
)

// scopes describe each scope to the operator, in the order checked; claim
// names it in the tokens POST /oauth/token issues (oauth.go).
var scopes = []struct {
	scope                       Scope
	name, tokenVar, insecureVar string
	offCode                     string
	claim                       string
}{
	{Tasks, "task API", "SUTRA_API_TOKEN", "SUTRA_API_INSECURE", fault.APIForbidden, "tasks"},
	{Admin, "admin API", "SUTRA_ADMIN_TOKEN", "SUTRA_ADMIN_INSECURE", fault.AdminDisabled, "admin"},
}

// Credentials admit callers to each scope. A scope with a token serves the
// callers that present it; one without a token serves every caller when it
// is insecure (a trusted network only), and is off otherwise: its routes
// answer 403 (SUTRA.ADMIN.DISABLED for the admin API). app.Start refuses a
// task API without a token unless it is insecure, and tokens that are equal.
//
// A scope's token also buys access tokens of that scope from POST
// /oauth/token (oauth.go), which Admit takes as it takes the token itself
// until they expire.
type Credentials struct {
	TaskToken     string
	TaskInsecure  bool
	AdminToken    string
	AdminInsecure bool
	// TokenTTL is how long an access token issued by POST /oauth/token
	// lasts (default 1h).
	TokenTTL time.Duration
	// Clock stamps issued tokens and judges their expiry (default the real
	// clock).
	Clock clock.Clock
}

func (c Credentials) token(sc Scope) string {
	if sc == Admin {
		return c.AdminToken
	}
	return c.TaskToken
}

func (c Credentials) insecure(sc Scope) bool {
	if sc == Admin {
		return c.AdminInsecure
	}
	return c.TaskInsecure
}

// report logs, at start, each scope that is open to every caller (a
// warning) or off.
func (c Credentials) report(log *slog.Logger, addr string) {
	for _, d := range scopes {
		switch {
		case c.token(d.scope) != "":
		case c.insecure(d.scope):
			log.Warn(fmt.Sprintf("%s is not set and %s is true: the %s accepts every caller", d.tokenVar, d.insecureVar, d.name), "addr", addr)
		default:
			log.Info(fmt.Sprintf("%s is not set: the %s is off", d.tokenVar, d.name), "addr", addr)
		}
	}
}

type scopeKey struct{}

// ScopeOf is the scope whose token the call presented; 0 when the route
// serves every caller (an insecure scope).
func ScopeOf(r *http.Request) Scope {
	sc, _ := r.Context().Value(scopeKey{}).(Scope)
	return sc
}

// Admit decides whether a call that presents token may use a route that
// takes allowed's scopes, whatever carries the token (an HTTP header here;
// a gRPC gateway's metadata next). It returns the scope the token opened
// (0 when one of allowed's scopes is insecure, so every caller is served)
// or an error whose code the protocol answers with: SUTRA.API.UNAUTHORIZED
// (no valid token, or an issued one that expired), SUTRA.API.FORBIDDEN (a
// token of another scope), or the off code of a scope that is off
// (SUTRA.ADMIN.DISABLED). A configured token, or an access token that POST
// /oauth/token issued for one and that has not expired, opens its scope.
// Every token and signature is compared in constant time.
func (c Credentials) Admit(token []byte, allowed Scope) (Scope, error) {
	on := false
	for _, d := range scopes {
		if allowed&d.scope == 0 {
			continue
		}
		if c.token(d.scope) == "" && c.insecure(d.scope) {
			return 0, nil
		}
		on = on || c.token(d.scope) != ""
	}
	if !on {
		for _, d := range scopes {
			if allowed&d.scope != 0 {
				return 0, fault.New(d.offCode, "the %s is off: set %s (or %s=true on a trusted network)", d.name, d.tokenVar, d.insecureVar)
			}
		}
	}
	var matched, other Scope
	for _, d := range scopes {
		want := c.token(d.scope)
		if want == "" || subtle.ConstantTimeCompare(token, []byte(want)) != 1 {
			continue
		}
		if allowed&d.scope != 0 {
			matched = d.scope
		} else {
			other = d.scope
		}
	}
	if matched == 0 && other == 0 {
		sc, err := c.verify(token)
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return 0, fault.New(fault.APIUnauthorized, "this access token expired: get a new one from POST /oauth/token")
		case err != nil:
		case allowed&sc != 0:
			matched = sc
		default:
			other = sc
		}
	}
	switch {
	case matched != 0:
		return matched, nil
	case other != 0:
		return 0, fault.New(fault.APIForbidden, "this token opens the %s, not this route: call it with %s", nameOf(other), tokenVars(allowed))
	}
	return 0, fault.New(fault.APIUnauthorized, "a valid token is required: %s, or an access token from POST /oauth/token", tokenVars(allowed))
}

// authorize serves next to the callers Credentials.Admit admits. The token
// travels as a Bearer token or as the password of HTTP Basic authentication
// (Camunda's clients ship a Basic auth interceptor); the scheme is
// case-insensitive (RFC 7235).
func (s *Server) authorize(p Protocol, allowed Scope, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retry, err := s.deps.AuthFailures.Throttled(SurfaceAPI, r.RemoteAddr); err != nil {
			s.throttled(w, p, retry, err)
			return
		}
		sc, err := s.cfg.Credentials.Admit(presented(r), allowed)
		switch code := fault.Code(err); {
		case err == nil:
			next(w, r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc)))
		case code == fault.APIUnauthorized:
			s.deps.AuthFailures.Failed(SurfaceAPI, r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", p.Challenge)
			p.Refuse(w, http.StatusUnauthorized, code, fault.Reason(err)+
				" (Authorization: Bearer <token>, or HTTP Basic with the token as password)")
		default:
			p.Refuse(w, http.StatusForbidden, code, fault.Reason(err))
		}
	}
}

// throttled refuses a call from a source that failed its credentials too
// often: 429, Retry-After in whole seconds.
func (s *Server) throttled(w http.ResponseWriter, p Protocol, retry time.Duration, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	p.Refuse(w, http.StatusTooManyRequests, fault.Code(err), fault.Reason(err))
}

// presented is the token a call presents: Bearer, or the password of HTTP
// Basic.
func presented(r *http.Request) []byte {
	scheme, credentials, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	credentials = strings.TrimLeft(credentials, " ")
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return []byte(credentials)
	case strings.EqualFold(scheme, "Basic"):
		if raw, err := base64.StdEncoding.DecodeString(credentials); err == nil {
			if _, pass, ok := strings.Cut(string(raw), ":"); ok {
				return []byte(pass)
			}
		}
	}
	return nil
}

func nameOf(sc Scope) string {
	for _, d := range scopes {
		if d.scope == sc {
			return d.name
		}
	}
	return "?"
}

// tokenVars names the variables whose tokens open allowed.
func tokenVars(allowed Scope) string {
	var names []string
	for _, d := range scopes {
		if allowed&d.scope != 0 {
			names = append(names, d.tokenVar)
		}
	}
	return strings.Join(names, " or ")
}
