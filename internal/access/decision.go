package access

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
	"github.com/handoff-run/handoff/store"
)

// decision converts what the function returned (docs/architecture.md, "access.js"):
// {channels, grant: {public, users, roles}, members}. Lists may also be a
// single string. undefined or null means "allowed, no channels". It reads
// the JS object directly: a round trip through JSON cost a quarter of an
// evaluation.
func decision(vm *jsvm.VM, v goja.Value) (appcode.AccessDecision, error) {
	if absent(v) {
		return appcode.AccessDecision{Channels: []string{}}, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return appcode.AccessDecision{}, badReturn("a " + jsvm.TypeOf(v))
	}
	channels, err := stringList(obj.Get("channels"), "channels")
	if err != nil {
		return appcode.AccessDecision{}, err
	}
	d := appcode.AccessDecision{Channels: dedupe(channels)}
	add := func(kind, principal string, channels []string) {
		for _, c := range dedupe(channels) {
			d.Grants = append(d.Grants, store.Grant{Kind: kind, Principal: principal, Channel: c})
		}
	}
	if g := obj.Get("grant"); !absent(g) {
		grant, ok := g.(*goja.Object)
		if !ok {
			return appcode.AccessDecision{}, badReturn("grant is not an object")
		}
		public, err := stringList(grant.Get("public"), "grant.public")
		if err != nil {
			return appcode.AccessDecision{}, err
		}
		add("public", "", public)
		for _, kind := range []string{"users", "roles"} {
			lists, err := listMap(grant.Get(kind), "grant."+kind)
			if err != nil {
				return appcode.AccessDecision{}, err
			}
			for _, who := range sortedKeys(lists) {
				add(strings.TrimSuffix(kind, "s"), who, lists[who])
			}
		}
	}
	// members: {role: [user ids]} gives each user the role.
	members, err := listMap(obj.Get("members"), "members")
	if err != nil {
		return appcode.AccessDecision{}, err
	}
	for _, role := range sortedKeys(members) {
		for _, u := range dedupe(members[role]) {
			d.Grants = append(d.Grants, store.Grant{Kind: "member", Principal: u, Channel: role})
		}
	}
	return d, nil
}

func absent(v goja.Value) bool { return v == nil || goja.IsUndefined(v) || goja.IsNull(v) }

// stringList reads "a" or ["a", "b"].
func stringList(v goja.Value, what string) ([]string, error) {
	if absent(v) {
		return nil, nil
	}
	if goja.IsString(v) {
		return []string{v.String()}, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return nil, badReturn(what + " is neither a string nor an array of strings")
	}
	switch obj.ClassName() {
	case "String": // new String("a"), as goja's export reads it
		return []string{obj.String()}, nil
	case "Array", "Arguments":
	default:
		// Nothing else is exported to look at: an export copies every
		// value inside, and a sparse array there asks for gigabytes.
		return nil, badReturn(what + " is neither a string nor an array of strings")
	}
	// Read the items in place: Export would copy the array and keep a map
	// of what it copied, a third of a decision's allocations. The length
	// is the function's to choose: grow as items are read.
	n := obj.Get("length").ToInteger()
	out := make([]string, 0, min(n, 16))
	for i := range n {
		e := obj.Get(strconv.FormatInt(i, 10))
		if !goja.IsString(e) {
			return nil, badReturn(fmt.Sprintf("%s[%d] is not a string", what, i))
		}
		out = append(out, e.String())
	}
	return out, nil
}

// listMap reads {key: "a" | ["a", ...]}.
func listMap(v goja.Value, what string) (map[string][]string, error) {
	if absent(v) {
		return nil, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return nil, badReturn(what + " is not an object")
	}
	out := map[string][]string{}
	for _, k := range obj.Keys() {
		l, err := stringList(obj.Get(k), what+"."+k)
		if err != nil {
			return nil, err
		}
		out[k] = l
	}
	return out, nil
}

func badReturn(what string) error {
	return errs.New(errs.AccessError, "access.js returned something other than {channels, grant, members} (%s); return an object such as {channels: [\"jobs\"]}, or nothing", what)
}

func dedupe(l []string) []string {
	out := make([]string, 0, len(l))
	for _, s := range l {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
