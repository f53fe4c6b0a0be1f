package postgres

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// BenchmarkCommit measures durable commits from 32 goroutines, into one
// app (they share the app's batches: one transaction, one seq update and
// one WAL flush for every write waiting) and into 32 apps (mostly one
// write per batch; the apps' transactions share WAL flushes through
// PostgreSQL's own group commit).
func BenchmarkCommit(b *testing.B) {
	for _, apps := range []int{1, 32} {
		b.Run(fmt.Sprintf("apps=%d", apps), func(b *testing.B) {
			st := openAt(b, freshDB(b))
			defer st.Close()
			ids := make([]int64, apps)
			for i := range ids {
				ids[i] = newApp(b, st, fmt.Sprint("a", i))
			}
			var n atomic.Int64
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0))) // 32 goroutines in all
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					w := &store.Write{AppID: ids[int(i)%apps], DB: "jobs", ID: fmt.Sprint("d", i), Rev: "1-a",
						Body: []byte(`{"status":"pending","n":1}`), Path: "http", Time: t0, Event: &store.EventSpec{NextAt: t0}}
					if _, err := st.Commit(context.Background(), w); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// BenchmarkCommitOneAppNodes measures one app's durable commits from 32
// goroutines spread over 1 and 2 nodes (stores) on one database: what
// adding a node does for one app's rate. Each batch holds the app's row
// from its seq update to its WAL flush, so the nodes' batches of one app
// take turns.
func BenchmarkCommitOneAppNodes(b *testing.B) {
	for _, nodes := range []int{1, 2} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			dbURL := freshDB(b)
			sts := make([]*Store, nodes)
			for i := range sts {
				sts[i] = openAt(b, dbURL)
				defer sts[i].Close()
			}
			app := newApp(b, sts[0], "one")
			var n atomic.Int64
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				st := sts[int(n.Add(1))%nodes] // each goroutine writes through one node
				for pb.Next() {
					i := n.Add(1)
					w := &store.Write{AppID: app, DB: "jobs", ID: fmt.Sprint("d", i), Rev: "1-a",
						Body: []byte(`{"status":"pending","n":1}`), Path: "http", Time: t0, Event: &store.EventSpec{NextAt: t0}}
					if _, err := st.Commit(context.Background(), w); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// BenchmarkWatchAcrossNodes measures how long after A's Commit returns
// B's Watch hears of it (NOTIFY), one commit at a time.
func BenchmarkWatchAcrossNodes(b *testing.B) {
	dbURL := freshDB(b)
	a, nb := openAt(b, dbURL), openAt(b, dbURL)
	defer a.Close()
	defer nb.Close()
	app := newApp(b, a, "jobs")
	heard := make(chan int64, 1024)
	nb.Watch(func(_, seq int64) { heard <- seq })
	var lat []time.Duration
	var mu sync.Mutex
	b.ResetTimer()
	for i := range b.N {
		w := &store.Write{AppID: app, DB: "jobs", ID: fmt.Sprint("d", i), Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: t0}
		seq, err := a.Commit(context.Background(), w)
		if err != nil {
			b.Fatal(err)
		}
		done := time.Now()
		for s := range heard {
			if s >= seq {
				break
			}
		}
		mu.Lock()
		lat = append(lat, time.Since(done))
		mu.Unlock()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
}
