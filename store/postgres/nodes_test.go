package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

var t0 = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

func newApp(t testing.TB, st store.Store, name string) int64 {
	t.Helper()
	ctx := context.Background()
	if err := st.CreateUser(ctx, store.User{Name: "alice", Created: t0}); err != nil && !errors.Is(err, store.ErrExists) {
		t.Fatal(err)
	}
	a, err := st.CreateApp(ctx, store.App{Owner: "alice", Name: name, Created: t0})
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// putEvent commits a new document with an onChange event due at due.
func putEvent(t testing.TB, st store.Store, app int64, id string, due time.Time) int64 {
	t.Helper()
	w := &store.Write{AppID: app, DB: "jobs", ID: id, Rev: "1-a", Body: []byte(`{"n":1}`), Path: "http", Time: t0,
		Event: &store.EventSpec{NextAt: due}}
	seq, err := st.Commit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// commitUnannounced adds a revision of app to the ledger as a commit
// whose notification was lost leaves it, and returns its seq.
func commitUnannounced(t *testing.T, st *Store, app int64) int64 {
	t.Helper()
	var seq int64
	if err := st.pool.QueryRow(context.Background(), `WITH s AS (SELECT nextval('handoff_seq') AS v)
		INSERT INTO revisions (app_id, seq, db, id, rev, deleted, body, time, path)
		SELECT $1, v, 'jobs', 'unannounced-' || v, '1-x', false, '{}', 0, 'http' FROM s RETURNING seq`, app).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

func seqsOf(evs []store.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// twoNodes opens two stores on one fresh database: two nodes.
func twoNodes(t *testing.T) (a, b *Store) {
	t.Helper()
	dbURL := freshDB(t)
	a, b = openAt(t, dbURL), openAt(t, dbURL)
	t.Cleanup(func() { a.Close(); b.Close() })
	if a.Node() == b.Node() {
		t.Fatalf("two stores share the node id %s", a.Node())
	}
	return a, b
}

// TestWatchAcrossNodes: B's Watch hears of A's commits, through NOTIFY,
// in order, and through the poll when a notification is lost.
func TestWatchAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	app := newApp(t, a, "jobs")
	type heard struct{ app, seq int64 }
	var mu sync.Mutex
	var got []heard
	b.Watch(func(appID, seq int64) {
		mu.Lock()
		got = append(got, heard{appID, seq})
		mu.Unlock()
	})
	var local []int64
	a.Watch(func(appID, seq int64) { local = append(local, seq) })
	waitFor := func(seq int64, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			mu.Lock()
			n := len(got)
			done := n > 0 && got[n-1] == heard{app, seq}
			mu.Unlock()
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("B did not hear of seq %d within %v; heard %v", seq, within, got)
			}
			time.Sleep(time.Millisecond)
		}
	}
	start := time.Now()
	for i := range 20 {
		if _, err := a.Commit(ctx, &store.Write{AppID: app, DB: "jobs", ID: fmt.Sprint("d", i), Rev: "1-a",
			Body: []byte(`{}`), Path: "http", Time: t0}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(20, 10*time.Second)
	t.Logf("B heard of 20 commits on A after %v", time.Since(start))
	if n := b.watch.heard.Load(); n == 0 {
		t.Fatal("B heard of A's commits only through the poll, not through NOTIFY")
	}
	mu.Lock()
	for i := 1; i < len(got); i++ {
		if got[i].seq <= got[i-1].seq {
			t.Fatalf("B heard seqs out of order: %v", got)
		}
	}
	mu.Unlock()
	if len(local) != 20 || local[19] != 20 {
		t.Fatalf("A's own watcher heard %v, want 1..20", local)
	}
	// A commit whose notification is lost: the poll finds it.
	if seq := commitUnannounced(t, a, app); seq != 21 {
		t.Fatalf("the unannounced commit took seq %d, want 21", seq)
	}
	waitFor(21, 10*pollEvery)
}

// TestClaimsAcrossNodes: two nodes claiming at once never get the same
// event while it is leased; a lease that runs out hands the event to the
// other node; a late settlement of the old holder does not undo the new
// holder's lease; Close hands back what a node still holds.
func TestClaimsAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	app := newApp(t, a, "jobs")
	const n = 300
	for i := range n {
		putEvent(t, a, app, fmt.Sprintf("d%03d", i), t0)
	}
	var mu sync.Mutex
	owner := map[int64]string{}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for _, st := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: 7, Lease: time.Minute})
				if err != nil {
					errc <- err
					return
				}
				if len(evs) == 0 {
					return
				}
				mu.Lock()
				for _, ev := range evs {
					if prev, dup := owner[ev.Seq]; dup {
						errc <- fmt.Errorf("event %d claimed by %s and again by %s", ev.Seq, prev, st.Node())
					}
					owner[ev.Seq] = st.Node()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if len(owner) != n {
		t.Fatalf("%d events claimed, want %d", len(owner), n)
	}
	byNode := map[string]int{}
	for _, o := range owner {
		byNode[o]++
	}
	t.Logf("claims per node: %v", byNode)

	// Leased everywhere: nothing to claim until the leases end, and the
	// next due time is the end of the leases.
	for _, st := range []*Store{a, b} {
		if evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(59 * time.Second), Limit: 10, Lease: time.Minute}); err != nil || len(evs) != 0 {
			t.Fatalf("claim while leased: %v, %v", seqsOf(evs), err)
		}
	}
	if at, ok, err := b.NextEventDue(ctx, app); err != nil || !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("NextEventDue while leased = %v, %v, %v; want the end of the leases %v", at, ok, err, t0.Add(time.Minute))
	}

	// A's leases run out: B takes A's events.
	later := t0.Add(61 * time.Second)
	var aSeq []int64
	for seq, o := range owner {
		if o == a.Node() {
			aSeq = append(aSeq, seq)
		}
	}
	slices.Sort(aSeq)
	evs, err := b.ClaimEvents(ctx, store.Claim{AppID: app, Now: later, Limit: 5, Lease: time.Minute})
	if err != nil || len(evs) != 5 || evs[0].Seq != 1 {
		t.Fatalf("claim after the leases ended = %v, %v; want 5 events from seq 1", seqsOf(evs), err)
	}
	taken := evs[0].Seq
	// A settles it late (a retry): B holds it now, so nothing changes.
	if err := a.SettleEvent(ctx, app, taken, store.Settlement{Attempts: 1, NextAt: later, LastError: "late"}); err != nil {
		t.Fatal(err)
	}
	if evs, err := a.ClaimEvents(ctx, store.Claim{AppID: app, Now: later, Limit: 1, Lease: time.Minute}); err != nil || len(evs) != 1 || evs[0].Seq == taken {
		t.Fatalf("after a late settlement A claims %v, %v; want the next free event, not %d", seqsOf(evs), err, taken)
	}
	// B acks it: gone for everyone.
	if err := b.SettleEvent(ctx, app, taken, store.Settlement{Ack: true}); err != nil {
		t.Fatal(err)
	}
	list, err := a.ListEvents(ctx, app, false, 0, 1000)
	if err != nil || len(list) != n-1 || list[0].Seq == taken {
		t.Fatalf("ListEvents after the ack: %d events from %v, %v", len(list), seqsOf(list[:1]), err)
	}

	// Close hands back A's leases: B claims them at once.
	held, err := a.ClaimEvents(ctx, store.Claim{AppID: app, Now: later, Limit: 10, Lease: time.Hour})
	if err != nil || len(held) != 10 {
		t.Fatalf("A claims %v, %v", seqsOf(held), err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := b.ClaimEvents(ctx, store.Claim{AppID: app, Now: later, Limit: 1000, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range held {
		if !slices.Contains(seqsOf(got), ev.Seq) {
			t.Fatalf("after A closed, B cannot claim event %d that A held", ev.Seq)
		}
	}
}

// TestAcquireTickAcrossNodes: one tick per planned time, whoever asks.
func TestAcquireTickAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	app := newApp(t, a, "jobs")
	tickContract(t, []store.Store{a, b}, []string{a.Node(), b.Node()}, app)
}

// TestAcquireTickSQLite: the embedded store keeps the same contract.
func TestAcquireTickSQLite(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	app := newApp(t, st, "jobs")
	tickContract(t, []store.Store{st, st}, []string{"n1", "n2"}, app)
}

func tickContract(t *testing.T, sts []store.Store, nodes []string, app int64) {
	ctx := context.Background()
	for round := range 5 {
		planned := t0.Add(time.Duration(round) * time.Minute)
		var mu sync.Mutex
		winners := map[string]int{}
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := sts[i%2].AcquireTick(ctx, app, planned, nodes[i%2], planned)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					winners[nodes[i%2]]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: tick given to %v, want one node", round, winners)
		}
		for node := range winners {
			// The holder asking again keeps it; the other node does not.
			other := nodes[0]
			if other == node {
				other = nodes[1]
			}
			if ok, err := sts[0].AcquireTick(ctx, app, planned, node, planned); err != nil || !ok {
				t.Fatalf("round %d: the holder asking again got %v, %v", round, ok, err)
			}
			if ok, err := sts[1].AcquireTick(ctx, app, planned, other, planned); err != nil || ok {
				t.Fatalf("round %d: the other node asking again got %v, %v", round, ok, err)
			}
		}
		// A late node cannot take an older tick back.
		if ok, err := sts[0].AcquireTick(ctx, app, planned.Add(-time.Second), nodes[0], planned); err != nil || ok {
			t.Fatalf("round %d: an older tick was given: %v, %v", round, ok, err)
		}
	}
	// Apps are independent.
	if ok, err := sts[1].AcquireTick(ctx, app+1000, t0, nodes[1], t0); err != nil || !ok {
		t.Fatalf("another app's tick: %v, %v", ok, err)
	}
}
