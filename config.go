package handoff

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// Checking an App at open refuses what access.js and backend.js's config
// would refuse at deploy: a mistake in a filter would drop events without
// a word, and one in a name would only show at the first write.

// invalid is an error in the definition of an app.
func invalid(app, format string, args ...any) error {
	return errs.New(errs.Invalid, "app %s: %s", app, fmt.Sprintf(format, args...))
}

// message is an error's text without its code, to quote inside another.
func message(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// check refuses an app that cannot run as defined.
func (a *App) check() error {
	if _, _, err := engine.ParseAppRef(a.Name); err != nil {
		return fmt.Errorf("App.Name: %w", err)
	}
	for db, t := range a.Tables {
		if err := engine.ValidDB(db); err != nil {
			return invalid(a.Name, "Tables: %s", message(err))
		}
		if t == nil {
			return invalid(a.Name, "the table of %q is nil; give it a Table, or leave the database out of Tables for the default rule", db)
		}
	}
	return a.checkHandlers()
}

func (a *App) checkHandlers() error {
	o, s := a.OnChange, a.Scheduled
	if o.Handle == nil && (len(o.DBs) > 0 || len(o.When) > 0 || o.Concurrency != 0 || o.MaxAttempts != 0 || o.Timeout != 0 || o.FanOut != 0) {
		return invalid(a.Name, "OnChange has settings but no Handle; give it a Handle, or leave OnChange zero")
	}
	if o.Concurrency < 0 || o.MaxAttempts < 0 || o.Timeout < 0 || o.FanOut < 0 {
		return invalid(a.Name, "OnChange's Concurrency, MaxAttempts, Timeout and FanOut must be 0 (the default) or more")
	}
	for _, db := range o.DBs {
		if err := engine.ValidDB(db); err != nil {
			return invalid(a.Name, "OnChange.DBs: %s", message(err))
		}
	}
	if _, err := a.when(); err != nil {
		return err
	}
	switch {
	case s.Handle == nil && (s.Interval != 0 || s.Timeout != 0):
		return invalid(a.Name, "Scheduled has settings but no Handle; give it a Handle, or leave Scheduled zero")
	case s.Handle != nil && (s.Interval < appcode.MinScheduledInterval || s.Interval > appcode.MaxScheduledInterval):
		return invalid(a.Name, "Scheduled.Interval is %v; set it from %v to %v", s.Interval, appcode.MinScheduledInterval, appcode.MaxScheduledInterval)
	case s.Timeout < 0:
		return invalid(a.Name, "Scheduled.Timeout must be 0 (the default) or more")
	}
	return nil
}

// when converts OnChange.When to the engine's filter, in field order.
func (a *App) when() ([]appcode.FieldMatch, error) {
	const example = `When: map[string][]any{"status": {"pending"}}`
	fields := make([]string, 0, len(a.OnChange.When))
	for f := range a.OnChange.When {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	var out []appcode.FieldMatch
	for _, f := range fields {
		switch {
		case f == "" || strings.Contains(f, "."):
			return nil, invalid(a.Name, "OnChange.When[%q] is not a top-level field; name a field of the documents, e.g. %s", f, example)
		case f[0] == '_':
			return nil, invalid(a.Name, "OnChange.When[%q] names a field of the server (starting with '_'); match a field of your own documents", f)
		case len(a.OnChange.When[f]) == 0:
			return nil, invalid(a.Name, "OnChange.When[%q] lists no value, which no document matches; list the values to deliver, or leave the field out", f)
		}
		m := appcode.FieldMatch{Field: f}
		for _, v := range a.OnChange.When[f] {
			x, ok := scalar(v)
			if !ok {
				return nil, invalid(a.Name, "OnChange.When[%q] holds %v (%T); list strings, numbers, booleans or nil", f, v, v)
			}
			m.Values = append(m.Values, x)
		}
		out = append(out, m)
	}
	return out, nil
}

// scalar converts v to the JSON scalar the engine compares documents
// with, as encoding/json decodes one: string, float64, bool or nil.
func scalar(v any) (any, bool) {
	if v == nil {
		return nil, true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String:
		return r.String(), true
	case reflect.Bool:
		return r.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(r.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(r.Uint()), true
	case reflect.Float32, reflect.Float64:
		return r.Float(), true
	}
	return nil, false
}

// config is the app's handlers' settings with the defaults filled in, as
// the engine reads them.
func (a *App) config() appcode.BackendConfig {
	var c appcode.BackendConfig
	o, s := a.OnChange, a.Scheduled
	c.OnChange.Concurrency = or(o.Concurrency, appcode.DefaultConcurrency)
	c.OnChange.MaxAttempts = or(o.MaxAttempts, appcode.DefaultMaxAttempts)
	c.OnChange.Timeout = or(o.Timeout, appcode.DefaultRunTimeout)
	c.OnChange.FanOut = or(o.FanOut, appcode.DefaultFanOut)
	c.OnChange.DBs = slices.Clone(o.DBs)
	c.OnChange.When, _ = a.when() // checked at open
	if s.Handle != nil {
		c.Scheduled.Interval = s.Interval
	}
	c.Scheduled.Timeout = or(s.Timeout, appcode.DefaultRunTimeout)
	c.Fetch.Timeout, c.Fetch.MaxBytes = appcode.DefaultFetchTimeout, appcode.DefaultFetchMaxBytes
	return c
}

func or[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
