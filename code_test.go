package handoff

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// TestHandlerPanics: a handler that panics fails its run with an error,
// which delivers the event again, instead of stopping the program.
func TestHandlerPanics(t *testing.T) {
	h := &handlers{log: slog.New(slog.NewTextHandler(io.Discard, nil)), app: &goApp{name: "a/b",
		onChange:  func(context.Context, Change, *Docs) error { panic("on change") },
		scheduled: func(context.Context, Tick, *Docs) error { panic("on tick") },
	}}
	err := h.OnChange(context.Background(), appcode.ChangeEvent{DB: "jobs"}, nil)
	if err == nil || !strings.Contains(err.Error(), "onChange handler of app a/b panicked: on change") {
		t.Fatalf("onChange: %v", err)
	}
	err = h.Scheduled(context.Background(), appcode.TickEvent{}, nil)
	if err == nil || !strings.Contains(err.Error(), "scheduled handler of app a/b panicked: on tick") {
		t.Fatalf("scheduled: %v", err)
	}
}

// TestDecisionGrants: a decision becomes the grants access.js's would,
// with empty and repeated names dropped and maps in key order.
func TestDecisionGrants(t *testing.T) {
	d := Decision{
		Channels: []string{"a", "", "a", "b"},
		Grant: Grant{Public: []string{"p"}, Users: map[string][]string{"zoe": {"z"}, "bob": {"b", "b"}},
			Roles: map[string][]string{"staff": {"s"}}},
		Members: map[string][]string{"staff": {"bob", ""}},
	}
	got := d.engine()
	want := appcode.AccessDecision{Channels: []string{"a", "b"}, Grants: []store.Grant{
		{Kind: "public", Channel: "p"},
		{Kind: "user", Principal: "bob", Channel: "b"},
		{Kind: "user", Principal: "zoe", Channel: "z"},
		{Kind: "role", Principal: "staff", Channel: "s"},
		{Kind: "member", Principal: "bob", Channel: "staff"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decision %+v\nwant %+v", got, want)
	}
}
