package placement

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

// TestMoveUnderWrites moves an app there and back while writers commit
// and a deliverer claims and acks its events, and a second node that
// looked the app up before keeps writing: every acknowledged write is
// in the ledger after, the seqs have no gap, every event is delivered,
// and the data lives only where the app is placed.
func TestMoveUnderWrites(t *testing.T) {
	grace, wait := DropGrace, WriteWait
	DropGrace = 0           // the worst case: nodes not yet told find the source empty
	WriteWait = time.Minute // this test is about what is kept, not how long a move pauses
	defer func() { DropGrace, WriteWait = grace, wait }()
	urls := freshPair(t)
	a := openRouter(t, urls)
	defer a.Close()
	b := openRouter(t, urls) // a second node
	defer b.Close()
	ctx := context.Background()
	now := time.Now()
	app := newApp(t, a, "alice/jobs")
	start, err := a.Where(ctx, app.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Where(ctx, app.ID); got != start {
		t.Fatalf("node b places the app in %d, node a in %d", got, start)
	}

	type acked struct {
		id, rev string
		seq     int64
	}
	var (
		mu    sync.Mutex
		acks  []acked
		stop  atomic.Bool
		wg    sync.WaitGroup
		fails = make(chan error, 16)
	)
	writer := func(node *Router, id string) {
		defer wg.Done()
		base := ""
		for n := 1; !stop.Load(); n++ {
			rev := fmt.Sprintf("%d-%s", n, id)
			seq, err := node.Commit(ctx, &store.Write{AppID: app.ID, DB: "jobs", ID: id, BaseRev: base, Rev: rev,
				Body: []byte(fmt.Sprintf(`{"n":%d}`, n)), Path: "http", Time: time.Now(),
				Event: &store.EventSpec{NextAt: now}})
			if err != nil {
				fails <- fmt.Errorf("write %s of %s: %w", rev, id, err)
				return
			}
			base = rev
			mu.Lock()
			acks = append(acks, acked{id, rev, seq})
			mu.Unlock()
		}
	}
	delivered := map[int64]bool{}
	var dmu sync.Mutex
	deliver := func(node *Router, at time.Time) int {
		evs, err := node.ClaimEvents(ctx, store.Claim{AppID: app.ID, Now: at, Limit: 50, Lease: time.Minute})
		if err != nil {
			fails <- fmt.Errorf("claim: %w", err)
			return 0
		}
		for _, ev := range evs {
			if err := node.SettleEvent(ctx, app.ID, ev.Seq, store.Settlement{Ack: true, Attempts: 1}); err != nil {
				fails <- fmt.Errorf("settle %d: %w", ev.Seq, err)
			}
			dmu.Lock()
			delivered[ev.Seq] = true
			dmu.Unlock()
		}
		return len(evs)
	}
	for i := range 4 {
		wg.Add(1)
		node := a
		if i%2 == 1 {
			node = b
		}
		go writer(node, fmt.Sprintf("doc%d", i))
	}
	// Both nodes ask for each scheduled tick: one gets it, across moves.
	var ticks, twice atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 1; !stop.Load(); k++ {
			planned := now.Add(time.Duration(k) * time.Second)
			var got [2]bool
			var tw sync.WaitGroup
			for i, node := range []*Router{a, b} {
				tw.Add(1)
				go func() {
					defer tw.Done()
					ok, err := node.AcquireTick(ctx, app.ID, planned, fmt.Sprint("node", i), planned)
					if err != nil {
						fails <- fmt.Errorf("tick %d: %w", k, err)
					}
					got[i] = ok
				}()
			}
			tw.Wait()
			if got[0] && got[1] {
				twice.Add(1)
			}
			if got[0] || got[1] {
				ticks.Add(1)
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if deliver(b, time.Now()) == 0 {
				time.Sleep(time.Millisecond) // nothing due: let the writers go on
			}
		}
	}()
	waitAcks := func(n int) {
		for {
			mu.Lock()
			got := len(acks)
			mu.Unlock()
			if got >= n {
				return
			}
			select {
			case err := <-fails:
				t.Fatal(err)
			case <-time.After(time.Millisecond):
			}
		}
	}
	other := 1 - start
	waitAcks(100)
	began := time.Now()
	if from, err := a.Move(ctx, *app, other); err != nil || from != start {
		t.Fatalf("Move to %d = %d, %v", other, from, err)
	}
	took := []time.Duration{time.Since(began)}
	mu.Lock()
	n := len(acks)
	mu.Unlock()
	waitAcks(n + 100)
	began = time.Now()
	if from, err := b.Move(ctx, *app, start); err != nil || from != other {
		t.Fatalf("Move back to %d = %d, %v", start, from, err)
	}
	took = append(took, time.Since(began))
	mu.Lock()
	n = len(acks)
	mu.Unlock()
	waitAcks(n + 100)
	stop.Store(true)
	wg.Wait()
	close(fails)
	for err := range fails {
		t.Fatal(err)
	}
	// An event settled where the app was, after the copy, is still
	// leased where it is: it comes back once its lease ends.
	for deliver(a, time.Now().Add(2*time.Minute)) > 0 {
	}

	for _, node := range []*Router{a, b} {
		if got, err := node.Where(ctx, app.ID); err != nil || got != start {
			t.Fatalf("after the moves a node places the app in %d (%v), want %d", got, err, start)
		}
	}
	last, err := a.LastSeq(ctx, app.ID)
	if err != nil {
		t.Fatal(err)
	}
	revs, err := a.Changes(ctx, app.ID, "", 0, int(last)+10)
	if err != nil {
		t.Fatal(err)
	}
	// Seqs need not be dense on PostgreSQL (a batch a fence refused after
	// it took its seqs leaves them unused, store/postgres/seqs.go): the
	// ledger holds the acknowledged writes, each once, in seq order, and
	// nothing else.
	if int64(len(revs)) != int64(len(acks)) {
		t.Fatalf("the ledger has %d revisions up to seq %d, for %d acknowledged writes", len(revs), last, len(acks))
	}
	bySeq := map[int64]store.Revision{}
	for i, r := range revs {
		if i > 0 && r.Seq <= revs[i-1].Seq {
			t.Fatalf("revision %d has seq %d after seq %d: out of order", i+1, r.Seq, revs[i-1].Seq)
		}
		bySeq[r.Seq] = r
	}
	for _, k := range acks {
		r, ok := bySeq[k.seq]
		if !ok || r.ID != k.id || r.Rev != k.rev {
			t.Fatalf("acknowledged write %s %s at seq %d reads back as %+v", k.id, k.rev, k.seq, r.Doc)
		}
		if !delivered[k.seq] {
			t.Errorf("the event of seq %d was never delivered", k.seq)
		}
	}
	if len(acks) < 300 {
		t.Fatalf("only %d writes acknowledged", len(acks))
	}
	if twice.Load() > 0 || ticks.Load() == 0 {
		t.Fatalf("%d scheduled ticks were given to both nodes (of %d given)", twice.Load(), ticks.Load())
	}
	// The data lives where the app is, and nowhere else.
	if d, err := a.dbs[other].Get(ctx, app.ID, "jobs", "doc0"); err != nil || d != nil {
		t.Fatalf("database %d still holds the app's document: %v, %v", other, d, err)
	}
	if _, err := a.dbs[other].Commit(ctx, &store.Write{AppID: app.ID, DB: "jobs", ID: "stray", Rev: "1-x",
		Body: []byte(`{}`), Path: "http", Time: now}); err == nil {
		t.Fatal("the database the app left took a write of it")
	}
	t.Logf("%d writes acknowledged across two moves (%v), %d events delivered, %d ticks given, %d writes refused by a fence and retried",
		len(acks), took, len(delivered), ticks.Load(), a.refused.Load()+b.refused.Load())
}

// TestMoveUndo: moving an app to where it is ends a move cut short, and
// its writes go on.
func TestMoveUndo(t *testing.T) {
	r := openRouter(t, freshPair(t))
	defer r.Close()
	ctx := context.Background()
	now := time.Now()
	app := newApp(t, r, "alice/jobs")
	at, _ := r.Where(ctx, app.ID)
	// A move that stopped after fencing the source.
	if err := r.save(ctx, app.ID, place{db: at, movingTo: 1 - at, movedFrom: -1}); err != nil {
		t.Fatal(err)
	}
	if err := r.dbs[at].Fence(ctx, app.ID); err != nil {
		t.Fatal(err)
	}
	old := WriteWait
	WriteWait = 50 * time.Millisecond
	defer func() { WriteWait = old }()
	w := &store.Write{AppID: app.ID, DB: "jobs", ID: "j", Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: now}
	_, err := r.Commit(ctx, w)
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("a write of a fenced app = %v, want unavailable", err)
	}
	if !strings.Contains(err.Error(), "retry in a moment") {
		t.Fatalf("a write of a fenced app = %v, want it to say to retry", err)
	}
	if from, err := r.Move(ctx, *app, at); err != nil || from != at {
		t.Fatalf("Move to where it is = %d, %v", from, err)
	}
	if _, err := r.Commit(ctx, w); err != nil {
		t.Fatalf("a write after the undo: %v", err)
	}
}

