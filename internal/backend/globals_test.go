package backend_test

import (
	"context"
	"testing"
	"time"
)

// backendGlobals is every global of the backend.js runtime, sorted: the
// language's, the web API's (jsvm.InstallWeb), and backend.js's own
// (console, timers, fetch and its classes, TextEncoder/TextDecoder). A new
// global must be added here on purpose, and to docs/apps.md ("Globals").
const backendGlobals = `AbortController AbortSignal AggregateError Array ArrayBuffer Boolean CryptoKey DOMException DataView Date Error EvalError Event EventTarget Float32Array Float64Array Function GoError Headers Infinity Int16Array Int32Array Int8Array JSON Map Math NaN Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Request Response Set String Symbol SyntaxError TextDecoder TextEncoder TypeError URIError URL URLSearchParams Uint16Array Uint32Array Uint8Array Uint8ClampedArray WeakMap WeakSet atob btoa clearTimeout console crypto decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval fetch globalThis isFinite isNaN parseFloat parseInt performance queueMicrotask setTimeout structuredClone undefined unescape`

func TestBackendGlobals(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  await ctx.db.put({ _id: "g", names: Object.getOwnPropertyNames(globalThis).sort().join(" ") }, { db: "out" })
}`)
	hc := newFake()
	if err := b.OnChange(context.Background(), event("jobs", "a", nil), hc); err != nil {
		t.Fatal(err)
	}
	if got := hc.mustDoc(t, "out", "g")["names"]; got != backendGlobals {
		t.Errorf("the globals of backend.js changed:\n got  %s\n want %s", got, backendGlobals)
	}
}

// TestAbortSignalTimeoutAndPerformanceFollowTheClock: AbortSignal.timeout
// runs on the handler's timers and performance.now() on the server clock,
// so under the virtual clock a 3 s timeout takes exactly 3000 ms.
func TestAbortSignalTimeoutAndPerformanceFollowTheClock(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  const t0 = performance.now()
  const s = AbortSignal.timeout(3000)
  const reason = await new Promise((resolve) => s.addEventListener("abort", () => resolve(s.reason)))
  await ctx.db.put({ _id: "w", waited: performance.now() - t0, name: reason.name, message: reason.message,
    dom: reason instanceof DOMException, aborted: s.aborted }, { db: "out" })
}`)
	hc := newFake()
	done := onChangeAsync(b, event("jobs", "a", nil), hc)
	e.waitTimers(2) // the run limit and the timeout
	e.clock.Advance(2999 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before the timeout was due: %v", err)
	default:
	}
	e.clock.Advance(time.Millisecond)
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	w := hc.mustDoc(t, "out", "w")
	if w["waited"] != 3000.0 || w["name"] != "TimeoutError" || w["message"] != "The operation was aborted due to timeout" || w["dom"] != true || w["aborted"] != true {
		t.Fatalf("got %v", w)
	}
}

// TestWebAPIInBackend: the shared web API sits under fetch's classes:
// a URL is a fetch input, and crypto keeps HMAC for webhook checks.
func TestWebAPIInBackend(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  const u = new URL("https://api.example.com/v1/items")
  u.searchParams.set("q", "a b")
  const req = new Request(u, { method: "POST", body: "x" })
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode("k"), { name: "HMAC", hash: "SHA-256" }, false, ["sign"])
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode("m")))
  await ctx.db.put({ _id: "r", url: req.url, mac: btoa(String.fromCharCode(...mac)) }, { db: "out" })
}`)
	hc := newFake()
	if err := b.OnChange(context.Background(), event("jobs", "a", nil), hc); err != nil {
		t.Fatal(err)
	}
	r := hc.mustDoc(t, "out", "r")
	// node -e 'console.log(require("crypto").createHmac("sha256","k").update("m").digest("base64"))'
	if r["url"] != "https://api.example.com/v1/items?q=a+b" || r["mac"] != "tgCQ4wUil661oICInOL8S8qVfnVvrrTffTGADKHncew=" {
		t.Fatalf("got %v", r)
	}
}
