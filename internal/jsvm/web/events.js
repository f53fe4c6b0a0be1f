// Event, EventTarget, AbortController and AbortSignal, as the DOM standard
// and Node define them (without capture and bubbling: no tree of nodes).
// A listener that throws does not stop the others; its error is reported
// as an unhandled promise rejection would be in this runtime.
(function (host) {
  "use strict";
  const DOMException = globalThis.DOMException;
  const KEY = Symbol("internal");
  const now = host.now;

  function missing(what) {
    const e = new TypeError(`The "${what}" argument must be specified`);
    e.code = "ERR_MISSING_ARGS";
    return e;
  }

  // received describes a wrong argument as Node's ERR_INVALID_ARG_TYPE does.
  function received(v) {
    if (v === null || v === undefined) return `Received ${v}`;
    if (typeof v === "function") return `Received function ${v.name}`;
    if (typeof v === "object") {
      const c = v.constructor;
      return c && c.name ? `Received an instance of ${c.name}` : `Received ${typeof v}`;
    }
    let s = typeof v === "symbol" ? v.toString() : String(v);
    if (s.length > 28) s = s.slice(0, 25) + "...";
    if (typeof v === "string") s = `'${s}'`;
    return `Received type ${typeof v} (${s})`;
  }

  function argType(message) {
    const e = new TypeError(message);
    e.code = "ERR_INVALID_ARG_TYPE";
    return e;
  }

  function report(err) {
    Promise.reject(err); // an unhandled rejection, as an error from a task
  }

  class Event {
    #type;
    #bubbles;
    #cancelable;
    #composed;
    #canceled = false;
    #stop = false;
    #stopNow = false;
    #target = null;
    #current = null;
    #phase = 0;
    #dispatching = false;
    #time;

    constructor(type, init) {
      if (arguments.length === 0) throw missing("type");
      if (init !== undefined && init !== null && typeof init !== "object") {
        throw new TypeError('The "options" argument must be of type object.');
      }
      this.#type = String(type);
      this.#bubbles = !!(init && init.bubbles);
      this.#cancelable = !!(init && init.cancelable);
      this.#composed = !!(init && init.composed);
      this.#time = now();
    }
    get type() { return this.#type; }
    get bubbles() { return this.#bubbles; }
    get cancelable() { return this.#cancelable; }
    get composed() { return this.#composed; }
    get defaultPrevented() { return this.#cancelable && this.#canceled; }
    get returnValue() { return !this.defaultPrevented; }
    get target() { return this.#target; }
    get currentTarget() { return this.#current; }
    get srcElement() { return this.#target; }
    get eventPhase() { return this.#phase; }
    get timeStamp() { return this.#time; }
    get isTrusted() { return false; }
    get cancelBubble() { return this.#stop; }
    set cancelBubble(v) { if (v) this.#stop = true; }
    composedPath() { return this.#dispatching ? [this.#current] : []; }
    preventDefault() { this.#canceled = true; } // Node 20 does not honour passive
    stopPropagation() { this.#stop = true; }
    stopImmediatePropagation() { this.#stop = true; this.#stopNow = true; }

    // dispatch runs the listeners of target for this event.
    static dispatch(event, target, listeners) {
      if (!(typeof event === "object" && event !== null && #dispatching in event)) {
        throw argType(`The "event" argument must be an instance of Event. ${received(event)}`);
      }
      if (event.#dispatching) {
        const e = new Error(`The event "${event.#type}" is already being dispatched`);
        e.code = "ERR_EVENT_RECURSION";
        throw e;
      }
      event.#dispatching = true;
      event.#target = target;
      event.#current = target;
      event.#phase = 2;
      try {
        for (const l of listeners) {
          if (l.removed) continue;
          if (l.once) l.remove();
          try {
            const fn = l.callback;
            if (typeof fn === "function") fn.call(target, event);
            else if (fn && typeof fn.handleEvent === "function") fn.handleEvent(event);
          } catch (err) {
            report(err);
          }
          if (event.#stopNow) break;
        }
      } finally {
        event.#dispatching = false;
        event.#current = null;
        event.#phase = 0;
        event.#stop = false;
        event.#stopNow = false;
      }
      return !event.defaultPrevented;
    }
  }
  const dispatch = Event.dispatch;
  delete Event.dispatch;
  const PHASES = { NONE: 0, CAPTURING_PHASE: 1, AT_TARGET: 2, BUBBLING_PHASE: 3 };
  for (const [k, v] of Object.entries(PHASES)) {
    Object.defineProperty(Event, k, { value: v, enumerable: true });
  }
  Object.defineProperty(Event.prototype, Symbol.toStringTag, { value: "Event", configurable: true });

  function flags(options) {
    if (typeof options === "boolean") return { capture: options, once: false, passive: false, signal: undefined };
    if (options === null || typeof options !== "object") return { capture: false, once: false, passive: false, signal: undefined };
    return { capture: !!options.capture, once: !!options.once, passive: !!options.passive, signal: options.signal };
  }

  class EventTarget {
    #listeners = new Map(); // type → [{callback, capture, once, passive, removed, remove}]

    addEventListener(type, callback, options) {
      if (arguments.length < 2) throw missing(arguments.length === 0 ? "type" : "listener");
      if (callback === null || callback === undefined) return;
      if (typeof callback !== "function" && typeof callback !== "object") {
        throw argType(`The "listener" argument must be an instance of EventListener. ${received(callback)}`);
      }
      type = String(type);
      const { capture, once, passive, signal } = flags(options);
      if (signal !== undefined && !isSignal(signal)) throw new TypeError('The "options.signal" property must be an instance of AbortSignal.');
      if (signal && signal.aborted) return;
      let list = this.#listeners.get(type);
      if (!list) this.#listeners.set(type, (list = []));
      if (list.some((l) => l.callback === callback && l.capture === capture)) return;
      const l = { callback, capture, once, passive, removed: false };
      l.remove = () => {
        if (l.removed) return;
        l.removed = true;
        const cur = this.#listeners.get(type);
        if (cur) {
          const i = cur.indexOf(l);
          if (i >= 0) cur.splice(i, 1);
        }
      };
      list.push(l);
      if (signal) signal.addEventListener("abort", l.remove, { once: true });
    }
    removeEventListener(type, callback, options) {
      if (arguments.length < 2) throw missing(arguments.length === 0 ? "type" : "listener");
      const list = this.#listeners.get(String(type));
      if (!list) return;
      const capture = flags(options).capture;
      const l = list.find((x) => x.callback === callback && x.capture === capture);
      if (l) l.remove();
    }
    dispatchEvent(event) {
      if (arguments.length === 0) throw missing("event");
      if (!(this instanceof EventTarget) || !(#listeners in this)) throw new TypeError('Value of "this" must be of type EventTarget');
      const list = this.#listeners.get(event instanceof Event ? event.type : "");
      return dispatch(event, this, list ? list.slice() : []);
    }
  }
  Object.defineProperty(EventTarget.prototype, Symbol.toStringTag, { value: "EventTarget", configurable: true });

  // AbortSignal ------------------------------------------------------------

  let isSignal; // AbortSignal's brand check, set below

  class AbortSignal extends EventTarget {
    #aborted = false;
    #reason = undefined;
    #onabort = null;
    #handler = null;

    constructor(key) {
      if (key !== KEY) {
        const e = new TypeError("Illegal constructor");
        e.code = "ERR_ILLEGAL_CONSTRUCTOR";
        throw e;
      }
      super();
    }
    get aborted() {
      return this.#aborted;
    }
    get reason() {
      return this.#reason;
    }
    throwIfAborted() {
      if (this.#aborted) throw this.#reason;
    }
    get onabort() {
      return this.#onabort;
    }
    set onabort(fn) {
      this.#onabort = typeof fn === "function" || (fn !== null && typeof fn === "object") ? fn : null;
      if (this.#onabort && !this.#handler) {
        // An event handler is a listener added when it is first set, so
        // it keeps its place among the others.
        this.#handler = (e) => {
          const h = this.#onabort;
          if (typeof h === "function") return h.call(this, e);
        };
        this.addEventListener("abort", this.#handler);
      }
    }
    static abort(reason) {
      const s = new AbortSignal(KEY);
      s.#aborted = true;
      s.#reason = reason === undefined ? new DOMException("This operation was aborted", "AbortError") : reason;
      return s;
    }
    static any(signals) {
      if (arguments.length === 0) throw missing("signals");
      const list = [...signals];
      for (const s of list) if (!isSignal(s)) throw new TypeError('The "signals" argument must be an instance of AbortSignal[].');
      const out = new AbortSignal(KEY);
      const done = list.find((s) => s.#aborted);
      if (done) {
        out.#aborted = true;
        out.#reason = done.#reason;
        return out;
      }
      for (const s of list) s.addEventListener("abort", () => abort(out, s.#reason), { once: true });
      return out;
    }
    static isSignal(s) {
      return s !== null && typeof s === "object" && #aborted in s;
    }
    static fire(s, reason) {
      if (s.#aborted) return;
      s.#aborted = true;
      s.#reason = reason === undefined ? new DOMException("This operation was aborted", "AbortError") : reason;
      s.dispatchEvent(new Event("abort"));
    }
  }
  const abort = AbortSignal.fire;
  isSignal = AbortSignal.isSignal;
  delete AbortSignal.fire;
  delete AbortSignal.isSignal;
  if (host.setTimeout) {
    const setTimeout = host.setTimeout;
    Object.defineProperty(AbortSignal, "timeout", {
      value: function timeout(delay) {
        if (arguments.length === 0) throw missing("delay");
        const ms = Number(delay);
        if (!Number.isInteger(ms) || ms < 0 || ms > 2 ** 53 - 1) {
          const e = new RangeError(`The value of "delay" is out of range. It must be >= 0 && <= 9007199254740991. Received ${delay}`);
          e.code = "ERR_OUT_OF_RANGE";
          throw e;
        }
        const s = new AbortSignal(KEY);
        setTimeout(() => abort(s, new DOMException("The operation was aborted due to timeout", "TimeoutError")), ms);
        return s;
      },
      writable: true,
      enumerable: false,
      configurable: true,
    });
  }
  Object.defineProperty(AbortSignal.prototype, Symbol.toStringTag, { value: "AbortSignal", configurable: true });

  class AbortController {
    #signal = new AbortSignal(KEY);
    get signal() {
      return this.#signal;
    }
    abort(reason) {
      abort(this.#signal, reason);
    }
  }
  Object.defineProperty(AbortController.prototype, Symbol.toStringTag, { value: "AbortController", configurable: true });

  for (const [name, value] of Object.entries({ Event, EventTarget, AbortSignal, AbortController })) {
    Object.defineProperty(globalThis, name, { value, writable: true, enumerable: false, configurable: true });
  }
});
