package jsvm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

func TestParseJSONMakesPlainObjects(t *testing.T) {
	src := `export function inspect(doc) {
  const copy = { ...doc, extra: true }
  doc.nested.touched = 1
  return { keys: Object.keys(doc), same: doc.nested === doc.nested, copy, touched: doc.nested.touched, isArray: Array.isArray(doc.list) }
}`
	p := newTestPool(t, "access.js", src, Options{})
	got := mustJSON(t, p, "inspect", `{"z":1,"a":{"b":2},"nested":{},"list":[1,"x",null,true]}`)
	want := `{"keys":["z","a","nested","list"],"same":true,"copy":{"z":1,"a":{"b":2},"nested":{"touched":1},"list":[1,"x",null,true],"extra":true},"touched":1,"isArray":true}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestConversions(t *testing.T) {
	p := newTestPool(t, "access.js", `export function id(x) { return x }
export function special() { return { u: undefined, d: new Date(0), n: 1.5, toJ: { toJSON() { return "custom" } } } }
export function cyclic() { const a = {}; a.self = a; return a }
export function nothing() {}
export function topKey() { return { toJSON(key) { return "key:" + JSON.stringify(key) + ":" + (this.mark ?? "") }, mark: "m" } }
export function fn() { return function () {} }
export function nested() { return { inner: { toJSON(key) { return key } }, list: [undefined, () => 1] } }`, Options{})
	ctx := context.Background()

	type user struct {
		ID    string   `json:"id"`
		Roles []string `json:"roles"`
		Owner bool     `json:"isOwner"`
	}
	var back user
	err := p.Call(ctx, "id", func(vm *VM) ([]goja.Value, error) {
		v, err := vm.FromGo(user{ID: "ann", Roles: []string{"editor"}, Owner: true})
		return []goja.Value{v}, err
	}, func(vm *VM, v goja.Value) error {
		if got := v.(*goja.Object).Get("isOwner").ToBoolean(); !got {
			t.Error("json tag not honoured")
		}
		return vm.Decode(v, &back)
	})
	if err != nil || back.ID != "ann" || len(back.Roles) != 1 || !back.Owner {
		t.Fatalf("round trip: %v %+v", err, back)
	}

	for _, x := range []any{nil, "s", 1.5, true, json.RawMessage(`{"a":[1]}`), map[string]any{"k": "v"}} {
		var out string
		err := p.Call(ctx, "id", func(vm *VM) ([]goja.Value, error) {
			v, err := vm.FromGo(x)
			return []goja.Value{v}, err
		}, func(vm *VM, v goja.Value) error {
			b, err := vm.ToJSON(v)
			out = string(b)
			return err
		})
		want, _ := json.Marshal(x)
		if err != nil || !sameJSON(out, string(want)) {
			t.Errorf("FromGo(%#v) -> %s, %v", x, out, err)
		}
	}

	if got := mustJSON(t, p, "special"); got != `{"d":"1970-01-01T00:00:00.000Z","n":1.5,"toJ":"custom"}` {
		t.Errorf("special: %s", got)
	}
	if got := mustJSON(t, p, "nothing"); got != "null" {
		t.Errorf("undefined: %s", got)
	}
	// ToJSON serializes without a holder object: a top-level toJSON still
	// gets "" as its key and the value as this, as JSON.stringify gives.
	for export, want := range map[string]string{
		"topKey": `"key:\"\":m"`,
		"fn":     "null",
		"nested": `{"inner":"inner","list":[null,null]}`,
	} {
		if got := mustJSON(t, p, export); got != want {
			t.Errorf("%s: got %s, want %s", export, got, want)
		}
	}
	if _, err := callJSON(t, p, "cyclic"); err == nil || !strings.Contains(err.Error(), "circular") {
		t.Errorf("cyclic: %v", err)
	}
	err = p.Call(ctx, "id", func(vm *VM) ([]goja.Value, error) {
		v, err := vm.ParseJSON(nil)
		if err != nil || !goja.IsNull(v) {
			t.Errorf("ParseJSON(nil) = %v, %v", v, err)
		}
		_, err = vm.ParseJSON([]byte(`{"a":`))
		if err == nil || !strings.Contains(err.Error(), "invalid JSON") {
			t.Errorf("ParseJSON(bad) = %v", err)
		}
		return nil, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
}

func TestMemoReusesObjectsPerRuntime(t *testing.T) {
	src := `export function tag(ctx) { ctx.calls = (ctx.calls ?? 0) + 1; return ctx.calls }`
	p := newTestPool(t, "access.js", src, Options{Size: 1})
	type ctxKey struct{}
	var builds int
	args := func(vm *VM) ([]goja.Value, error) {
		ctx, err := vm.Memo(ctxKey{}, func(vm *VM) (goja.Value, error) { builds++; return vm.NewObject(), nil })
		return []goja.Value{ctx}, err
	}
	var last int64
	for range 3 {
		if err := p.Call(context.Background(), "tag", args, func(vm *VM, v goja.Value) error { last = v.ToInteger(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if builds != 1 || last != 3 {
		t.Fatalf("builds=%d last=%d", builds, last)
	}
}
