package access

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/jsvm"
)

// maxNames bounds the list a ctx check takes.
const maxNames = 10_000

// ctxGlobal names the frozen ctx object made once per runtime. It is a
// global only so Check can find it; its functions read Go-side state, so
// replacing or editing it from user code changes nothing but that code's
// own view.
const ctxGlobal = "__handoffAccessCtx"

// setup installs the web API and ctx's checks in a new runtime. Each
// check throws {forbidden: reason}, exactly as a user's own refusal does.
func (f *Func) setup(vm *jsvm.VM) error {
	if err := jsvm.InstallWeb(vm, jsvm.WebOptions{}); err != nil { // URL, structuredClone, crypto, ...
		return err
	}
	st := f.state(vm)

	deny := func(format string, args ...any) {
		o := vm.NewObject()
		o.Set("forbidden", fmt.Sprintf(format, args...))
		panic(vm.ToValue(o))
	}
	names := func(call goja.FunctionCall, what string) []string {
		arg := call.Argument(0)
		if goja.IsString(arg) {
			return []string{arg.String()}
		}
		list, ok := arg.(*goja.Object)
		if !ok || list.ClassName() != "Array" {
			panic(vm.NewTypeError("%s takes a %s name or an array of them", what, what))
		}
		// Read in place, within a bound: the length is free to set.
		n := list.Get("length").ToInteger()
		if n > maxNames {
			panic(vm.NewTypeError("%s takes at most %d %s names, not %d", what, maxNames, what, n))
		}
		out := make([]string, 0, n)
		for i := range n {
			out = append(out, list.Get(strconv.FormatInt(i, 10)).String())
		}
		return out
	}
	ctx := vm.NewObject()
	ctx.Set("requireBackend", func(call goja.FunctionCall) goja.Value {
		want := names(call, "handler")
		if st.in == nil || st.in.Handler == "" || !slices.Contains(want, string(st.in.Handler)) {
			deny("only the backend's %s handler may make this change", strings.Join(want, " or "))
		}
		return goja.Undefined()
	})
	ctx.Set("requireUser", func(call goja.FunctionCall) goja.Value {
		want := names(call, "user")
		if st.in == nil || st.in.User == nil || !slices.Contains(want, st.in.User.ID) {
			deny("only user %s may make this change", strings.Join(want, " or "))
		}
		return goja.Undefined()
	})
	ctx.Set("requireRole", func(call goja.FunctionCall) goja.Value {
		want := names(call, "role")
		if st.in == nil || st.in.User == nil || !slices.ContainsFunc(want, func(r string) bool { return slices.Contains(st.in.User.Roles, r) }) {
			deny("this change needs the role %s", strings.Join(want, " or "))
		}
		return goja.Undefined()
	})
	ctx.Set("requireAccess", func(call goja.FunctionCall) goja.Value {
		want := names(call, "channel")
		if st.in == nil || st.in.User == nil {
			deny("this change needs access to channel %s; sign in", strings.Join(want, " or "))
		}
		if st.in.User.IsOwner {
			return goja.Undefined()
		}
		for _, c := range want {
			if st.in.ReadChannels[c] {
				return goja.Undefined()
			}
		}
		deny("this change needs access to channel %s", strings.Join(want, " or "))
		return goja.Undefined()
	})
	ctx.Set("requireOwner", func(call goja.FunctionCall) goja.Value {
		if st.in == nil || st.in.User == nil || !st.in.User.IsOwner {
			deny("only the app's owner may make this change")
		}
		return goja.Undefined()
	})
	freeze, _ := goja.AssertFunction(vm.Get("Object").ToObject(vm.Runtime).Get("freeze"))
	if _, err := freeze(goja.Undefined(), ctx); err != nil {
		return err
	}
	return vm.Set(ctxGlobal, ctx)
}
