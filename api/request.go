package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

// Invalid is a call a protocol refuses as a bad request (400), with the
// reason.
type Invalid struct{ Msg string }

func (e Invalid) Error() string { return e.Msg }

// Invalidf is an Invalid with a formatted reason.
func Invalidf(format string, args ...any) error { return Invalid{fmt.Sprintf(format, args...)} }

// Decode reads a JSON body into v: one object, no unknown fields, no NUL in
// a string. The guard has read the body whole within the route's limit
// and checked its media type.
func Decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return Invalidf("reading the body: %v", err)
	}
	if hasNUL(body) {
		return Invalidf("the body holds \\u0000, which no stored text can hold")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Invalidf("the body is not a valid request: %v", err)
	}
	if dec.More() {
		return Invalidf("the body has data after its JSON object")
	}
	return nil
}

// DecodeVariables reads a variables document, what names it in the
// reason: a JSON object, or nothing (empty or blank: no variables), with no
// NUL in a string.
func DecodeVariables(what string, doc []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, nil
	}
	if hasNUL(doc) {
		return nil, Invalidf("%s hold \\u0000, which no stored text can hold", what)
	}
	var vars map[string]any
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&vars); err != nil {
		return nil, Invalidf("%s are not a JSON object: %v", what, err)
	}
	if vars == nil {
		return nil, Invalidf("%s are null, not a JSON object", what)
	}
	if dec.More() {
		return nil, Invalidf("%s have data after their JSON object", what)
	}
	return vars, nil
}

// CheckText is the one rule for an id, a message or signal name and a
// correlation key, at every surface: it refuses text the store cannot hold
// (a NUL), that is not UTF-8, or that is longer than lanes.MaxIDBytes (an
// AMQP short string, where names and ids travel); what names it in the
// reason, which never echoes the text. Each protocol answers it as its bad
// request (400 SUTRA.API.INVALID_REQUEST, gRPC InvalidArgument).
func CheckText(what, v string) error {
	switch {
	case len(v) > lanes.MaxIDBytes:
		return Invalidf("%s is %d bytes long; names and ids are at most %d", what, len(v), lanes.MaxIDBytes)
	case strings.IndexByte(v, 0) >= 0:
		return Invalidf("%s holds a NUL character", what)
	case !utf8.ValidString(v):
		return Invalidf("%s is not valid UTF-8", what)
	}
	return nil
}

// CheckInt32 refuses a number of a path or query that the store keeps in
// a 32-bit column (a version): naming what, rather than letting the
// driver refuse it with its own words.
func CheckInt32(what string, v int) error {
	if v > math.MaxInt32 || v < math.MinInt32 {
		return Invalidf("%s %d is out of range: at most %d", what, v, math.MaxInt32)
	}
	return nil
}

// CheckTTL refuses a message's time to live that is not positive or is
// longer than lanes.MaxMessageTTL; what names the field.
func CheckTTL(what string, ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return Invalidf("%s is not positive", what)
	case ttl > lanes.MaxMessageTTL:
		return Invalidf("%s is longer than the maximum time to live, P%dD (%d ms)", what, lanes.MaxMessageTTL/(24*time.Hour), lanes.MaxMessageTTL.Milliseconds())
	}
	return nil
}

// hasNUL reports whether a JSON document holds the escape \u0000 in a
// string: PostgreSQL's text and jsonb cannot store it.
func hasNUL(doc []byte) bool {
	for i := 0; ; {
		j := bytes.Index(doc[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		j += i
		// An escape when the backslash is not itself escaped: an even
		// number of backslashes before it.
		n := 0
		for k := j - 1; k >= 0 && doc[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = j + 1
	}
}

// screen refuses a path or query that no id can be: a NUL (PostgreSQL
// text cannot hold one) or a part longer than lanes.MaxIDBytes, so that
// neither reaches the database or a log line.
func screen(p Protocol, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for _, part := range strings.Split(r.URL.Path, "/") {
			if err := CheckText("a part of the path", part); err != nil {
				p.Refuse(w, http.StatusBadRequest, fault.APIInvalid, err.Error())
				return
			}
		}
		for name, values := range r.URL.Query() {
			for _, v := range append(values, name) {
				if err := CheckText("a query parameter", v); err != nil {
					p.Refuse(w, http.StatusBadRequest, fault.APIInvalid, err.Error())
					return
				}
			}
		}
		next(w, r)
	}
}

// mediaType refuses a call whose Content-Type is not one of types (415). A
// protocol may let a call with no body name no type; a browser sends such a
// call only with an Origin, which sameOrigin checks.
func mediaType(p Protocol, types []string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mt := mediaTypeOf(r)
		bodiless := mt == "" && r.ContentLength == 0 && p.UntypedBodiless
		if !bodiless && !slices.Contains(types, mt) {
			p.Refuse(w, http.StatusUnsupportedMediaType, fault.APIMediaType,
				fmt.Sprintf("Content-Type %q: this call takes %s, even with no body", mt, strings.Join(types, " or ")))
			return
		}
		next(w, r)
	}
}

// mediaTypeOf is the media type of r's body, lower case, without
// parameters.
func mediaTypeOf(r *http.Request) string {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// sameOrigin refuses a call that a page of another origin made (403): a
// browser names the page's origin in Origin, and other clients send none.
func sameOrigin(p Protocol, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if u, err := url.Parse(origin); err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
				p.Refuse(w, http.StatusForbidden, fault.APICrossOrigin,
					fmt.Sprintf("a call from the origin %.100q is refused: only pages this listener serves may change state", origin))
				return
			}
		}
		next(w, r)
	}
}

func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// NewID is a random UUID (version 4): the id of an instance or message a
// call did not name.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
