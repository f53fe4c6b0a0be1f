package engine_test

import (
	"context"
	"testing"

	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/store/sqlite"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := engine.New(st, engine.Options{})
	tok, err := e.Bootstrap(ctx, "")
	if err != nil || tok == "" {
		t.Fatal(err, tok)
	}
	admin, err := e.Authenticate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddUser(ctx, admin, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, "alice/jobs", false); err != nil {
		t.Fatal(err)
	}
	alice := engine.Actor{User: "alice"}
	r, err := e.Put(ctx, alice, "alice/jobs", "jobs", "j1", []byte(`{"status":"pending","n":1}`), engine.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	r2, err := e.Put(ctx, alice, "alice/jobs", "jobs", "j1", []byte(`{"status":"running"}`), engine.PutOptions{IfRev: r.Rev})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Put(ctx, alice, "alice/jobs", "jobs", "j1", []byte(`{"status":"x"}`), engine.PutOptions{IfRev: r.Rev})
	t.Log(err)
	p, err := e.Query(ctx, alice, "alice/jobs", "jobs", "status", []byte(`"running"`), 0, "")
	if err != nil || len(p.Docs) != 1 {
		t.Fatal(err, p)
	}
	t.Log(string(p.Docs[0]))
	h, _ := e.History(ctx, alice, "alice/jobs", "jobs", "j1")
	t.Log(len(h), r2)
	c, _ := e.Changes(ctx, alice, "alice/jobs", "", 0, 0)
	t.Logf("%+v", c.Last)
}
