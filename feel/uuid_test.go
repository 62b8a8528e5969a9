package feel

import (
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

// v5 is the shape of a version 5, RFC 4122 variant UUID.
var v5 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNameUUIDIsRFC4122Version5(t *testing.T) {
	// The URL name space of RFC 4122 appendix C, and ids Python's uuid.uuid5 gives.
	url := [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	if got := nameUUID(url, "https://example.com"); got != "4fd35a71-71ef-5a55-a9d9-aa75c889a6d0" {
		t.Errorf("uuid5(URL, https://example.com) = %s", got)
	}
	ns := nameUUID(url, "https://github.com/sutra-run/worker/feel#uuid")
	if want := hex.EncodeToString(uuidNamespace[:]); strings.ReplaceAll(ns, "-", "") != want {
		t.Errorf("uuidNamespace = %s, want the id of its URL %s", want, ns)
	}
}

func TestUUID(t *testing.T) {
	eval := func(src, seed string) any {
		t.Helper()
		v, err := MustCompile(src).EvalIn(vars(), Env{Now: testNow, Seed: seed})
		if err != nil {
			t.Fatalf("%s with seed %q: %v", src, seed, err)
		}
		return v
	}
	one := eval(`=uuid()`, "i-1/2/Task_1/t3")
	if id, ok := one.(string); !ok || !v5.MatchString(id) {
		t.Fatalf("uuid() = %#v, want a version 5 UUID", one)
	}
	// A known id: the seed, the expression and the call's position.
	if got := eval(`=uuid()`, "seed"); got != "51222998-1c84-5e34-a974-b0018ec485ba" {
		t.Errorf("uuid() with seed %q = %v", "seed", got)
	}
	if again := eval(`=uuid()`, "i-1/2/Task_1/t3"); again != one {
		t.Errorf("the same seed gave %v then %v", one, again)
	}
	if reformatted := eval(`= uuid( )`, "i-1/2/Task_1/t3"); reformatted != one {
		t.Errorf("reformatting the expression changed the id: %v, %v", one, reformatted)
	}
	distinct := []any{one, eval(`=uuid()`, "i-1/3/Task_1/t3"), eval(`="" + uuid()`, "i-1/2/Task_1/t3")}
	distinct = append(distinct, eval(`=[uuid(), uuid()]`, "i-1/2/Task_1/t3").([]any)...)
	distinct = append(distinct, eval(`=for i in 1..3 return uuid()`, "i-1/2/Task_1/t3").([]any)...)
	seen := map[any]bool{}
	for _, id := range distinct {
		if seen[id] || !v5.MatchString(id.(string)) {
			t.Errorf("ids %v: want distinct version 5 UUIDs", distinct)
			break
		}
		seen[id] = true
	}
	if eval(`=uuid() = uuid()`, "s") != false {
		t.Error("two calls in one evaluation gave the same id")
	}
}

func TestUUIDNeedsASeed(t *testing.T) {
	e, err := Compile(`=uuid()`)
	if err != nil {
		t.Fatalf("Compile: %v (an expression with a seed is never evaluated at deploy)", err)
	}
	if !e.UsesSeed() || MustCompile(`=a + 1`).UsesSeed() || MustCompile(`uuid()`).UsesSeed() {
		t.Error("UsesSeed is wrong")
	}
	for _, eval := range []func() (any, error){
		func() (any, error) { return e.Eval(nil) },
		func() (any, error) { return e.EvalAt(nil, testNow) },
		func() (any, error) { return e.EvalIn(nil, Env{Now: testNow}) },
	} {
		if v, err := eval(); err == nil || !strings.Contains(err.Error(), "uuid() is not available here") {
			t.Errorf("without a seed: %v, %v", v, err)
		}
	}
	if v, err := MustCompile(`=is defined(x) or uuid() != null`).EvalBool(map[string]any{"x": 1}); err != nil || !v {
		t.Errorf("a uuid() call never reached needs no seed: %v, %v", v, err)
	}
}
