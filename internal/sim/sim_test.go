package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/sim"
)

// sleeper's onChange waits each of the doc's waits in turn, noting
// Date.now() after each, then writes what it saw back.
const sleeper = `
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function onChange(event, ctx) {
  if (event.deleted || event.doc.step !== "start") return;
  const seen = [];
  for (const ms of event.doc.waits) {
    await sleep(ms);
    seen.push(Date.now());
  }
  await ctx.db.put({ ...event.doc, step: "done", seen }, { ifRev: event.doc._rev });
}
`

func TestTimersFireAtTheirOwnVirtualTime(t *testing.T) {
	t.Parallel()
	env := sim.New(t, sim.Options{Dir: sim.WriteApp(t, map[string]string{"backend.js": sleeper})})
	t0 := env.Now()
	env.Put("work", "w1", map[string]any{"step": "start", "waits": []int{1000, 2500, 7000}})

	took := env.RunUntil(func() bool { d := env.Get("work", "w1"); return d["step"] == "done" }, time.Minute)
	if took != 10500*time.Millisecond {
		t.Errorf("RunUntil took %v of virtual time, want exactly 10.5s (the sum of the waits)", took)
	}
	seen := env.Get("work", "w1")["seen"].([]any)
	want := []int64{t0.UnixMilli() + 1000, t0.UnixMilli() + 3500, t0.UnixMilli() + 10500}
	for i, w := range want {
		if int64(seen[i].(float64)) != w {
			t.Errorf("wait %d ended at %v, want %v", i, seen[i], w)
		}
	}
	h := env.History("work", "w1")
	if len(h) != 2 || !h[1].Time.Equal(t0.Add(10500*time.Millisecond)) || h[1].Path != "onChange" {
		t.Errorf("history: %+v", h)
	}
	runs := env.OnChangeRuns("work", "w1")
	if len(runs) != 2 || !runs[0].Start.Equal(t0) || !runs[0].End.Equal(t0.Add(10500*time.Millisecond)) || runs[0].Err != nil {
		t.Errorf("runs: %v", runs)
	}
}

// ticker logs each tick; its clock reading must be the planned time.
const ticker = `
export const config = { scheduled: { interval: "2s" } };
export async function scheduled(event, ctx) {
  ctx.log("info", "tick", { planned: event.scheduledTime, now: Date.now() });
}
`

func TestRunForStopsAtItsEndAndNeverJumpsATimer(t *testing.T) {
	t.Parallel()
	start := sim.DefaultStart.Add(500 * time.Millisecond)
	env := sim.New(t, sim.Options{Start: start, Dir: sim.WriteApp(t, map[string]string{"backend.js": ticker})})
	env.RunFor(10 * time.Second)
	if !env.Now().Equal(start.Add(10 * time.Second)) {
		t.Fatalf("RunFor(10s) ended at +%v", env.Elapsed())
	}
	ticks := env.Ticks()
	if len(ticks) != 5 {
		t.Fatalf("%d ticks in 10 s of a 2 s schedule, want 5: %v", len(ticks), ticks)
	}
	for i, r := range ticks {
		want := sim.DefaultStart.Add(time.Duration(2*(i+1)) * time.Second)
		if !r.Planned.Equal(want) || !r.Start.Equal(want) || !r.End.Equal(want) || r.Err != nil {
			t.Errorf("tick %d: %v, want planned and run at %s", i, r, want.Format(time.TimeOnly))
		}
	}
	lines := env.LogsContaining("tick")
	if len(lines) != 5 {
		t.Fatalf("%d tick log lines, want 5", len(lines))
	}
	for _, l := range lines {
		f := sim.Decode(t, l.Fields)
		if f["planned"] != f["now"] || !l.Time.Equal(time.UnixMilli(int64(f["now"].(float64))).UTC()) {
			t.Errorf("tick line %s %s: Date.now() is not the planned time", l.Time, l.Fields)
		}
	}
}

// chain writes a document per event, one after another, with a little
// work between: Settle must wait for the whole burst without the clock
// moving.
const chain = `
export async function onChange(event, ctx) {
  if (event.dbName !== "in") return;
  let h = 0;
  for (let i = 0; i < 2000; i++) h = (h * 31 + i) % 1000003;
  await ctx.db.put({ from: event.docId, h }, { db: "out", id: event.docId });
}
`

func TestSettleWaitsForABurstAtOneInstant(t *testing.T) {
	t.Parallel()
	env := sim.New(t, sim.Options{Dir: sim.WriteApp(t, map[string]string{"backend.js": chain})})
	t0 := env.Now()
	const n = 20
	for i := range n {
		env.Put("in", fmt.Sprintf("d%02d", i), map[string]any{"i": i})
	}
	env.Settle()
	if !env.Now().Equal(t0) {
		t.Fatalf("Settle moved the clock")
	}
	for i := range n {
		if d := env.Get("out", fmt.Sprintf("d%02d", i)); d == nil {
			t.Fatalf("after Settle, out/d%02d is missing", i)
		}
	}
	if evs := env.Events(false); len(evs) != 0 {
		t.Fatalf("after Settle, %d events are still waiting: %+v", len(evs), evs)
	}
}

// cruncher computes for a while between reading the clock and writing,
// touching neither the store nor the clock meanwhile, while a 1 s
// schedule keeps a timer armed just ahead.
const cruncher = `
export const config = { scheduled: { interval: "1s" } };
export async function scheduled() {}
export async function onChange(event, ctx) {
  if (event.dbName !== "in") return;
  const started = Date.now();
  let h = 0;
  for (let i = 0; i < event.doc.loops; i++) h = (h * 31 + i) % 1000003;
  await ctx.db.put({ started, finished: Date.now(), h }, { db: "out", id: event.docId });
}
`

func TestSettleSeesAHandlerComputing(t *testing.T) {
	t.Parallel()
	env := sim.New(t, sim.Options{Dir: sim.WriteApp(t, map[string]string{"backend.js": cruncher})})
	t0 := env.Now()
	env.Put("in", "c1", map[string]any{"loops": 100000})
	env.RunFor(3 * time.Second)
	d := env.Get("out", "c1")
	if d == nil {
		t.Fatal("the handler never wrote")
	}
	if started, finished := int64(d["started"].(float64)), int64(d["finished"].(float64)); started != t0.UnixMilli() || finished != started {
		t.Fatalf("the clock moved while the handler computed: started at +%dms, finished at +%dms", started-t0.UnixMilli(), finished-t0.UnixMilli())
	}
	if h := env.History("out", "c1"); !h[0].Time.Equal(t0) {
		t.Fatalf("written at %v, want %v", h[0].Time, t0)
	}
}
