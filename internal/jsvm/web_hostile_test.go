package jsvm

import (
	"errors"
	"testing"
	"time"
)

// webBombsModule: each export asks a web API for far more memory than a
// call may have, in one host step or in a loop. Each must fail its own
// call with the heap error, and the pool must serve the next call.
const webBombsModule = `
export function ok(doc) { return { channels: ["jobs"], id: doc.id } }
export function atobHuge() { return atob("A".repeat(2e7)).length }
export function btoaHuge() { return btoa("a".repeat(2e7)).length }
export function urlHuge() { return new URL("http://a/" + "a".repeat(1e7)).href.length }
export function urlBaseHuge() { return new URL("p", "http://a/" + "a".repeat(1e7)).href.length }
export function canParseHuge() { return URL.canParse("http://a/?" + "q".repeat(1e7)) }
export function urlSetHuge() { const u = new URL("http://a/"); u.pathname = "x".repeat(1e7); return u.href.length }
export function paramsHuge() { return new URLSearchParams("a&".repeat(1e6)).size }
export function paramsEncodeHuge() { return new URLSearchParams({ a: "\u00e9".repeat(1e7) }).toString().length }
export function cloneGrows() { const big = Array.from({ length: 1e5 }, (_, i) => ({ i })); const keep = []; for (;;) keep.push(structuredClone(big)) }
`

func TestWebAPIBombsFailTheirCall(t *testing.T) {
	p := newTestPool(t, "access.js", webBombsModule, webOptions(Options{}))
	for i, export := range []string{"atobHuge", "btoaHuge", "urlHuge", "urlBaseHuge", "canParseHuge", "urlSetHuge", "paramsHuge", "paramsEncodeHuge", "cloneGrows"} {
		if raceDetector && i >= 4 {
			break // each bomb takes seconds under the race detector
		}
		t.Run(export, func(t *testing.T) {
			start := time.Now()
			_, err := callJSON(t, p, export)
			if !errors.Is(err, ErrHeapLimit) {
				t.Fatalf("got %v", err)
			}
			t.Logf("stopped after %v: %v", time.Since(start), err)
			assertPoolServes(t, p)
		})
	}
}

// TestWebAPIHostStepsStopWithTheCall: the web API's loops are the call's
// own (JS, or Go that looks at the stop flag), so a deadline stops them.
func TestWebAPIHostStepsStopWithTheCall(t *testing.T) {
	p := newTestPool(t, "access.js", webBombsModule+`
export function cloneForever() { const o = { a: [1, 2, 3], m: new Map([[1, { x: 1 }]]) }; for (;;) structuredClone(o) }
export async function digestForever() { const b = new Uint8Array(1 << 24); for (;;) await crypto.subtle.digest("SHA-256", b) }
export function paramsForever() { const p = new URLSearchParams("a=1&b=2"); for (;;) p.sort() }
`, webOptions(Options{}))
	for _, export := range []string{"cloneForever", "digestForever", "paramsForever"} {
		if err := callWithin(p, export, 200*time.Millisecond); !errors.Is(err, ErrDeadline) {
			t.Fatalf("%s: got %v", export, err)
		}
		assertPoolServes(t, p)
	}
}
