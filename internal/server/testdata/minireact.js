// A stand-in for React in browser tests, which may not download React.
// It keeps React's contract for the three hooks the client's hooks use:
// useState (a setter schedules a render; a functional update gets the
// latest state; an unchanged value renders nothing), useEffect (runs
// after a render when a dependency changed, by Object.is; its cleanup
// runs before the next run and on unmount) and useRef (one object for
// the component's life). One component, rendered into a callback.
globalThis.MiniReact = (() => {
  let current = null; // the mount being rendered

  function mount(component, onRender) {
    const m = { slots: [], effects: [], props: undefined, scheduled: false, dead: false };
    const render = () => {
      m.scheduled = false;
      if (m.dead) return;
      m.i = 0;
      m.pending = [];
      current = m;
      let out;
      try {
        out = component(m.props);
      } finally {
        current = null;
      }
      onRender(out);
      for (const { slot, fn } of m.pending) {
        if (slot.cleanup) slot.cleanup();
        const c = fn();
        slot.cleanup = typeof c === "function" ? c : null;
      }
    };
    m.schedule = () => {
      if (!m.scheduled) {
        m.scheduled = true;
        queueMicrotask(render);
      }
    };
    return {
      render(props) {
        m.props = props;
        render();
      },
      unmount() {
        m.dead = true;
        for (const s of m.slots) if (s && s.cleanup) s.cleanup();
      },
    };
  }

  function slot(init) {
    const m = current;
    if (!m) throw new Error("a hook was called outside a component");
    const i = m.i++;
    if (!(i in m.slots)) m.slots[i] = init();
    return [m, m.slots[i]];
  }

  function useState(initial) {
    const [m, s] = slot(() => ({ value: typeof initial === "function" ? initial() : initial }));
    if (!s.set) {
      s.set = (v) => {
        const next = typeof v === "function" ? v(s.value) : v;
        if (Object.is(next, s.value)) return;
        s.value = next;
        m.schedule();
      };
    }
    return [s.value, s.set];
  }

  function useEffect(fn, deps) {
    const [m, s] = slot(() => ({ deps: undefined, cleanup: null }));
    const changed = !deps || !s.deps || deps.length !== s.deps.length || deps.some((d, i) => !Object.is(d, s.deps[i]));
    if (changed) {
      s.deps = deps;
      m.pending.push({ slot: s, fn });
    }
  }

  function useRef(initial) {
    const [, s] = slot(() => ({ ref: { current: initial } }));
    return s.ref;
  }

  return { mount, useState, useEffect, useRef };
})();
