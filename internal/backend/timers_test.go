package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// Every test here runs minutes of handler time on the virtual clock in
// milliseconds of real time: nothing sleeps.

func TestDateFollowsTheServerClock(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  await ctx.db.put({ _id: event.docId, now: Date.now(), iso: new Date().toISOString() }, { db: "out" })
}`)
	hc := newFake()
	for _, id := range []string{"t0", "t1"} {
		if err := b.OnChange(context.Background(), event("jobs", id, nil), hc); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(90 * time.Minute)
	}
	for i, id := range []string{"t0", "t1"} {
		at := start.Add(time.Duration(i) * 90 * time.Minute)
		d := hc.mustDoc(t, "out", id)
		if d["now"] != float64(at.UnixMilli()) || d["iso"] != at.Format("2006-01-02T15:04:05.000Z") {
			t.Fatalf("%s: %v, want %v", id, d, at)
		}
	}
}

func TestSetTimeoutWaitsForTheClock(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  const t0 = Date.now()
  const got = await new Promise((resolve) => setTimeout((a, b) => resolve(a + b), 3000, 1, 2))
  await ctx.db.put({ _id: "w", waited: Date.now() - t0, got }, { db: "out" })
}`)
	hc := newFake()
	done := onChangeAsync(b, event("jobs", "a", nil), hc)
	e.waitTimers(2) // the run limit and the 3 s timer
	e.clock.Advance(2999 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before the timer was due: %v", err)
	default:
	}
	e.clock.Advance(time.Millisecond)
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if w := hc.mustDoc(t, "out", "w"); w["waited"] != 3000.0 || w["got"] != 3.0 {
		t.Fatalf("got %v", w)
	}
	if n := e.clock.Pending(); n != 0 {
		t.Fatalf("%d timers left armed after the call", n)
	}
}

func TestClearTimeoutCancels(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  if (event.docId === "only-cleared") {
    // The one timer that could settle this promise is cleared.
    await new Promise((resolve) => clearTimeout(setTimeout(resolve, 1000)))
  }
  const fired = []
  const id = setTimeout(() => fired.push("cleared"), 1000)
  const kept = new Promise((resolve) => setTimeout(() => { fired.push("kept"); resolve() }, 1500))
  clearTimeout(id)
  clearTimeout(12345) // unknown ids are ignored
  ctx.log("info", "parked")
  await kept
  await ctx.db.put({ _id: "f", fired }, { db: "out" })
}`)
	hc := newFake()
	done := onChangeAsync(b, event("jobs", "a", nil), hc)
	hc.waitLog(t, "parked")
	if n := e.clock.Pending(); n != 2 {
		t.Fatalf("%d timers armed, want 2 (the run limit and the kept timer)", n)
	}
	e.clock.Advance(2 * time.Second)
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if got := asJSON(hc.mustDoc(t, "out", "f")["fired"]); got != `["kept"]` {
		t.Fatalf("fired %s", got)
	}
	// A cleared timer no longer holds the call open: the handler is told
	// at once that its promise can never settle, with no clock movement.
	err := b.OnChange(context.Background(), event("jobs", "only-cleared", nil), hc)
	if !errors.Is(err, jsvm.ErrNeverSettles) {
		t.Fatalf("got %v", err)
	}
}

func TestTimersEndWithTheirCall(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  setTimeout(() => ctx.db.put({ _id: "late" }, { db: "out" }), 60000)
}`)
	hc := newFake()
	if err := b.OnChange(context.Background(), event("jobs", "a", nil), hc); err != nil {
		t.Fatal(err)
	}
	if n := e.clock.Pending(); n != 0 {
		t.Fatalf("%d timers still armed after the call returned", n)
	}
	e.clock.Advance(time.Hour)
	if hc.doc("out", "late") != nil {
		t.Fatal("a timer ran after its call ended")
	}
}

