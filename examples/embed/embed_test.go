package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/errs"
)

// TestRun: the program's job walks pending → running → done, moved by
// the onChange handler, which counted its words.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, t.TempDir(), "three little words", &out); err != nil {
		t.Fatal(err)
	}
	want := "pending by bob\nrunning by bob's onChange\ndone by bob's onChange: 3 words\n"
	if out.String() != want {
		t.Fatalf("the job's history:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestTable: a table is a plain function, tested without a store: the
// steps kept for the handler are refused to a client, with the reason.
func TestTable(t *testing.T) {
	bob := &handoff.User{ID: "bob"}
	pending := handoff.Doc(`{"_id":"j","_rev":"1-a","status":"pending","input":"a b","attempts":0}`)
	for _, c := range []struct {
		name, doc, handler, reason string
		user                       *handoff.User
		old                        handoff.Doc
	}{
		{"queue", `{"status":"pending","input":"a b","attempts":0}`, "", "", bob, nil},
		{"queue signed out", `{"status":"pending","input":"a b","attempts":0}`, "", "sign in to queue jobs", nil, nil},
		{"queue done", `{"status":"done","input":"a b","attempts":0}`, "", "a new job is pending, with attempts: 0", bob, nil},
		{"claim", `{"status":"running","input":"a b","attempts":1}`, handoff.HandlerOnChange, "", bob, pending},
		{"claim by a client", `{"status":"running","input":"a b","attempts":1}`, "", "only the backend's onChange handler may make this change", bob, pending},
		{"claim changing input", `{"status":"running","input":"x","attempts":1}`, handoff.HandlerOnChange, "a job's input cannot change", bob, pending},
		{"finish unclaimed", `{"status":"done","input":"a b","attempts":0,"output":{"words":2}}`, handoff.HandlerOnChange, "no transition from pending to done", bob, pending},
	} {
		_, err := table(&handoff.Write{DB: "jobs", ID: "j", Doc: handoff.Doc(c.doc), Old: c.old, User: c.user, Handler: c.handler})
		var e *errs.Error
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.reason != "" && (!errors.As(err, &e) || e.Code != errs.Forbidden || e.Reason != c.reason):
			t.Errorf("%s: %v; want forbidden, %q", c.name, err, c.reason)
		}
	}
}
