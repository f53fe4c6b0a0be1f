package engine_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store/sqlite"
)

// The benchmarks run the engine on a real, durable SQLite store in a temp
// directory: every put is fsynced before it returns. docs/benchmarks.md
// records the method and the numbers.

type benchEnv struct {
	e     *engine.Engine
	st    *sqlite.Store
	actor engine.Actor
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	e := engine.New(st, engine.Options{})
	tok, err := e.Bootstrap(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	admin, _ := e.Authenticate(ctx, tok)
	if _, err := e.AddUser(ctx, admin, "bench"); err != nil {
		b.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, "bench/app", false); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{e: e, st: st, actor: engine.Actor{User: "bench"}}
}

var benchDoc = []byte(`{"type":"job","status":"pending","attempts":0,"input":"https://example.com/images/slide-1.jpg","createdAt":"2026-07-07T00:00:00Z"}`)

// reportLatency adds p50 and p99 of the observed durations to the result.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkPut(b *testing.B) {
	for _, writers := range []int{1, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			env := newBenchEnv(b)
			ctx := context.Background()
			var next atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			work := func(n int) {
				mine := make([]time.Duration, 0, n)
				for range n {
					id := fmt.Sprintf("doc-%09d", next.Add(1))
					t0 := time.Now()
					if _, err := env.e.Put(ctx, env.actor, "bench/app", "jobs", id, benchDoc, appcode.PutOptions{}); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range writers {
				n := b.N / writers
				if w < b.N%writers {
					n++
				}
				wg.Go(func() { work(n) })
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
			reportLatency(b, lat)
		})
	}
}

func BenchmarkGet(b *testing.B) {
	env := newBenchEnv(b)
	ctx := context.Background()
	const n = 1000
	for i := range n {
		if _, err := env.e.Put(ctx, env.actor, "bench/app", "jobs", fmt.Sprintf("doc-%d", i), benchDoc, appcode.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := env.e.Get(ctx, env.actor, "bench/app", "jobs", fmt.Sprintf("doc-%d", i%n)); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkQuery compares one field query over databases of different
// sizes: with the expression index the cost must stay flat. Each database
// holds 10 matching documents; the rest hold another status. The rows are
// generated inside SQLite (not through the engine) so that a million of
// them take seconds to set up.
func BenchmarkQuery(b *testing.B) {
	for _, size := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("docs=%d", size), func(b *testing.B) {
			if size > 1000 && testing.Short() {
				b.Skip("skipping the million-document database in -short mode")
			}
			env := newBenchEnv(b)
			ctx := context.Background()
			// One real put creates the database and learns the app id.
			if _, err := env.e.Put(ctx, env.actor, "bench/app", "jobs", "seed", benchDoc, appcode.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			fill(b, env.st.Path(), size)
			if _, err := env.e.Query(ctx, env.actor, "bench/app", "jobs", "status", []byte(`"needle"`), 10, ""); err != nil {
				b.Fatal(err) // creates the index outside the timing
			}
			b.ResetTimer()
			for b.Loop() {
				p, err := env.e.Query(ctx, env.actor, "bench/app", "jobs", "status", []byte(`"needle"`), 10, "")
				if err != nil || len(p.Docs) != 10 {
					b.Fatalf("query: %v, %d docs", err, len(p.Docs))
				}
			}
		})
	}
}

func fill(b *testing.B, path string, size int) {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	stride := size / 10
	_, err = db.Exec(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)
		INSERT INTO docs (app_id, db, id, rev, deleted, body, seq, time)
		SELECT (SELECT app_id FROM docs WHERE id = 'seed'), 'jobs', printf('doc-%09d', x), '1-bench', 0,
			json_object('type', 'job', 'status', CASE WHEN x % ? = 0 THEN 'needle' ELSE 'done' END, 'n', x), 0, 0
		FROM c`, size, stride)
	if err != nil {
		b.Fatal(err)
	}
}
