package jsvm

import (
	"context"
	"testing"

	"github.com/dop251/goja"
)

// The module below uses the syntax that real access.js and backend.js
// files use; each export checks one feature end to end (esbuild, goja,
// the pool and the promise loop).
const modernModule = `
export const config = { onChange: { timeout: "15m", concurrency: 4 }, limit: 30_000 }

export function jobs(doc, oldDoc, user, ctx) {
  if (!user) throw { forbidden: "sign in" }
  return { channels: [` + "`jobs-${doc.owner}`" + `] }
}

export default function (doc) {
  return { channels: ["all"], id: doc._id }
}

export async function onChange(event, ctx) {
  const job = await Promise.resolve(event.doc)
  const next = { ...job, status: "done", attempts: (job.attempts ?? 0) + 1 }
  delete next._rev
  return next
}

export function optional(err) {
  return { message: err?.message ?? "none", deep: err?.a?.b?.(), idx: err?.list?.[1] }
}

export const asyncArrow = async (x) => {
  const double = async (y) => y * 2
  return await double(x) + 1_000
}

export function template(user) {
  return ` + "`hello ${user.name}, you have ${user.jobs.length} job${user.jobs.length === 1 ? \"\" : \"s\"}`" + `
}

async function* ticks(n) {
  for (let i = 0; i < n; i++) yield await Promise.resolve(i)
}

export async function asyncGenerators(n) {
  const seen = []
  for await (const t of ticks(n)) seen.push(t)
  return seen
}

class Counter {
  #count = 0
  static made = 0
  static { Counter.made = -1 }
  inc() { return ++this.#count }
}

export function classes() {
  const c = new Counter()
  c.inc()
  let x = null
  x ??= 5
  return { count: c.inc(), made: Counter.made, x, rest: (({ a, ...r }) => r)({ a: 1, b: 2 }) }
}

export function usingDecl() {
  const log = []
  {
    using res = { [Symbol.dispose ?? Symbol.for("Symbol.dispose")]() { log.push("disposed") } }
    log.push("used")
  }
  return log
}
`

func TestModernSyntaxRuns(t *testing.T) {
	p := newTestPool(t, "app.js", modernModule, Options{})
	cases := []struct {
		export string
		args   []string
		want   string
	}{
		{"jobs", []string{`{"_id":"j1","owner":"ann"}`, "null", `{"id":"ann"}`, "{}"}, `{"channels":["jobs-ann"]}`},
		{"default", []string{`{"_id":"j1"}`}, `{"channels":["all"],"id":"j1"}`},
		{"onChange", []string{`{"doc":{"_id":"j1","_rev":"1-a","status":"pending"}}`, "{}"}, `{"_id":"j1","status":"done","attempts":1}`},
		{"optional", []string{"null"}, `{"message":"none"}`},
		{"optional", []string{`{"message":"boom","list":[1,2]}`}, `{"message":"boom","idx":2}`},
		{"asyncArrow", []string{"20"}, `1040`},
		{"template", []string{`{"name":"ann","jobs":[1]}`}, `"hello ann, you have 1 job"`},
		{"asyncGenerators", []string{"3"}, `[0,1,2]`},
		{"classes", nil, `{"count":2,"made":-1,"x":5,"rest":{"b":2}}`},
		{"usingDecl", nil, `["used","disposed"]`},
	}
	for _, c := range cases {
		got := mustJSON(t, p, c.export, c.args...)
		if !sameJSON(got, c.want) {
			t.Errorf("%s(%v) = %s, want %s", c.export, c.args, got, c.want)
		}
	}

	var limit, timeout string
	err := p.Value(context.Background(), "config", func(vm *VM, v goja.Value) error {
		var cfg struct {
			Limit    int `json:"limit"`
			OnChange struct {
				Timeout string `json:"timeout"`
			} `json:"onChange"`
		}
		if err := vm.Decode(v, &cfg); err != nil {
			return err
		}
		limit, timeout = string(rune('0'+cfg.Limit/10_000)), cfg.OnChange.Timeout
		return nil
	})
	if err != nil || limit != "3" || timeout != "15m" {
		t.Fatalf("config: %v %q %q", err, limit, timeout)
	}
}
