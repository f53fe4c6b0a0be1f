package access_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/handoff-run/handoff/access"
	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store/sqlite"
)

func TestSmokeAccess(t *testing.T) {
	ctx := context.Background()
	st, _ := sqlite.Open(t.TempDir())
	defer st.Close()
	e := engine.New(st, engine.Options{Runtime: access.New(access.Options{})})
	tok, _ := e.Bootstrap(ctx, "")
	admin, _ := e.Authenticate(ctx, tok)
	e.AddUser(ctx, admin, "alice")
	e.CreateApp(ctx, admin, "alice/jobs", false)
	src, _ := os.ReadFile("../examples/jobs/access.js")
	if _, err := e.Deploy(ctx, admin, "alice/jobs", string(src), ""); err != nil {
		t.Fatal(err)
	}
	_, err := e.Deploy(ctx, admin, "alice/jobs", "export function x( {", "")
	t.Log(err)
	alice := engine.Actor{User: "alice"}
	r, err := e.Put(ctx, alice, "alice/jobs", "jobs", "j1", []byte(`{"kind":"job","status":"pending","attempts":0,"input":"x"}`), engine.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Put(ctx, alice, "alice/jobs", "jobs", "j1", []byte(`{"kind":"job","status":"running","attempts":1,"input":"x","claimId":"a","leaseUntil":9e15}`), engine.PutOptions{})
	t.Log(err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	be := engine.Actor{User: "alice", Handler: "onChange"}
	for i := 0; i < 50; i++ {
		wg.Go(func() {
			_, err := e.Put(ctx, be, "alice/jobs", "jobs", "j1", []byte(`{"kind":"job","status":"running","attempts":1,"input":"x","claimId":"c`+string(rune('a'+i%26))+`","leaseUntil":9e15}`), engine.PutOptions{})
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if errs.CodeOf(err) != errs.Forbidden {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	t.Log("wins", wins, r.Rev)
	_, err = e.Put(ctx, alice, "alice/jobs", "jobs", "", []byte(`{"kind":"job","status":"pending","attempts":0,"input":"x","x":(function(){})}`), engine.PutOptions{})
	t.Log(err)
	e.Deploy(ctx, admin, "alice/jobs", "export default function(){ while(true){} }", "")
	_, err = e.Put(ctx, alice, "alice/jobs", "jobs", "", []byte(`{}`), engine.PutOptions{})
	t.Log(err)
	e.Deploy(ctx, admin, "alice/jobs", "export default function(doc){ return doc.nope.x }", "")
	_, err = e.Put(ctx, alice, "alice/jobs", "jobs", "", []byte(`{}`), engine.PutOptions{})
	t.Log(err)
}
