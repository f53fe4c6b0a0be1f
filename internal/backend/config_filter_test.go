package backend_test

import (
	"reflect"
	"testing"

	"github.com/handoff-run/handoff/internal/appcode"
)

func TestConfigWhenAndDBs(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export const config = { onChange: {
	when: { kind: "job", status: ["pending", "retry"], n: [1, 2.5], ok: true, gone: null },
	dbs: ["jobs", "audit"],
} }
export async function onChange() {}`)
	cfg := b.Config()
	want := []appcode.FieldMatch{
		{Field: "kind", Values: []any{"job"}},
		{Field: "status", Values: []any{"pending", "retry"}},
		{Field: "n", Values: []any{1.0, 2.5}},
		{Field: "ok", Values: []any{true}},
		{Field: "gone", Values: []any{nil}},
	}
	if !reflect.DeepEqual(cfg.OnChange.When, want) {
		t.Errorf("when: got %#v, want %#v", cfg.OnChange.When, want)
	}
	if !reflect.DeepEqual(cfg.OnChange.DBs, []string{"jobs", "audit"}) {
		t.Errorf("dbs: got %q", cfg.OnChange.DBs)
	}
	// Without them every commit is delivered, as before.
	b = e.compile(`export async function onChange() {}`)
	if cfg := b.Config(); cfg.OnChange.When != nil || cfg.OnChange.DBs != nil {
		t.Errorf("no filter: got %+v", cfg.OnChange)
	}
}

func TestConfigWhenAndDBsRefused(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		config string
		parts  []string
	}{
		{`{ onChange: { whne: { status: "pending" } } }`, []string{"config.onChange.whne is not a setting; did you mean when?"}},
		{`{ onChange: { db: ["jobs"] } }`, []string{"config.onChange.db is not a setting; did you mean dbs?"}},
		{`{ onChange: { concurency: 4 } }`, []string{"did you mean concurrency?"}},
		{`{ onChagne: {} }`, []string{"config.onChagne is not a setting; did you mean onChange?"}},
		{`{ scheduled: { intervall: "1m" } }`, []string{"did you mean interval?"}},
		{`{ onChange: { when: "pending" } }`, []string{`config.onChange.when is "pending"; write an object`, `status: ["pending"`}},
		{`{ onChange: { when: ["pending"] } }`, []string{`config.onChange.when is an array`}},
		{`{ onChange: { when: { "job.status": "pending" } } }`, []string{`config.onChange.when["job.status"] is a path`, "top-level fields only"}},
		{`{ onChange: { when: { _id: "a" } } }`, []string{`config.onChange.when._id names a field of the server`}},
		{`{ onChange: { when: { "": "a" } } }`, []string{`config.onChange.when has an empty field name`}},
		{`{ onChange: { when: { status: [] } } }`, []string{`config.onChange.when.status is an empty list, which no document matches`}},
		{`{ onChange: { when: { status: { in: ["a"] } } } }`, []string{`config.onChange.when.status is an object`, "a list of them"}},
		{`{ onChange: { when: { status: ["a", ["b"]] } } }`, []string{`config.onChange.when.status[1] is an array`}},
		{`{ onChange: { when: { status: ["a", { b: 1 }] } } }`, []string{`config.onChange.when.status[1] is an object`}},
		{`{ onChange: { when: { status: undefined } } }`, []string{`config.onChange.when.status is undefined`}},
		{`{ onChange: { when: { n: NaN } } }`, []string{`config.onChange.when.n is NaN`}},
		{`{ onChange: { when: { n: [1, Infinity] } } }`, []string{`config.onChange.when.n[1] is Infinity`}},
		{`{ onChange: { when: { f: () => true } } }`, []string{`config.onChange.when.f is a function`}},
		{`{ onChange: { dbs: "jobs" } }`, []string{`config.onChange.dbs is "jobs"; write a list of database names`, `dbs: ["jobs"]`}},
		{`{ onChange: { dbs: [] } }`, []string{`config.onChange.dbs is an empty list, so onChange would never run`}},
		{`{ onChange: { dbs: ["jobs", 3] } }`, []string{`config.onChange.dbs[1] is 3`}},
		{`{ onChange: { dbs: ["my jobs"] } }`, []string{`config.onChange.dbs[0] is "my jobs"; a database name is`}},
	}
	for _, c := range cases {
		t.Run(c.config, func(t *testing.T) {
			e.t = t
			ee := e.refused("export const config = "+c.config+"\nexport async function onChange() {}", append([]string{"backend.js: "}, c.parts...)...)
			t.Log(ee.Message)
		})
	}
}
