package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
	"github.com/handoff-run/handoff/internal/suggest"
)

// The config export is read from the loaded module rather than parsed out
// of the source, so a computed config works; it is walked as JS values
// rather than through JSON, so a function or undefined in the wrong place
// is reported instead of silently dropped. Every mistake is refused at
// deploy: a typo in a limit must not surface as a surprise in production.

// Bounds of the onChange settings.
const (
	maxConcurrency = 256
	minRunTimeout  = time.Second
	maxRunTimeout  = time.Hour
	maxMaxAttempts = 100
	maxFanOut      = 100000
)

// durationText is "<n>s|m|h", the one duration syntax of config.
var durationText = regexp.MustCompile(`^([0-9]+)(s|m|h)$`)

var durationUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// readConfig reads the config export, or returns the defaults without one.
// scheduled reports whether config has a scheduled section at all, which
// a module without a scheduled function must not.
func (b *Backend) readConfig(ctx context.Context) (cfg appcode.BackendConfig, scheduled bool, err error) {
	cfg.Scheduled.Timeout = appcode.DefaultRunTimeout
	cfg.OnChange.Concurrency = appcode.DefaultConcurrency
	cfg.OnChange.Timeout = appcode.DefaultRunTimeout
	cfg.OnChange.MaxAttempts = appcode.DefaultMaxAttempts
	cfg.OnChange.FanOut = appcode.DefaultFanOut
	cfg.Fetch.Timeout = appcode.DefaultFetchTimeout
	cfg.Fetch.MaxBytes = appcode.DefaultFetchMaxBytes
	err = b.tick.Value(ctx, "config", func(vm *jsvm.VM, v goja.Value) error {
		r := configReader{file: b.file, scheduled: &scheduled}
		return r.read(v, &cfg)
	})
	if errors.Is(err, jsvm.ErrNoExport) {
		return cfg, false, nil
	}
	var ee *errs.Error
	if err != nil && !errors.As(err, &ee) {
		// A getter that threw or never returned.
		return cfg, false, errs.New(errs.Invalid, "%s: reading config failed: %v; export a plain object", b.file, err)
	}
	return cfg, scheduled, err
}

type configReader struct {
	file      string
	scheduled *bool // set when config.scheduled is present
}

func (r configReader) fail(field, format string, args ...any) error {
	return errs.New(errs.Invalid, "%s: config%s %s", r.file, field, fmt.Sprintf(format, args...))
}

