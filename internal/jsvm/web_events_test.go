package jsvm

import "testing"

func TestEventTarget(t *testing.T) {
	runWebCases(t, []webCase{
		{`(() => { const t = new EventTarget(), out = []; const f = (e) => out.push(["f", e.type, e.target === t, e.currentTarget === t, e.eventPhase]); t.addEventListener("x", f); t.addEventListener("x", f); t.addEventListener("x", { handleEvent(e) { out.push(["h", this !== t]) } }); const r = t.dispatchEvent(new Event("x")); return [r, out] })()`, `[true,[["f","x",true,true,2],["h",true]]]`},
		{`(() => { const t = new EventTarget(); let n = 0; t.addEventListener("x", () => n++, { once: true }); t.dispatchEvent(new Event("x")); t.dispatchEvent(new Event("x")); return n })()`, `1`},
		{`(() => { const t = new EventTarget(); let n = 0; const f = () => n++; t.addEventListener("x", f); t.removeEventListener("x", f); t.dispatchEvent(new Event("x")); return n })()`, `0`},
		{`(() => { const t = new EventTarget(); const e = new Event("x", { cancelable: true }); t.addEventListener("x", (ev) => ev.preventDefault()); return [t.dispatchEvent(e), e.defaultPrevented, e.cancelable, e.returnValue] })()`, `[false,true,true,false]`},
		{`(() => { const t = new EventTarget(); const e = new Event("x"); t.addEventListener("x", (ev) => ev.preventDefault()); return [t.dispatchEvent(e), e.defaultPrevented] })()`, `[true,false]`},
		{`(() => { const t = new EventTarget(); const e = new Event("x", { cancelable: true }); t.addEventListener("x", (ev) => ev.preventDefault(), { passive: true }); return [t.dispatchEvent(e), e.defaultPrevented] })()`, `[false,true]`},
		{`(() => { const t = new EventTarget(), out = []; t.addEventListener("x", (e) => { out.push(1); e.stopImmediatePropagation() }); t.addEventListener("x", () => out.push(2)); t.dispatchEvent(new Event("x")); return out })()`, `[1]`},
		{`(() => { const t = new EventTarget(), out = []; const g = () => out.push("g"); t.addEventListener("x", () => { out.push("f"); t.removeEventListener("x", g) }); t.addEventListener("x", g); t.dispatchEvent(new Event("x")); return out })()`, `["f"]`},
		{`(() => { const t = new EventTarget(); const e = new Event("x"); t.dispatchEvent(e); return [e.eventPhase, e.currentTarget, e.target === t, e.isTrusted, e.bubbles, e.composed, typeof e.timeStamp] })()`, `[0,null,true,false,false,false,"number"]`},
		{`(() => { const t = new EventTarget(); const e = new Event("x"); let inner; t.addEventListener("x", () => { inner = err(() => t.dispatchEvent(e)) }); t.dispatchEvent(e); return inner })()`, `"throws Error Error: The event \"x\" is already being dispatched [ERR_EVENT_RECURSION]"`},
		{`err(() => new EventTarget().dispatchEvent({ type: "x" }))`, `"throws Error TypeError: The \"event\" argument must be an instance of Event. Received an instance of Object [ERR_INVALID_ARG_TYPE]"`},
		{`err(() => new Event())`, `"throws Error TypeError: The \"type\" argument must be specified [ERR_MISSING_ARGS]"`},
		{`[Event.NONE, Event.AT_TARGET, new Event("x").BUBBLING_PHASE, Object.prototype.toString.call(new Event("x")), Object.prototype.toString.call(new EventTarget())]`, `[0,2,null,"[object Event]","[object EventTarget]"]`},
		{`(() => { const t = new EventTarget(), c = new AbortController(); let n = 0; t.addEventListener("x", () => n++, { signal: c.signal }); t.dispatchEvent(new Event("x")); c.abort(); t.dispatchEvent(new Event("x")); return n })()`, `1`},
		{`(() => { class Ping extends Event { constructor() { super("ping") } }; const t = new EventTarget(); let got; t.addEventListener("ping", (e) => got = e instanceof Ping); t.dispatchEvent(new Ping()); return got })()`, `true`},
	})
}

