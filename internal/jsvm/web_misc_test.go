package jsvm

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestQueueMicrotask(t *testing.T) {
	runWebCases(t, []webCase{
		{`(async () => { const out = []; queueMicrotask(() => out.push("a")); Promise.resolve().then(() => out.push("b")); queueMicrotask(() => out.push("c")); out.push("sync"); await tick(); return out })()`, `["sync","a","b","c"]`},
		{`err(() => queueMicrotask())`, `"throws Error TypeError: The \"callback\" argument must be of type function. Received undefined [ERR_INVALID_ARG_TYPE]"`},
		{`err(() => queueMicrotask(1))`, `"throws Error TypeError: The \"callback\" argument must be of type function. Received type number (1) [ERR_INVALID_ARG_TYPE]"`},
		{`queueMicrotask.name + queueMicrotask.length`, `"queueMicrotask1"`},
	})
}

// TestQueueMicrotaskThrows: a callback's error is reported as an
// unhandled rejection and the queue goes on (Node ends the process).
func TestQueueMicrotaskThrows(t *testing.T) {
	runHandoffCases(t, []webCase{
		{`(async () => { const out = []; queueMicrotask(() => { throw new Error("x") }); queueMicrotask(() => out.push("after")); await tick(); return out })()`, `["after"]`},
	})
}

func TestCrypto(t *testing.T) {
	runWebCases(t, []webCase{
		{`(async () => hex(await crypto.subtle.digest("SHA-256", new Uint8Array([97, 98, 99]))))()`, `"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"`},
		{`(async () => hex(await crypto.subtle.digest({ name: "SHA-1" }, new Uint8Array([1, 2, 3]))))()`, `"7037807198c22a7d2b0807371d763779a84fdfcf"`},
		{`(async () => { const k = await crypto.subtle.importKey("raw", new Uint8Array([1, 2, 3]), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]); const sig = await crypto.subtle.sign("HMAC", k, new Uint8Array([4, 5])); return [hex(sig), await crypto.subtle.verify("HMAC", k, sig, new Uint8Array([4, 5])), k.type, k.algorithm] })()`, `["06fa10e8b3f632a77a4da72016c28d175cdc4c7c07a2b36c13fb5dc54019eb35",true,"secret",{"name":"HMAC","hash":{"name":"SHA-256"},"length":24}]`},
		{`/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(crypto.randomUUID())`, `true`},
		{`(() => { const a = new Uint32Array(4); return [crypto.getRandomValues(a) === a, a.some((x) => x !== 0)] })()`, `[true,true]`},
		{`err(() => crypto.getRandomValues(new Float32Array(1)))`, `"throws Error TypeMismatchError: The data argument must be an integer-type TypedArray [17]"`},
		{`err(() => crypto.getRandomValues(new Uint8Array(65537)))`, `"throws Error QuotaExceededError: The requested length exceeds 65,536 bytes [22]"`},
	})
}

// TestPerformanceReadsTheClock: performance.now() counts milliseconds on
// Options.Now, the clock behind Date.now, from when the runtime was made.
func TestPerformanceReadsTheClock(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := newTestPool(t, "access.js", `export function read() {
  return [performance.now(), performance.timeOrigin, Date.now() - performance.timeOrigin, JSON.stringify(performance) === JSON.stringify({timeOrigin: performance.timeOrigin}), Object.prototype.toString.call(performance)]
}`, webOptions(Options{Size: 1, Now: clock}))
	origin := now.UnixMilli()
	if got, want := mustJSON(t, p, "read"), fmt.Sprintf(`[0,%v,0,true,"[object Performance]"]`, origin); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	mu.Lock()
	now = now.Add(1500*time.Millisecond + 250*time.Microsecond)
	mu.Unlock()
	if got, want := mustJSON(t, p, "read"), fmt.Sprintf(`[1500.25,%v,1500,true,"[object Performance]"]`, origin); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
