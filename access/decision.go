package access

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/jsvm"
	"github.com/handoff-run/handoff/store"
)

// returned is the shape access.js returns (DESIGN §3). Channel lists may
// also be a single string, as a convenience.
type returned struct {
	Channels stringList `json:"channels"`
	Grant    struct {
		Public stringList            `json:"public"`
		Users  map[string]stringList `json:"users"`
		Roles  map[string]stringList `json:"roles"`
	} `json:"grant"`
	Members map[string]stringList `json:"members"`
}

// stringList accepts "a" or ["a", "b"].
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = stringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("expected a string or an array of strings, got %s", b)
	}
	*l = many
	return nil
}

// decision converts what the function returned. undefined or null means
// "allowed, no channels".
func decision(vm *jsvm.VM, v goja.Value) (engine.AccessDecision, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return engine.AccessDecision{Channels: []string{}}, nil
	}
	if _, ok := v.(*goja.Object); !ok {
		return engine.AccessDecision{}, badReturn(fmt.Sprintf("a %s", v.ExportType()))
	}
	var r returned
	if err := vm.Decode(v, &r); err != nil {
		return engine.AccessDecision{}, badReturn(err.Error())
	}
	d := engine.AccessDecision{Channels: dedupe(r.Channels)}
	add := func(kind, principal string, channels []string) {
		for _, c := range dedupe(channels) {
			d.Grants = append(d.Grants, store.Grant{Kind: kind, Principal: principal, Channel: c})
		}
	}
	add("public", "", r.Grant.Public)
	for _, u := range sortedKeys(r.Grant.Users) {
		add("user", u, r.Grant.Users[u])
	}
	for _, role := range sortedKeys(r.Grant.Roles) {
		add("role", role, r.Grant.Roles[role])
	}
	// members: {role: [user ids]} gives each user the role.
	for _, role := range sortedKeys(r.Members) {
		for _, u := range dedupe(r.Members[role]) {
			d.Grants = append(d.Grants, store.Grant{Kind: "member", Principal: u, Channel: role})
		}
	}
	return d, nil
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
