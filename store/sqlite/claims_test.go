package sqlite

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"
)

// TestLeasesKeepBusyDocuments: the busy count of each document follows the
// leases through any order of holds, acks and drops: it is always the
// number of held events of the document that are not being acked, which
// is what a claim rebuilt from every lease before.
func TestLeasesKeepBusyDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var l leases
	docs := []docKey{{"jobs", "a"}, {"jobs", "b"}, {"jobs", "c"}, {"other", "a"}}
	for step := range 20000 {
		app := int64(1 + r.IntN(2))
		seq := int64(1 + r.IntN(12))
		switch r.IntN(4) {
		case 0, 1:
			l.hold(app, seq, lease{until: time.Unix(int64(step), 0), doc: docs[r.IntN(len(docs))]})
		case 2:
			l.ack(app, seq)
		case 3:
			l.drop(app, seq)
		}
		for _, app := range []int64{1, 2} {
			want := map[docKey]int{}
			for seq, le := range l.held(app) {
				if !l.acking[app][seq] {
					want[le.doc]++
				}
			}
			if got := l.busy[app]; !maps.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("step %d, app %d: busy %v, want %v", step, app, got, want)
			}
			for seq := range l.acking[app] {
				if _, ok := l.held(app)[seq]; !ok {
					t.Fatalf("step %d, app %d: seq %d acked but not held", step, app, seq)
				}
			}
		}
	}
	// A claim passes over busy documents and takes each free one once.
	l = leases{}
	l.hold(1, 1, lease{doc: docs[0]})
	l.hold(1, 2, lease{doc: docs[1]})
	l.ack(1, 2)
	free := l.docGate(1, false)
	got := fmt.Sprint(free(docs[0]), free(docs[1]), free(docs[1]), free(docs[2]))
	if got != "false true false true" {
		t.Fatalf("gate over a held, an acked and a free document: %s", got)
	}
}
