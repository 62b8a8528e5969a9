package api_test

import (
	"testing"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
)

// Admit is the one decision every protocol's routes are authorised by: a
// token opens its own scope only; a scope without a token is open when it
// is insecure and off otherwise.
func TestATokenOpensItsOwnScopeOnlyAndAScopeWithoutATokenIsOffUnlessInsecure(t *testing.T) {
	both := api.Credentials{TaskToken: "task", AdminToken: "admin"}
	for _, tt := range []struct {
		name    string
		creds   api.Credentials
		token   string
		allowed api.Scope
		scope   api.Scope
		code    string
	}{
		{"task token, task route", both, "task", api.Tasks, api.Tasks, ""},
		{"admin token, admin route", both, "admin", api.Admin, api.Admin, ""},
		{"task token, admin route", both, "task", api.Admin, 0, fault.APIForbidden},
		{"admin token, task route", both, "admin", api.Tasks, 0, fault.APIForbidden},
		{"task token, user-task route", both, "task", api.Tasks | api.Admin, api.Tasks, ""},
		{"admin token, user-task route", both, "admin", api.Tasks | api.Admin, api.Admin, ""},
		{"no token", both, "", api.Admin, 0, fault.APIUnauthorized},
		{"a wrong token", both, "tas", api.Tasks, 0, fault.APIUnauthorized},
		{"admin off", api.Credentials{TaskToken: "task"}, "task", api.Admin, 0, fault.AdminDisabled},
		{"admin off, no token", api.Credentials{TaskToken: "task"}, "", api.Admin, 0, fault.AdminDisabled},
		{"admin off, user-task route", api.Credentials{TaskToken: "task"}, "task", api.Tasks | api.Admin, api.Tasks, ""},
		{"admin insecure", api.Credentials{TaskInsecure: true, AdminInsecure: true}, "", api.Admin, 0, ""},
		{"task insecure, admin token", api.Credentials{TaskInsecure: true, AdminToken: "admin"}, "admin", api.Tasks, 0, ""},
		{"task insecure, admin route", api.Credentials{TaskInsecure: true, AdminToken: "admin"}, "", api.Admin, 0, fault.APIUnauthorized},
	} {
		scope, err := tt.creds.Admit([]byte(tt.token), tt.allowed)
		if scope != tt.scope || fault.Code(err) != tt.code {
			t.Errorf("%s: scope %v, %v; want scope %v, code %q", tt.name, scope, err, tt.scope, tt.code)
		}
	}
}

// Only a configured token buys an access token, of its own scope, which
// Admit then takes wherever the same tokens are configured (nothing is
// stored). A scope with no token, insecure or off, has no secret to
// present: with no token at all, every request is refused.
func TestOnlyAConfiguredTokenBuysAnAccessTokenOfItsScope(t *testing.T) {
	both := api.Credentials{TaskToken: "task", AdminToken: "admin"}
	taskOpen := api.Credentials{TaskInsecure: true, AdminToken: "admin"}
	allOpen := api.Credentials{TaskInsecure: true, AdminInsecure: true}
	for _, tt := range []struct {
		name   string
		creds  api.Credentials
		secret string
		scope  api.Scope
	}{
		{"task token", both, "task", api.Tasks},
		{"admin token", both, "admin", api.Admin},
		{"a wrong secret", both, "tas", 0},
		{"no secret", both, "", 0},
		{"task insecure, admin token", taskOpen, "admin", api.Admin},
		{"task insecure, no secret", taskOpen, "", 0},
		{"task insecure, another secret", taskOpen, "task", 0},
		{"all insecure, no secret", allOpen, "", 0},
		{"all insecure, a secret", allOpen, "task", 0},
		{"all off", api.Credentials{}, "", 0},
	} {
		tok, scope, err := tt.creds.Issue([]byte(tt.secret))
		if scope != tt.scope || (tt.scope == 0) != (fault.Code(err) == fault.APIUnauthorized) {
			t.Errorf("%s: scope %v, %v; want scope %v", tt.name, scope, err, tt.scope)
			continue
		}
		if tt.scope == 0 {
			continue
		}
		replica := tt.creds // another replica, configured alike
		if admitted, err := replica.Admit([]byte(tok), tt.scope); admitted != tt.scope || err != nil {
			t.Errorf("%s: the access token admitted to scope %v, %v; want %v", tt.name, admitted, err, tt.scope)
		}
	}
}
