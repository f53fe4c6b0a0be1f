package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// testEngineRacingIfRev races 32 writers on one document, several
// rounds: in each round all read the head, then all write with that rev.
// Exactly one wins each revision, the others get conflict, and the
// ledger has exactly one entry per win.
func testEngineRacingIfRev(t *testing.T, e *env) {
	e.fixture()
	const writers, rounds = 32, 5
	first := e.put(alice, appJobs, "jobs", "hot", `{"round":-1}`, appcode.PutOptions{})
	wins := []string{first.Rev}
	for round := range rounds {
		var read, wrote sync.WaitGroup
		start := make(chan struct{})
		revs := make([]string, writers)
		results := make([]appcode.WriteResult, writers)
		errors := make([]error, writers)
		for w := range writers {
			read.Add(1)
			wrote.Add(1)
			go func() {
				defer wrote.Done()
				raw, err := e.eng.Get(e.ctx, alice, appJobs, "jobs", "hot")
				if err == nil {
					var d struct {
						Rev string `json:"_rev"`
					}
					err = json.Unmarshal(raw, &d)
					revs[w] = d.Rev
				}
				read.Done()
				if err != nil {
					errors[w] = err
					return
				}
				<-start
				body := fmt.Sprintf(`{"round":%d,"writer":%d}`, round, w)
				results[w], errors[w] = e.eng.Put(e.ctx, alice, appJobs, "jobs", "hot", []byte(body), appcode.PutOptions{IfRev: revs[w]})
			}()
		}
		read.Wait()
		close(start)
		wrote.Wait()
		winner := -1
		for w := range writers {
			if revs[w] != wins[len(wins)-1] {
				t.Fatalf("round %d: writer %d read rev %q, want the head %q", round, w, revs[w], wins[len(wins)-1])
			}
			switch err := errors[w]; {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won on rev %s", round, winner, w, revs[w])
			case err == nil:
				winner = w
			case errs.CodeOf(err) != errs.Conflict:
				t.Fatalf("round %d: writer %d: %v, want conflict", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won", round)
		}
		wins = append(wins, results[winner].Rev)
		d := e.doc(appJobs, "jobs", "hot")
		if d["_rev"] != results[winner].Rev || d["writer"] != json.Number(fmt.Sprint(winner)) {
			t.Fatalf("round %d: head %v, want the winner %d's rev %s", round, d, winner, results[winner].Rev)
		}
	}
	if g := gen(t, wins[len(wins)-1]); g != rounds+1 {
		t.Fatalf("final generation %d, want %d", g, rounds+1)
	}
	var got []string
	for _, en := range e.hist(appJobs, "jobs", "hot") {
		got = append(got, en.Rev)
	}
	wantIDs(t, got, wins, "History: one entry per win, none lost")
	if s := e.seqOf(appJobs); s != rounds+1 {
		t.Fatalf("LastSeq = %d, want %d", s, rounds+1)
	}
}

// testEngineConcurrentPuts puts one document from 50 goroutines at once
// without ifRev: all succeed, each on the revision before it (never a
// blind overwrite), so the ledger is one unbroken chain of 51.
func testEngineConcurrentPuts(t *testing.T, e *env) {
	e.fixture()
	const writers = 50
	first := e.put(alice, appJobs, "jobs", "hot", `{"writer":-1}`, appcode.PutOptions{})
	results := make([]appcode.WriteResult, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var err error
			results[w], err = e.eng.Put(e.ctx, alice, appJobs, "jobs", "hot", []byte(fmt.Sprintf(`{"writer":%d}`, w)), appcode.PutOptions{})
			if err != nil {
				errc <- fmt.Errorf("writer %d: %w", w, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	revOf := map[string]int{first.Rev: -1}
	seqs := map[int64]bool{}
	for w, r := range results {
		if _, dup := revOf[r.Rev]; dup {
			t.Fatalf("writers %d and %d got the same rev %s", revOf[r.Rev], w, r.Rev)
		}
		revOf[r.Rev] = w
		seqs[r.Seq] = true
	}
	if len(seqs) != writers {
		t.Fatalf("%d writers got %d distinct seqs", writers, len(seqs))
	}
	h := e.hist(appJobs, "jobs", "hot")
	if len(h) != writers+1 {
		t.Fatalf("History has %d entries, want %d", len(h), writers+1)
	}
	for i, en := range h {
		w, ok := revOf[en.Rev]
		if !ok {
			t.Fatalf("History[%d] rev %s was not returned to any writer", i, en.Rev)
		}
		delete(revOf, en.Rev)
		// Each write's base is the one before it: generations are 1..51
		// without a repeat, so no two writes replaced the same head.
		if g := gen(t, en.Rev); g != i+1 {
			t.Fatalf("History[%d] has generation %d: two writes shared a base rev (a blind overwrite)", i, g)
		}
		if i > 0 && en.Seq <= h[i-1].Seq {
			t.Fatalf("History[%d] seq %d after %d", i, en.Seq, h[i-1].Seq)
		}
		if d := decodeObject(t, en.Doc); d["writer"] != json.Number(fmt.Sprint(w)) {
			t.Fatalf("History[%d] = %v, want writer %d's body", i, d, w)
		}
		if i > 0 && results[w].Seq != en.Seq {
			t.Fatalf("writer %d was told seq %d, the ledger has %d", w, results[w].Seq, en.Seq)
		}
	}
	if d := e.doc(appJobs, "jobs", "hot"); d["_rev"] != h[len(h)-1].Rev {
		t.Fatalf("head %v is not the last revision %s", d, h[len(h)-1].Rev)
	}
}

// testEngineQueryPaginationConcurrent pages through a query with limit 7
// while other goroutines insert matching and non-matching docs and
// modify docs (keeping or not their match). Every doc that matches from
// start to end appears exactly once, nothing appears twice, and pages
// stay in id order.
func testEngineQueryPaginationConcurrent(t *testing.T, e *env) {
	e.fixture()
	stable := map[string]bool{}
	bodies := map[string]string{}
	for i := range 250 {
		id := fmt.Sprintf("m%04d", 4*i) // room between ids for inserts
		stable[id] = true
		bodies[id] = `{"status":"pending","n":0}`
	}
	for i := range 60 {
		bodies[fmt.Sprintf("m%04d", 4*i+2)] = `{"status":"done","n":0}`
	}
	e.putAll(appJobs, "jobs", bodies)

	var writes atomic.Int64
	inserted := sync.Map{} // ids of matching docs inserted while paging
	stop := make(chan struct{})
	var wg sync.WaitGroup
	writer := func(name string, step func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := step(i); err != nil {
					t.Errorf("%s writer: %v", name, err)
					return
				}
				writes.Add(1)
			}
		}()
	}
	put := func(id, body string) error {
		_, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", id, []byte(body), appcode.PutOptions{})
		return err
	}
	// New matching docs, between existing ones and past the end.
	writer("insert", func(i int) error {
		id := fmt.Sprintf("m%04d", (4*i*37)%1000+1)
		if i%5 == 0 {
			id = fmt.Sprintf("z%04d", i)
		}
		inserted.Store(id, true)
		return put(id, `{"status":"pending","new":true}`)
	})
	// Non-matching docs change, and so do new ones that never match.
	writer("modify-outside", func(i int) error {
		if i%2 == 0 {
			return put(fmt.Sprintf("m%04d", 4*(i%60)+2), fmt.Sprintf(`{"status":"done","n":%d}`, i))
		}
		return put(fmt.Sprintf("m%04d", (4*i*13)%1000+3), `{"status":"other"}`)
	})
	// Matching docs change their other fields and keep matching.
	writer("modify-inside", func(i int) error {
		return put(fmt.Sprintf("m%04d", 4*((i*17)%250)), fmt.Sprintf(`{"status":"pending","n":%d}`, i+1))
	})

	// Between pages, let the writers commit a few times.
	between := func() {
		target := writes.Load() + 3
		deadline := time.Now().Add(30 * time.Second)
		for writes.Load() < target && time.Now().Before(deadline) && !t.Failed() {
			time.Sleep(200 * time.Microsecond)
		}
	}
	ids := e.pageAll("status", `"pending"`, 7, between)
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if writes.Load() < 3*int64(len(ids)/7) {
		t.Fatalf("only %d concurrent writes while paging", writes.Load())
	}
	seen := map[string]bool{}
	for i, id := range ids {
		if seen[id] {
			t.Fatalf("%s appears twice", id)
		}
		seen[id] = true
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("ids out of order: %s after %s", id, ids[i-1])
		}
		if _, ok := inserted.Load(id); !stable[id] && !ok {
			t.Fatalf("%s never matched", id)
		}
	}
	var missing []string
	for id := range stable {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("%d docs that matched throughout were skipped: %v", len(missing), missing)
	}
}