func (r configReader) read(v goja.Value, cfg *appcode.BackendConfig) error {
	if goja.IsUndefined(v) {
		return nil
	}
	top, err := r.object(v, "", `export const config = {scheduled: {interval: "30s"}}`)
	if err != nil {
		return err
	}
	for _, key := range top.Keys() {
		val := top.Get(key)
		switch key {
		case "scheduled":
			*r.scheduled = !goja.IsUndefined(val)
			err = r.readScheduled(val, cfg)
		case "onChange":
			err = r.onChange(val, cfg)
		case "fetch":
			err = r.fetch(val, cfg)
		default:
			err = r.unknown("", key, "config", "scheduled", "onChange", "fetch")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r configReader) readScheduled(v goja.Value, cfg *appcode.BackendConfig) error {
	if goja.IsUndefined(v) {
		return nil
	}
	o, err := r.object(v, ".scheduled", `scheduled: {interval: "30s"}`)
	if err != nil {
		return err
	}
	for _, key := range o.Keys() {
		val := o.Get(key)
		switch key {
		case "timeout":
			if goja.IsUndefined(val) {
				continue
			}
			d, ok := durationOrMillis(val, maxRunTimeout)
			if !ok || d < minRunTimeout || d > maxRunTimeout {
				return r.fail(".scheduled.timeout", `is %s; write a duration from 1s to 1h such as "15m" or "30s", or a number of milliseconds`, describe(val))
			}
			cfg.Scheduled.Timeout = d
		case "interval":
			if goja.IsUndefined(val) {
				continue
			}
			d, ok := parseDuration(val)
			if !ok {
				return r.fail(".scheduled.interval", `is %s; write a whole number and s, m or h, from "1s" to "24h", e.g. interval: "30s"`, describe(val))
			}
			if d < appcode.MinScheduledInterval || d > appcode.MaxScheduledInterval {
				return r.fail(".scheduled.interval", `is %s, outside 1s to 24h; write an interval in that range, e.g. interval: "30s"`, describe(val))
			}
			cfg.Scheduled.Interval = d
		default:
			return r.unknown(".scheduled", key, "scheduled", "interval", "timeout")
		}
	}
	return nil
}

func (r configReader) onChange(v goja.Value, cfg *appcode.BackendConfig) error {
	if goja.IsUndefined(v) {
		return nil
	}
	o, err := r.object(v, ".onChange", `onChange: {concurrency: 4, timeout: "15m", maxAttempts: 10}`)
	if err != nil {
		return err
	}
	for _, key := range o.Keys() {
		val := o.Get(key)
		if goja.IsUndefined(val) {
			continue
		}
		field := ".onChange." + key
		switch key {
		case "concurrency":
			n, ok := integer(val)
			if !ok || n < 1 || n > maxConcurrency {
				return r.fail(field, "is %s; write a whole number from 1 to %d, e.g. concurrency: %d (1 runs events strictly in commit order)", describe(val), maxConcurrency, appcode.DefaultConcurrency)
			}
			cfg.OnChange.Concurrency = n
		case "timeout":
			d, ok := durationOrMillis(val, maxRunTimeout)
			if !ok || d < minRunTimeout || d > maxRunTimeout {
				return r.fail(field, `is %s; write a duration from 1s to 1h such as "15m" or "30s", or a number of milliseconds`, describe(val))
			}
			cfg.OnChange.Timeout = d
		case "maxAttempts":
			n, ok := integer(val)
			if !ok || n < 1 || n > maxMaxAttempts {
				return r.fail(field, "is %s; write a whole number from 1 to %d, e.g. maxAttempts: %d", describe(val), maxMaxAttempts, appcode.DefaultMaxAttempts)
			}
			cfg.OnChange.MaxAttempts = n
		case "fanOut":
			n, ok := integer(val)
			if !ok || n < 1 || n > maxFanOut {
				return r.fail(field, "is %s; write a whole number from 1 to %d, e.g. fanOut: %d (the writes onChange may make, in all, for one write)", describe(val), maxFanOut, appcode.DefaultFanOut)
			}
			cfg.OnChange.FanOut = n
		case "when":
			err = r.when(val, cfg)
		case "dbs":
			err = r.dbs(val, cfg)
		default:
			err = r.unknown(".onChange", key, "onChange", "concurrency", "timeout", "maxAttempts", "fanOut", "when", "dbs")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unknown refuses key of section (a field path, "" for config itself),
// naming the setting it is probably a typo of and all the settings there.
func (r configReader) unknown(section, key, name string, settings ...string) error {
	hint := ";"
	if near := suggest.Closest(key, settings); near != "" {
		hint = "; did you mean " + near + "?"
	}
	list := strings.Join(settings[:len(settings)-1], ", ") + " and " + settings[len(settings)-1]
	return r.fail(section+"."+key, "is not a setting%s %s has %s", hint, name, list)
}

// object wants a plain object (not an array or a function) at field.
func (r configReader) object(v goja.Value, field, example string) (*goja.Object, error) {
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() != "Object" {
		return nil, r.fail(field, "is %s; write an object, e.g. %s", describe(v), example)
	}
	return o, nil
}

// durationOrMillis reads a duration string or a number of milliseconds
// up to limit.
func durationOrMillis(v goja.Value, limit time.Duration) (time.Duration, bool) {
	if d, ok := parseDuration(v); ok {
		return d, true
	}
	if !goja.IsNumber(v) {
		return 0, false
	}
	ms := v.ToFloat()
	if math.IsNaN(ms) || math.IsInf(ms, 0) || ms < 0 || ms > float64(limit/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// parseDuration reads "<n>s|m|h". It refuses what would overflow rather
// than wrapping around into a valid-looking value.
func parseDuration(v goja.Value) (time.Duration, bool) {
	if !goja.IsString(v) {
		return 0, false
	}
	m := durationText.FindStringSubmatch(v.String())
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	unit := durationUnits[m[2]]
	if err != nil || n > int64(math.MaxInt64/unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// integer reads a JS number that is a whole number within int range.
func integer(v goja.Value) (int, bool) {
	if !goja.IsNumber(v) {
		return 0, false
	}
	f := v.ToFloat()
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<31 {
		return 0, false
	}
	return int(f), true
}

// describe renders a JS value for a message: the value itself when it is
// short and simple, else its kind.
func describe(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	case goja.IsString(v):
		s := v.String()
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return strconv.Quote(s)
	case goja.IsNumber(v), goja.IsBigInt(v):
		return v.String()
	}
	if o, ok := v.(*goja.Object); ok {
		if _, fn := goja.AssertFunction(o); fn {
			return "a function"
		}
		if o.ClassName() == "Array" {
			return "an array"
		}
		return "an object"
	}
	if b, ok := jsvm.Bool(v); ok {
		return strconv.FormatBool(b)
	}
	return strings.ToLower(v.String())
}
