package backend

import (
	"math"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// config.onChange.when and dbs filter the commits that get an event:
//
//	onChange: { when: { kind: "job", status: ["pending"] }, dbs: ["jobs"] }
//
// A filter that is wrong would drop events silently, so everything that
// is not plainly meant is refused: paths, objects, empty lists.

const whenExample = `when: {status: ["pending", "retry"]}`

func (r configReader) when(v goja.Value, cfg *appcode.BackendConfig) error {
	o, err := r.object(v, ".onChange.when", whenExample)
	if err != nil {
		return err
	}
	var when []appcode.FieldMatch
	for _, key := range o.Keys() {
		field := ".onChange.when." + key
		switch {
		case key == "":
			return r.fail(".onChange.when", `has an empty field name; name a top-level field of your documents, e.g. %s`, whenExample)
		case strings.Contains(key, "."):
			return r.fail(`.onChange.when["`+key+`"]`, "is a path; when matches top-level fields only, so keep the value in a top-level field and name that, e.g. %s", whenExample)
		case key[0] == '_':
			return r.fail(field, "names a field of the server (fields starting with '_'); match a field of your own documents, e.g. %s", whenExample)
		}
		values, err := r.whenValues(o.Get(key), field)
		if err != nil {
			return err
		}
		when = append(when, appcode.FieldMatch{Field: key, Values: values})
	}
	cfg.OnChange.When = when
	return nil
}

// whenValues reads a when value: one scalar, or a non-empty list of them.
func (r configReader) whenValues(v goja.Value, field string) ([]any, error) {
	arr, ok := v.(*goja.Object)
	if !ok || arr.ClassName() != "Array" {
		x, ok := scalar(v)
		if !ok {
			return nil, r.fail(field, "is %s; write a string, number, boolean or null, or a list of them, e.g. %s", describe(v), whenExample)
		}
		return []any{x}, nil
	}
	n := arr.Get("length").ToInteger()
	if n == 0 {
		return nil, r.fail(field, "is an empty list, which no document matches; list the values to deliver, or drop the field to deliver all")
	}
	values := make([]any, 0, n)
	for i := range n {
		item := arr.Get(strconv.FormatInt(i, 10))
		x, ok := scalar(item)
		if !ok {
			return nil, r.fail(field+"["+strconv.FormatInt(i, 10)+"]", "is %s; a list holds strings, numbers, booleans or null, e.g. %s", describe(item), whenExample)
		}
		values = append(values, x)
	}
	return values, nil
}

// scalar converts a JS value to the JSON scalar it is, as encoding/json
// decodes one: string, float64, bool or nil.
func scalar(v goja.Value) (any, bool) {
	switch {
	case v == nil || goja.IsUndefined(v):
		return nil, false
	case goja.IsNull(v):
		return nil, true
	case goja.IsString(v):
		return v.String(), true
	case goja.IsNumber(v):
		f := v.ToFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false // JSON has neither
		}
		return f, true
	}
	if b, ok := jsvm.Bool(v); ok {
		return b, true
	}
	return nil, false
}

func (r configReader) dbs(v goja.Value, cfg *appcode.BackendConfig) error {
	const example = `dbs: ["jobs"]`
	arr, ok := v.(*goja.Object)
	if !ok || arr.ClassName() != "Array" {
		return r.fail(".onChange.dbs", "is %s; write a list of database names, e.g. %s", describe(v), example)
	}
	n := arr.Get("length").ToInteger()
	if n == 0 {
		return r.fail(".onChange.dbs", "is an empty list, so onChange would never run; list the databases to deliver, e.g. %s, or drop dbs to deliver all", example)
	}
	dbs := make([]string, 0, n)
	for i := range n {
		item := arr.Get(strconv.FormatInt(i, 10))
		field := ".onChange.dbs[" + strconv.FormatInt(i, 10) + "]"
		if !goja.IsString(item) {
			return r.fail(field, "is %s; write a database name, e.g. %s", describe(item), example)
		}
		if engine.ValidDB(item.String()) != nil {
			return r.fail(field, "is %s; a database name is 1-64 letters, digits, '_' or '-'", describe(item))
		}
		dbs = append(dbs, item.String())
	}
	cfg.OnChange.DBs = dbs
	return nil
}
