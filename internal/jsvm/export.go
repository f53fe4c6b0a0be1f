package jsvm

import (
	"reflect"
	"strconv"

	"github.com/dop251/goja"
)

// goja's Value.Export sizes an exported array by its length, and a length
// costs nothing to set: `a.length = 4e9` on an empty array asks Go for
// 64 GB in one allocation, which no heap limit sees coming, and the whole
// process dies. So values the user's code made are exported with Export
// here, never with goja's, and booleans are read with Bool.

// Export bounds: values taken in all (items and properties, at any
// depth), and nesting. Past either, an array or object is cut short.
const (
	maxExportItems = 10_000
	maxExportDepth = 64
)

// Export converts v as goja's Export does (nil, string, int64, float64,
// bool, []any, map[string]any, ...), within maxExportItems values and
// maxExportDepth levels. An object met again (a cycle) exports as nil.
// Reading properties can run the user's getters: call it where the
// call's budgets hold.
func Export(v goja.Value) any {
	e := exporter{budget: maxExportItems}
	return e.value(v, 0)
}

type exporter struct {
	budget int
	seen   map[*goja.Object]bool
}

func (e *exporter) value(v goja.Value, depth int) any {
	obj, ok := v.(*goja.Object)
	if !ok {
		if v == nil {
			return nil
		}
		return v.Export() // a primitive: nothing to size
	}
	walk := obj.ClassName() == "Array" || obj.ClassName() == "Arguments"
	switch t := obj.ExportType(); {
	case walk, t == mapType:
	case t == listType, t == pairsType:
		// A Set or a Map: goja exports every value in it, unbounded.
		return nil
	default:
		// Dates, typed arrays (no copy), functions, promises, proxies:
		// nothing inside that an export walks.
		return obj.Export()
	}
	if depth >= maxExportDepth || e.seen[obj] {
		return nil
	}
	if e.seen == nil {
		e.seen = map[*goja.Object]bool{}
	}
	e.seen[obj] = true
	defer delete(e.seen, obj)
	if walk {
		n := obj.Get("length").ToInteger()
		out := make([]any, 0, min(n, 16))
		for i := int64(0); i < n && e.budget > 0; i++ {
			e.budget--
			out = append(out, e.value(obj.Get(strconv.FormatInt(i, 10)), depth+1))
		}
		return out
	}
	// Plain values first, then what nests: a long list beside {forbidden}
	// must not use up the budget before the reason is read.
	out := map[string]any{}
	type member struct {
		key string
		obj *goja.Object
	}
	var nested []member
	for _, k := range obj.Keys() {
		if e.budget <= 0 {
			break
		}
		e.budget--
		p := obj.Get(k)
		if o, isObj := p.(*goja.Object); isObj {
			nested = append(nested, member{k, o})
			out[k] = nil
			continue
		}
		out[k] = e.value(p, depth+1)
	}
	for _, m := range nested {
		out[m.key] = e.value(m.obj, depth+1)
	}
	return out
}

var (
	mapType   = reflect.TypeFor[map[string]any]()
	listType  = reflect.TypeFor[[]any]()
	pairsType = reflect.TypeFor[[][2]any]()
)

var boolType = reflect.TypeFor[bool]()

// Bool reads v if it is a boolean (or a Boolean object), without
// exporting anything else.
func Bool(v goja.Value) (b, ok bool) {
	if v == nil || v.ExportType() != boolType {
		return false, false
	}
	b, ok = v.Export().(bool)
	return b, ok
}
