package access_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/access"
	"github.com/handoff-run/handoff/internal/appcode"
)

// accessGlobals is every global of the access.js runtime, sorted: the
// language's, the web API's (jsvm.InstallWeb) and the ctx that Check
// passes. A new global must be added here on purpose, and to
// docs/apps.md ("Globals").
const accessGlobals = `AbortController AbortSignal AggregateError Array ArrayBuffer Boolean CryptoKey DOMException DataView Date Error EvalError Event EventTarget Float32Array Float64Array Function GoError Infinity Int16Array Int32Array Int8Array JSON Map Math NaN Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set String Symbol SyntaxError TypeError URIError URL URLSearchParams Uint16Array Uint32Array Uint8Array Uint8ClampedArray WeakMap WeakSet __handoffAccessCtx atob btoa crypto decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval globalThis isFinite isNaN parseFloat parseInt performance queueMicrotask structuredClone undefined unescape`

// refusedWith compiles src and runs its default export, which must
// refuse; it returns the reason.
func refusedWith(t *testing.T, src string) string {
	t.Helper()
	f, err := access.New(access.Options{}).CompileAccess("access.js", src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.(*access.Func).Close)
	_, err = f.Check(context.Background(), appcode.AccessInput{App: "a/b", DB: "d", ID: "x", Doc: json.RawMessage(`{"_id":"x"}`), Timeout: 5 * time.Second})
	var ee *errs.Error
	if !errors.As(err, &ee) || ee.Code != errs.Forbidden {
		t.Fatalf("want a refusal, got %v", err)
	}
	return ee.Reason
}

func TestAccessGlobals(t *testing.T) {
	got := refusedWith(t, `export default function () { throw {forbidden: Object.getOwnPropertyNames(globalThis).sort().join(" ")} }`)
	if got != accessGlobals {
		t.Errorf("the globals of access.js changed:\n got  %s\n want %s", got, accessGlobals)
	}
}

// TestAccessWebAPI: the web API works inside an access call, and the
// backend-only parts (timers, AbortSignal.timeout, fetch) are absent.
func TestAccessWebAPI(t *testing.T) {
	got := refusedWith(t, `export default function (doc) {
  const u = new URL("/p?q=" + doc._id, "https://example.com");
  const c = structuredClone({u: u.href, m: new Map([[1, 2]])});
  throw {forbidden: [u.searchParams.get("q"), c.m.get(1), atob(btoa("ok")), typeof AbortSignal.timeout,
    typeof setTimeout, typeof fetch, typeof crypto.randomUUID(), typeof performance.now()].join(",")};
}`)
	if want := "x,2,ok,undefined,undefined,undefined,string,number"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