// TestEventListenerThrows: a listener's error does not stop the others and
// is reported as an unhandled rejection (Node ends the process instead).
func TestEventListenerThrows(t *testing.T) {
	runHandoffCases(t, []webCase{
		{`(async () => { const t = new EventTarget(); let n = 0; t.addEventListener("x", () => { throw new Error("boom") }); t.addEventListener("x", () => n++); const r = t.dispatchEvent(new Event("x")); await tick(); return [r, n] })()`, `[true,1]`},
	})
}

func TestAbortController(t *testing.T) {
	runWebCases(t, []webCase{
		{`(() => { const c = new AbortController(), s = c.signal, out = []; s.onabort = (e) => out.push(["on", e.type]); s.addEventListener("abort", () => out.push(["l", s.aborted])); c.abort("why"); c.abort("again"); return [s.aborted, s.reason, out] })()`, `[true,"why",[["on","abort"],["l",true]]]`},
		{`(() => { const c = new AbortController(); c.abort(); const r = c.signal.reason; return [r instanceof DOMException, r.name, r.message, r.code] })()`, `[true,"AbortError","This operation was aborted",20]`},
		{`(() => { const s = AbortSignal.abort(); return [s.aborted, s.reason.name, err(() => s.throwIfAborted())] })()`, `[true,"AbortError","throws Error AbortError: This operation was aborted [20]"]`},
		{`(() => { const s = AbortSignal.abort({ x: 1 }); try { s.throwIfAborted() } catch (e) { return e } })()`, `{"x":1}`},
		{`new AbortController().signal.throwIfAborted() === undefined`, `true`},
		{`err(() => new AbortSignal())`, `"throws Error TypeError: Illegal constructor [ERR_ILLEGAL_CONSTRUCTOR]"`},
		{`(() => { const a = new AbortController(), b = new AbortController(); const s = AbortSignal.any([a.signal, b.signal]); const before = s.aborted; b.abort("b"); a.abort("a"); return [before, s.aborted, s.reason] })()`, `[false,true,"b"]`},
		{`AbortSignal.any([AbortSignal.abort("first"), AbortSignal.abort("second")]).reason`, `"first"`},
		{`[new AbortController().signal instanceof EventTarget, Object.prototype.toString.call(new AbortController()), Object.prototype.toString.call(AbortSignal.abort()), new AbortController().signal.onabort]`, `[true,"[object AbortController]","[object AbortSignal]",null]`},
		{`(() => { const c = new AbortController(), out = []; c.signal.addEventListener("abort", () => out.push(1)); c.signal.onabort = () => out.push(2); c.signal.addEventListener("abort", () => out.push(3)); c.abort(); return out })()`, `[1,2,3]`},
	})
}

func TestDOMException(t *testing.T) {
	runWebCases(t, []webCase{
		{`(() => { const e = new DOMException("m", "AbortError"); return [e.name, e.message, e.code, String(e), e instanceof Error, Object.getOwnPropertyNames(e), Object.prototype.toString.call(e)] })()`, `["AbortError","m",20,"AbortError: m",true,["stack"],"[object DOMException]"]`},
		{`(() => { const e = new DOMException(); return [e.name, e.message, e.code] })()`, `["Error","",0]`},
		{`(() => { const e = new DOMException("m", { name: "DataCloneError", cause: 7 }); return [e.name, e.code, e.cause] })()`, `["DataCloneError",25,7]`},
		{`[DOMException.ABORT_ERR, DOMException.DATA_CLONE_ERR, new DOMException("x", "Nope").code]`, `[20,25,0]`},
	})
}