func TestTimerCallbackThrowFailsTheRun(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  await new Promise((resolve) => setTimeout(() => { throw new Error("in a timer") }, 10))
}`)
	done := onChangeAsync(b, event("jobs", "a", nil), newFake())
	e.waitTimers(2)
	e.clock.Advance(10 * time.Millisecond)
	if err := wait(t, done); err == nil || !strings.Contains(err.Error(), "Error: in a timer") || !strings.Contains(err.Error(), "backend.js:2:") {
		t.Fatalf("got %v", err)
	}
}

func TestSetTimeoutOutsideAHandler(t *testing.T) {
	e := newEnv(t)
	e.refused(`setTimeout(() => {}, 10); export async function onChange() {}`, "setTimeout works only while a handler runs")
	b := e.compile(`export async function onChange() { setTimeout("code", 10) }`)
	if err := b.OnChange(context.Background(), event("jobs", "a", nil), newFake()); err == nil || !strings.Contains(err.Error(), "setTimeout needs a function") {
		t.Fatalf("got %v", err)
	}
}

func TestRunLimitOnTheVirtualClock(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export const config = { onChange: { timeout: "15m" } }
export async function onChange(event, ctx) {
  const ms = event.docId === "a" ? 20 * 60 * 1000 : 60 * 1000
  await new Promise((resolve) => setTimeout(resolve, ms))
  await ctx.db.put({ _id: "finished" }, { db: "out" })
}`)
	hc := newFake()
	began := time.Now()
	done := onChangeAsync(b, event("jobs", "a", nil), hc)
	e.waitTimers(2)
	e.clock.Advance(16 * time.Minute)
	err := wait(t, done)
	if !errors.Is(err, jsvm.ErrDeadline) || !strings.Contains(err.Error(), "backend.js: onChange was stopped at its run limit of 15m0s") ||
		!strings.Contains(err.Error(), "config.onChange.timeout") {
		t.Fatalf("got %v", err)
	}
	if hc.doc("out", "finished") != nil {
		t.Fatal("the handler went on after its limit")
	}
	if real := time.Since(began); real > 5*time.Second {
		t.Fatalf("took %v of real time", real)
	}
	// The limit is per call: the next event runs normally.
	done = onChangeAsync(b, event("jobs", "b", nil), hc)
	e.waitTimers(2)
	e.clock.Advance(time.Minute)
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	hc.mustDoc(t, "out", "finished")
}

// TestTickRunLimitIsItsOwn: a tick is stopped at config.scheduled.timeout,
// not at onChange's limit, and the message names the setting.
func TestTickRunLimitIsItsOwn(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export const config = { scheduled: { interval: "1m", timeout: "2m" }, onChange: { timeout: "1h" } }
export async function scheduled(event, ctx) {
  await new Promise((resolve) => setTimeout(resolve, 3 * 60 * 1000))
  await ctx.db.put({ _id: "finished" }, { db: "out" })
}`)
	hc := newFake()
	done := make(chan error, 1)
	go func() { done <- b.Scheduled(context.Background(), appcode.TickEvent{ScheduledTime: 1}, hc) }()
	e.waitTimers(2)
	e.clock.Advance(150 * time.Second)
	err := wait(t, done)
	if !errors.Is(err, jsvm.ErrDeadline) || !strings.Contains(err.Error(), "scheduled was stopped at its run limit of 2m0s") ||
		!strings.Contains(err.Error(), "config.scheduled.timeout") {
		t.Fatalf("got %v", err)
	}
	if hc.doc("out", "finished") != nil {
		t.Fatal("the tick went on after its limit")
	}
}

func TestTimersDefaultToRealTime(t *testing.T) {
	c := backend.New(backend.Options{})
	b, err := c.CompileBackend("backend.js", `export async function onChange(event, ctx) {
  await new Promise((resolve) => setTimeout(resolve, 1))
  await ctx.db.put({ _id: "woke" })
}`)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	hc := newFake()
	if err := b.OnChange(context.Background(), event("jobs", "a", nil), hc); err != nil {
		t.Fatal(err)
	}
	hc.mustDoc(t, "jobs", "woke")
}
