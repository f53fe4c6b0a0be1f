package backend_test

import (
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
)

func TestConfigDefaults(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {}`)
	cfg := b.Config()
	if cfg.Scheduled.Interval != 0 || cfg.Scheduled.Timeout != appcode.DefaultRunTimeout || cfg.OnChange.Concurrency != appcode.DefaultConcurrency ||
		cfg.OnChange.Timeout != appcode.DefaultRunTimeout || cfg.OnChange.MaxAttempts != appcode.DefaultMaxAttempts || cfg.OnChange.FanOut != appcode.DefaultFanOut {
		t.Fatalf("defaults: %+v", cfg)
	}
	if !b.Has("onChange") || b.Has("scheduled") || b.Has("fetch") || b.Has("config") {
		t.Fatal("Has reports the wrong handlers")
	}
	// A config that sets only some fields keeps the defaults of the rest.
	b = e.compile(`export const config = { onChange: { maxAttempts: 3 } }
export async function onChange() {}`)
	if cfg := b.Config(); cfg.OnChange.MaxAttempts != 3 || cfg.OnChange.Concurrency != appcode.DefaultConcurrency || cfg.OnChange.Timeout != appcode.DefaultRunTimeout {
		t.Fatalf("partial config: %+v", cfg)
	}
}

func TestConfigValues(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		config   string
		interval time.Duration
		conc     int
		timeout  time.Duration
		attempts int
	}{
		{`{ scheduled: { interval: "30s" }, onChange: { concurrency: 1, timeout: "15m", maxAttempts: 10 } }`, 30 * time.Second, 1, 15 * time.Minute, 10},
		{`{ scheduled: { interval: "1s" }, onChange: { concurrency: 256, timeout: "1h", maxAttempts: 100 } }`, time.Second, 256, time.Hour, 100},
		{`{ scheduled: { interval: "24h" }, onChange: { timeout: 90000, maxAttempts: 1 } }`, 24 * time.Hour, 16, 90 * time.Second, 1},
		{`{ scheduled: { interval: "5m" }, onChange: { timeout: "1s" } }`, 5 * time.Minute, 16, time.Second, 10},
		// A computed config is read from the loaded module.
		{`(() => ({ scheduled: { interval: 2 * 3 + "s" } }))()`, 6 * time.Second, 16, 15 * time.Minute, 10},
	}
	for _, c := range cases {
		b := e.compile("export const config = " + c.config + `
export async function onChange() {}
export async function scheduled() {}`)
		cfg := b.Config()
		if cfg.Scheduled.Interval != c.interval || cfg.OnChange.Concurrency != c.conc ||
			cfg.OnChange.Timeout != c.timeout || cfg.OnChange.MaxAttempts != c.attempts {
			t.Errorf("%s: got %+v", c.config, cfg)
		}
	}
	b := e.compile(`export const config = { onChange: { fanOut: 5000 } }
export async function onChange() {}`)
	if cfg := b.Config(); cfg.OnChange.FanOut != 5000 {
		t.Errorf("fanOut: got %+v", cfg)
	}
	// A tick's run limit is its own, whatever onChange's is.
	b = e.compile(`export const config = { scheduled: { interval: "1m", timeout: "2m" }, onChange: { timeout: "5s" } }
export async function scheduled() {}`)
	if cfg := b.Config(); cfg.Scheduled.Timeout != 2*time.Minute || cfg.OnChange.Timeout != 5*time.Second {
		t.Errorf("scheduled timeout: got %+v", cfg)
	}
}

func TestConfigRefused(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		config string
		parts  []string // the message names the field and says what to write
	}{
		{`5`, []string{"config is 5", "write an object"}},
		{`[]`, []string{"config is an array"}},
		{`{ retries: 3 }`, []string{"config.retries is not a setting", "scheduled, onChange and fetch"}},
		{`{ scheduled: "30s" }`, []string{`config.scheduled is "30s"`, `interval: "30s"`}},
		{`{ scheduled: { every: "30s" } }`, []string{"config.scheduled.every is not a setting", "interval and timeout"}},
		{`{ scheduled: { interval: "1m", timeout: "2h" } }`, []string{`config.scheduled.timeout is "2h"`, "from 1s to 1h"}},
		{`{ scheduled: { interval: "1m", timeout: 0 } }`, []string{`config.scheduled.timeout is 0`}},
		{`{ scheduled: { interval: "90x" } }`, []string{`config.scheduled.interval is "90x"`, `e.g. interval: "30s"`}},
		{`{ scheduled: { interval: 30 } }`, []string{`config.scheduled.interval is 30`, "s, m or h"}},
		{`{ scheduled: { interval: "1.5m" } }`, []string{`config.scheduled.interval is "1.5m"`}},
		{`{ scheduled: { interval: "0s" } }`, []string{`config.scheduled.interval is "0s", outside 1s to 24h`}},
		{`{ scheduled: { interval: "25h" } }`, []string{`config.scheduled.interval is "25h", outside 1s to 24h`}},
		{`{ scheduled: { interval: "99999999999999999999h" } }`, []string{`config.scheduled.interval is`}},
		{`{ onChange: [] }`, []string{"config.onChange is an array", "concurrency: 4"}},
		{`{ onChange: { concurrency: 0 } }`, []string{"config.onChange.concurrency is 0", "from 1 to 256"}},
		{`{ onChange: { concurrency: 257 } }`, []string{"config.onChange.concurrency is 257", "from 1 to 256"}},
		{`{ onChange: { concurrency: 2.5 } }`, []string{"config.onChange.concurrency is 2.5"}},
		{`{ onChange: { concurrency: "4" } }`, []string{`config.onChange.concurrency is "4"`}},
		{`{ onChange: { timeout: "2h" } }`, []string{`config.onChange.timeout is "2h"`, "from 1s to 1h"}},
		{`{ onChange: { timeout: "500ms" } }`, []string{`config.onChange.timeout is "500ms"`, "number of milliseconds"}},
		{`{ onChange: { timeout: 500 } }`, []string{`config.onChange.timeout is 500`}},
		{`{ onChange: { timeout: 3600001 } }`, []string{`config.onChange.timeout is 3600001`}},
		{`{ onChange: { timeout: () => 5 } }`, []string{`config.onChange.timeout is a function`}},
		{`{ onChange: { maxAttempts: 0 } }`, []string{"config.onChange.maxAttempts is 0", "from 1 to 100"}},
		{`{ onChange: { maxAttempts: 101 } }`, []string{"config.onChange.maxAttempts is 101"}},
		{`{ onChange: { fanOut: 0 } }`, []string{"config.onChange.fanOut is 0", "from 1 to 100000", "fanOut: 100"}},
		{`{ onChange: { fanOut: 100001 } }`, []string{"config.onChange.fanOut is 100001"}},
		{`{ onChange: { fanOut: "all" } }`, []string{`config.onChange.fanOut is "all"`}},
		{`{ onChange: { retries: 3 } }`, []string{"config.onChange.retries is not a setting", "concurrency, timeout, maxAttempts, fanOut, when and dbs"}},
	}
	for _, c := range cases {
		t.Run(c.config, func(t *testing.T) {
			e.t = t
			ee := e.refused("export const config = "+c.config+"\nexport async function onChange() {}", append([]string{"backend.js: "}, c.parts...)...)
			t.Log(ee.Message)
		})
	}
}

func TestScheduledNeedsInterval(t *testing.T) {
	e := newEnv(t)
	for _, src := range []string{
		`export async function scheduled() {}`,
		`export const config = { scheduled: {} }; export async function scheduled() {}`,
		`export const config = { onChange: { concurrency: 2 } }; export async function scheduled() {}`,
	} {
		e.refused(src, "backend.js", `scheduled needs config.scheduled.interval, e.g. "30s"`)
	}
	// config.scheduled without a scheduled function would never tick.
	for _, src := range []string{
		`export const config = { scheduled: { interval: "30s" } }; export async function onChange() {}`,
		`export const config = { scheduled: { timeout: "1m" } }`,
	} {
		e.refused(src, "backend.js sets config.scheduled but exports no scheduled function", "export async function scheduled")
	}
}

func TestSyntaxErrorNamesLineAndColumn(t *testing.T) {
	e := newEnv(t)
	ee := e.refused("export async function onChange(event, ctx) {\n  const x = ;\n}", "backend.js:2:13", "deploy again")
	t.Log(ee.Message)
	// A module whose top level throws is refused with the line too.
	e.refused("const a = 1;\nthrow new Error(\"no config service\");\nexport async function onChange() {}", "backend.js:2:", "no config service")
	// Imports cannot be resolved on the server.
	e.refused(`import x from "lodash"; export async function onChange() {}`, "backend.js:1:", "cannot import")
}

func TestHandlerExportsMustBeFunctions(t *testing.T) {
	e := newEnv(t)
	e.refused(`export const onChange = 5`, "backend.js: export onChange is 5, not a function")
	e.refused(`export const scheduled = {}; export const config = { scheduled: { interval: "1m" } }`, "export scheduled is an object")
}

// TestUnknownExportsRefused: every export is a handler or config, so a
// misspelt handler cannot deploy and silently never run.
func TestUnknownExportsRefused(t *testing.T) {
	e := newEnv(t)
	for typed, meant := range map[string]string{
		"onchange": "onChange", "onChanges": "onChange", "onChnage": "onChange",
		"schedule": "scheduled", "Scheduled": "scheduled", "scheduler": "scheduled",
		"Fetch": "fetch", "fecth": "fetch",
	} {
		e.refused("export async function "+typed+"() {}", "backend.js exports "+typed+", which handoff never calls; did you mean "+meant+"?")
	}
	e.refused(`export const LEASE_MS = 30000; export async function onChange() {}`,
		"backend.js exports LEASE_MS, which handoff never calls", "onChange, scheduled, fetch", "needs no export")
	e.refused(`export default async function (event, ctx) {}`, "exports a default export, which handoff never calls")
	// Helpers that are not exported are fine.
	b := e.compile(`const LEASE_MS = 30000; function helper() { return LEASE_MS; }
export const config = {};
export async function onChange() { helper(); }`)
	if !b.Has("onChange") || b.Has("helper") || b.Has("config") {
		t.Fatal("Has reports the wrong handlers")
	}
}
