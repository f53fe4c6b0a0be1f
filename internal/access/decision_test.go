package access_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/access"
	"github.com/handoff-run/handoff/internal/appcode"
)

// TestDecisionLists reads each shape a channel list may take in what
// access.js returns, and refuses the shapes it may not.
func TestDecisionLists(t *testing.T) {
	t.Parallel()
	fn, err := access.New(access.Options{}).CompileAccess("access.js", `
export function one() { return { channels: "a" } }
export function many() { return { channels: ["a", "b", "a", ""] } }
export function empty() { return { channels: [] } }
export function grown() { const l = []; l.push("x"); l[2] = "z"; l[1] = "y"; return { channels: l } }
export function grants() { return { channels: ["a"], grant: { public: "p", users: { bob: ["c", "d"] }, roles: { ops: "e" } } } }
export function hole() { return { channels: ["a", , "c"] } }
export function number() { return { channels: ["a", 7] } }
export function boxed() { return { channels: [new String("a")] } }
export function arrayLike() { return { channels: { 0: "a", length: 1 } } }
export function huge() { const l = []; l.length = 4e9; return { channels: l } }
export function hugeInside() { const l = []; l.length = 4e9; return { channels: { a: l } } }
export function hugeGrant() { const l = []; l.length = 4e9; return { grant: { users: { bob: { x: l } } } } }
export function args() { return { channels: (function () { return arguments })("a", "b") } }
export function wrapped() { return { channels: new String("w") } }
`)
	if err != nil {
		t.Fatal(err)
	}
	check := func(db string) (appcode.AccessDecision, error) {
		return fn.Check(context.Background(), appcode.AccessInput{DB: db, Doc: []byte(`{}`), Timeout: appcode.DefaultAccessTimeout})
	}
	for db, want := range map[string][]string{
		"one":     {"a"},
		"many":    {"a", "b"},
		"empty":   {},
		"grown":   {"x", "y", "z"},
		"args":    {"a", "b"},
		"wrapped": {"w"},
	} {
		dec, err := check(db)
		if err != nil || !slices.Equal(dec.Channels, want) {
			t.Errorf("%s: channels %q, %v; want %q", db, dec.Channels, err, want)
		}
	}
	dec, err := check("grants")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range dec.Grants {
		got = append(got, g.Kind+":"+g.Principal+":"+g.Channel)
	}
	if want := []string{"public::p", "user:bob:c", "user:bob:d", "role:ops:e"}; !slices.Equal(got, want) {
		t.Errorf("grants %q, want %q", got, want)
	}
	for db, what := range map[string]string{
		"hole":       "channels[1] is not a string",
		"number":     "channels[1] is not a string",
		"boxed":      "channels[0] is not a string",
		"arrayLike":  "neither a string nor an array",
		"huge":       "channels[0] is not a string",
		"hugeInside": "channels is neither",
		"hugeGrant":  "grant.users.bob is neither",
	} {
		_, err := check(db)
		if !errs.Is(err, errs.AccessError) || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: %v; want access_error saying %q", db, err, what)
		}
	}
}

// TestSparseArraysFromAccessJS: arrays whose length was set to four
// billion, thrown or handed to ctx, end the check with its error; read as
// goja reads them, each would have asked Go for 64 GB and killed the
// server.
func TestSparseArraysFromAccessJS(t *testing.T) {
	t.Parallel()
	fn, err := access.New(access.Options{}).CompileAccess("access.js", `
const huge = () => { const a = []; a.length = 4e9; return a };
export function thrown() { throw huge() }
export function forbidden() { throw { forbidden: "no", list: huge() } }
export function require(doc, was, user, ctx) { ctx.requireBackend(huge()) }
export function goError() {
  let P; try { (0, require)("x") } catch (e) { P = Object.getPrototypeOf(e) }
  throw Object.setPrototypeOf({ value: huge() }, P)
}
export function revoked() { const { proxy, revoke } = Proxy.revocable({}, {}); revoke(); throw proxy }
`)
	if err != nil {
		t.Fatal(err)
	}
	for db, c := range map[string]struct {
		code errs.Code
		what string
	}{
		"thrown":    {errs.AccessError, "[null,null"},
		"forbidden": {errs.Forbidden, "no"},
		"require":   {errs.AccessError, "at most 10000 handler names"},
		"goError":   {errs.AccessError, "access.js"},
		"revoked":   {errs.AccessError, "revoked"},
	} {
		_, err := fn.Check(context.Background(), appcode.AccessInput{DB: db, Doc: []byte(`{}`), Timeout: appcode.DefaultAccessTimeout})
		if !errs.Is(err, c.code) || !strings.Contains(err.Error(), c.what) {
			t.Errorf("%s: %v; want %s saying %q", db, err, c.code, c.what)
		}
	}
}