// TestMoveResume: a move cut short after its copy, or after its switch,
// is finished by the same move again, with every write kept and the
// database it left emptied.
func TestMoveResume(t *testing.T) {
	grace := DropGrace
	DropGrace = 0
	defer func() { DropGrace = grace }()
	r := openRouter(t, freshPair(t))
	defer r.Close()
	ctx := context.Background()
	now := time.Now()
	for _, cut := range []string{"after the copy", "after the switch"} {
		app := newApp(t, r, "alice/"+strings.ReplaceAll(cut, " ", "-"))
		from, _ := r.Where(ctx, app.ID)
		to := 1 - from
		w := &store.Write{AppID: app.ID, DB: "jobs", ID: "j", Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: now}
		if _, err := r.Commit(ctx, w); err != nil {
			t.Fatal(err)
		}
		// The steps of Move up to the cut.
		if err := r.save(ctx, app.ID, place{db: from, movingTo: to, movedFrom: -1}); err != nil {
			t.Fatal(err)
		}
		if err := r.dbs[from].Fence(ctx, app.ID); err != nil {
			t.Fatal(err)
		}
		if err := r.dbs[from].CopyAppTo(ctx, r.dbs[to], *app); err != nil {
			t.Fatal(err)
		}
		if cut == "after the switch" {
			if err := r.save(ctx, app.ID, place{db: to, movingTo: -1, movedFrom: from}); err != nil {
				t.Fatal(err)
			}
			r.forget(app.ID)
		}
		if _, err := r.Move(ctx, *app, to); err != nil {
			t.Fatalf("%s: moving again: %v", cut, err)
		}
		if at, err := r.Where(ctx, app.ID); err != nil || at != to {
			t.Fatalf("%s: the app is in %d (%v), want %d", cut, at, err, to)
		}
		p, err := r.read(ctx, r.pool, app.ID)
		if err != nil || p.movingTo != -1 || p.movedFrom != -1 {
			t.Fatalf("%s: the move left its record: %+v, %v", cut, p, err)
		}
		if d, err := r.Get(ctx, app.ID, "jobs", "j"); err != nil || d == nil || d.Rev != "1-a" {
			t.Fatalf("%s: the write before the move reads %v, %v", cut, d, err)
		}
		if d, err := r.dbs[from].Get(ctx, app.ID, "jobs", "j"); err != nil || d != nil {
			t.Fatalf("%s: the database the app left still holds %v (%v)", cut, d, err)
		}
		if _, err := r.Commit(ctx, &store.Write{AppID: app.ID, DB: "jobs", ID: "j", BaseRev: "1-a", Rev: "2-b",
			Body: []byte(`{}`), Path: "http", Time: now}); err != nil {
			t.Fatalf("%s: a write after: %v", cut, err)
		}
	}
}
