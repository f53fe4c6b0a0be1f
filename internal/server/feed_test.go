package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// Tests of the live feed over HTTP (GET /v1/apps/{owner}/{app}/feed):
// server-sent events read off a real connection.

var feedOwner = engine.Actor{User: "alice"}

// feedServer is a server on a real store with users alice (owns every
// app), bob and dave, and the access runtime.
type feedServer struct {
	t      testing.TB
	ctx    context.Context
	e      *engine.Engine
	srv    *Server
	ts     *httptest.Server
	tokens map[string]string
}

func newFeedServer(t testing.TB, o Options) *feedServer {
	t.Helper()
	return newFeedServerWatched(t, o, nil)
}

// watchedStore calls its hook on every commit before any other watcher
// (the engine's feed) hears of it.
type watchedStore struct {
	*sqlite.Store
	hook func(app, seq int64)
}

func (s watchedStore) Watch(fn func(app, seq int64)) {
	s.Store.Watch(func(app, seq int64) {
		s.hook(app, seq)
		fn(app, seq)
	})
}

// newFeedServerWatched is newFeedServer with a commit hook (nil: none).
func newFeedServerWatched(t testing.TB, o Options, hook func(app, seq int64)) *feedServer {
	t.Helper()
	sq, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	var st store.Store = sq
	if hook != nil {
		st = watchedStore{sq, hook}
	}
	e := engine.New(st, engine.Options{Code: jsapp.New(jsapp.Options{})})
	ctx := context.Background()
	if _, err := e.Bootstrap(ctx, adminToken); err != nil {
		t.Fatal(err)
	}
	admin := engine.Actor{User: engine.AdminUser, Admin: true}
	fs := &feedServer{t: t, ctx: ctx, e: e, tokens: map[string]string{}}
	for _, u := range []string{"alice", "bob", "dave"} {
		if fs.tokens[u], err = e.AddUser(ctx, admin, u); err != nil {
			t.Fatal(err)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	fs.srv = New(e, o)
	fs.ts = httptest.NewServer(fs.srv)
	t.Cleanup(fs.ts.Close)
	return fs
}

func (fs *feedServer) app(ref string, public bool) {
	fs.t.Helper()
	if _, err := fs.e.CreateApp(fs.ctx, feedOwner, ref, public); err != nil {
		fs.t.Fatal(err)
	}
}

func (fs *feedServer) put(app, db, id, body string) int64 {
	fs.t.Helper()
	r, err := fs.e.Put(fs.ctx, feedOwner, app, db, id, []byte(body), appcode.PutOptions{})
	if err != nil {
		fs.t.Fatalf("put %s: %v", id, err)
	}
	return r.Seq
}

// gauge reads handoff_feed_streams off /metrics.
func (fs *feedServer) gauge() int {
	fs.t.Helper()
	res, err := http.Get(fs.ts.URL + "/metrics")
	if err != nil {
		fs.t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "handoff_feed_streams "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				fs.t.Fatal(err)
			}
			return int(n)
		}
	}
	fs.t.Fatal("no handoff_feed_streams in /metrics")
	return 0
}

// waitGauge waits until the gauge shows want open streams.
func (fs *feedServer) waitGauge(want int) {
	fs.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := fs.gauge()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			fs.t.Fatalf("handoff_feed_streams = %d, want %d", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sseEvent is one event of a stream, or a comment (name "comment").
type sseEvent struct {
	id   string
	name string
	data string
	at   time.Time // when it was read
}

// sseStream is an open feed connection read on its own goroutine.
type sseStream struct {
	t      testing.TB
	res    *http.Response
	cancel context.CancelFunc
	events chan sseEvent
}

// open requests the feed as user ("" anonymous) with the query q and the
// headers hdr (name, value pairs). A non-200 answer is returned with a
// nil stream.
func (fs *feedServer) open(app, user, q string, hdr ...string) (*sseStream, *http.Response) {
	fs.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", fs.ts.URL+"/v1/apps/"+app+"/feed?"+q, nil)
	if err != nil {
		fs.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+fs.tokens[user])
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := fs.ts.Client().Do(req)
	if err != nil {
		cancel()
		fs.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		defer cancel()
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(strings.NewReader(string(b)))
		return nil, res
	}
	s := &sseStream{t: fs.t, res: res, cancel: cancel, events: make(chan sseEvent, 1024)}
	fs.t.Cleanup(s.close)
	go s.read()
	return s, res
}

func (s *sseStream) read() {
	defer close(s.events)
	br := bufio.NewReader(s.res.Body)
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" {
				ev.at = time.Now()
				s.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			s.events <- sseEvent{name: "comment", data: strings.TrimSpace(line[1:]), at: time.Now()}
		default:
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "id":
				ev.id = v
			case "event":
				ev.name = v
			case "data":
				ev.data += v
			}
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.res.Body.Close()
}

// next returns the next event that is not a comment.
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	for {
		ev := s.nextAny()
		if ev.name != "comment" {
			return ev
		}
	}
}

// nextAny returns the next event or comment; it fails after 30 s or at
// the end of the stream.
func (s *sseStream) nextAny() sseEvent {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		s.t.Fatal("no event within 30s")
	}
	return sseEvent{}
}

// ended waits for the stream to end, skipping comments; it fails on an
// event or after 10 s.
func (s *sseStream) ended() {
	s.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return
			}
			if ev.name != "comment" {
				s.t.Fatalf("event %+v where the stream should end", ev)
			}
		case <-deadline:
			s.t.Fatal("the stream did not end within 10s")
		}
	}
}

// change decodes a change event.
func change(t testing.TB, ev sseEvent) engine.Entry {
	t.Helper()
	if ev.name != "change" {
		t.Fatalf("event %q (%s), want change", ev.name, ev.data)
	}
	var e engine.Entry
	if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
		t.Fatal(err)
	}
	if ev.id != strconv.FormatInt(e.Seq, 10) {
		t.Fatalf("event id %q for seq %d", ev.id, e.Seq)
	}
	return e
}

// TestFeedResumesAfterADroppedConnection: whether the client goes away or
// the server's side of the connection breaks, reconnecting with the last
// event's id as Last-Event-ID misses nothing and repeats nothing.
func TestFeedResumesAfterADroppedConnection(t *testing.T) {
	t.Parallel()
	fs := newFeedServer(t, Options{})
	const app = "alice/jobs"
	fs.app(app, false)
	for i := range 10 {
		fs.put(app, "jobs", fmt.Sprintf("j%d", i), `{"status":"pending"}`)
	}
	s, res := fs.open(app, "alice", "")
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if ev := s.next(); ev.name != "ready" || ev.data != `{"since":0}` {
		t.Fatalf("first event %+v, want ready", ev)
	}
	var seen []int64
	for range 5 {
		seen = append(seen, change(t, s.next()).Seq)
	}
	// The client drops the connection; writes go on meanwhile.
	s.close()
	for i := range 10 {
		fs.put(app, "jobs", fmt.Sprintf("k%d", i), `{"status":"pending"}`)
	}
	last := strconv.FormatInt(seen[len(seen)-1], 10)
	s, _ = fs.open(app, "alice", "since=1", "Last-Event-ID", last) // the header wins over since
	if ev := s.next(); ev.name != "ready" || ev.data != `{"since":`+last+`}` {
		t.Fatalf("ready after a reconnect: %+v", ev)
	}
	for range 15 {
		seen = append(seen, change(t, s.next()).Seq)
	}
	// The server's side breaks this time, in the middle of live traffic.
	go func() {
		for i := range 20 {
			fs.put(app, "jobs", fmt.Sprintf("l%d", i), `{}`)
			if i == 5 {
				fs.ts.CloseClientConnections()
			}
		}
	}()
	for ev := range s.events {
		if ev.name == "change" {
			seen = append(seen, change(t, ev).Seq)
		}
	}
	last = strconv.FormatInt(seen[len(seen)-1], 10)
	s, _ = fs.open(app, "alice", "", "Last-Event-ID", last)
	for len(seen) < 40 {
		if ev := s.next(); ev.name == "change" {
			seen = append(seen, change(t, ev).Seq)
		}
	}
	for i, seq := range seen {
		if seq != int64(i+1) {
			t.Fatalf("seqs seen: %v; want 1..40, each once", seen)
		}
	}

	// Bad positions are refused before any stream starts.
	for _, c := range []struct {
		q, hdr string
		status int
	}{
		{"since=-1", "", 400},
		{"since=x", "", 400},
		{"", "abc", 400},
		{"since=41", "", 400}, // past the end
	} {
		var hdr []string
		if c.hdr != "" {
			hdr = []string{"Last-Event-ID", c.hdr}
		}
		if s, res := fs.open(app, "alice", c.q, hdr...); s != nil || res.StatusCode != c.status {
			t.Fatalf("feed?%s Last-Event-ID %q: status %d, want %d", c.q, c.hdr, res.StatusCode, c.status)
		}
	}
}

// TestFeedHeartbeatsAndCleanUp: an idle stream sends heartbeat comments
// at the configured interval, and a stream whose client leaves is closed
// on the server at once (the gauge and the goroutines come back down).
func TestFeedHeartbeatsAndCleanUp(t *testing.T) {
	fs := newFeedServer(t, Options{Heartbeat: 40 * time.Millisecond})
	const app = "alice/quiet"
	fs.app(app, false)
	seq := fs.put(app, "d", "x", `{}`)
	fs.waitGauge(0)
	s, res := fs.open(app, "alice", "since=1")
	if h := res.Header.Get("X-Handoff-Heartbeat"); h != "40" {
		t.Fatalf("X-Handoff-Heartbeat %q, want 40", h)
	}
	s.next() // ready
	var beats []time.Time
	for len(beats) < 3 {
		ev := s.nextAny()
		if ev.name != "comment" || ev.data != fmt.Sprintf("heartbeat %d", seq) {
			t.Fatalf("idle stream sent %+v, want a heartbeat", ev)
		}
		beats = append(beats, ev.at)
	}
	if d := beats[2].Sub(beats[0]); d < 40*time.Millisecond || d > 5*time.Second {
		t.Fatalf("two heartbeat intervals took %v, want about 80ms", d)
	}
	// A live query stream beats too.
	q, _ := fs.open(app, "alice", `db=d&field=status&key="x"`)
	if ev := q.next(); ev.name != "snapshot" {
		t.Fatalf("live query first event: %+v", ev)
	}
	if ev := q.nextAny(); ev.name != "comment" || !strings.HasPrefix(ev.data, "heartbeat ") {
		t.Fatalf("idle live query sent %+v", ev)
	}

	// Clean-up: open streams count in the gauge, and leave it when their
	// client goes away.
	base := runtime.NumGoroutine()
	var streams []*sseStream
	for range 20 {
		st, _ := fs.open(app, "alice", "since=1")
		st.next()
		streams = append(streams, st)
	}
	fs.waitGauge(22)
	if g := runtime.NumGoroutine(); g < base+20 {
		t.Fatalf("%d goroutines with 20 more streams, from %d", g, base)
	}
	for _, st := range streams {
		st.close()
	}
	s.close()
	q.close()
	fs.waitGauge(0)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base+5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the streams closed, %d before they opened", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The access function of these tests: the owner's documents carry their
// channels and grants.
const feedAccess = `
export function docs(doc, oldDoc, user, ctx) {
  ctx.requireOwner();
  return { channels: doc.channels, grant: doc.grant };
}
`

// TestFeedOverHTTPShowsOnlyWhatTheReaderMayRead: the stream carries only
// the reader's documents; a reader without access is refused up front;
// one who loses all access mid-stream gets an error event and the end of
// the stream.
func TestFeedOverHTTPShowsOnlyWhatTheReaderMayRead(t *testing.T) {
	t.Parallel()
	fs := newFeedServer(t, Options{Heartbeat: 50 * time.Millisecond})
	const app = "alice/private"
	fs.app(app, false)
	if _, err := fs.e.Deploy(fs.ctx, feedOwner, app, feedAccess, ""); err != nil {
		t.Fatal(err)
	}
	fs.put(app, "docs", "g-bob", `{"grant":{"users":{"bob":["u:bob"]}}}`)

	if s, res := fs.open(app, "dave", ""); s != nil || res.StatusCode != 403 {
		t.Fatalf("a stranger's feed: %d, want 403", res.StatusCode)
	}
	if s, res := fs.open(app, "", ""); s != nil || res.StatusCode != 401 {
		t.Fatalf("an anonymous feed of a private app: %d, want 401", res.StatusCode)
	}
	if s, res := fs.open(app, "dave", `db=docs&field=kind&key="a"`); s != nil || res.StatusCode != 403 {
		t.Fatalf("a stranger's live query: %d, want 403", res.StatusCode)
	}
	b, _ := fs.open(app, "bob", "")
	b.next() // ready
	bq, _ := fs.open(app, "bob", `db=docs&field=kind&key="job"`)
	if ev := bq.next(); ev.name != "snapshot" || !strings.HasPrefix(ev.data, `{"docs":[]`) {
		t.Fatalf("bob's snapshot: %+v", ev)
	}
	fs.put(app, "docs", "a1", `{"kind":"job","channels":["u:alice"],"secret":"s1"}`)
	fs.put(app, "docs", "b1", `{"kind":"job","channels":["u:bob"]}`)
	fs.put(app, "docs", "a2", `{"kind":"job","channels":["u:alice"],"secret":"s2"}`)
	fs.put(app, "docs", "b2", `{"kind":"note","channels":["u:bob"]}`)
	for _, want := range []string{"b1", "b2"} {
		if e := change(t, b.next()); e.ID != want {
			t.Fatalf("bob's feed: %s, want %s", e.ID, want)
		}
	}
	ev := bq.next()
	var qc engine.QueryChange
	json.Unmarshal([]byte(ev.data), &qc)
	if ev.name != "change" || qc.ID != "b1" || !qc.Match {
		t.Fatalf("bob's live query: %+v", ev)
	}
	// Bob loses his only grant: both streams end with an error event.
	if _, err := fs.e.Delete(fs.ctx, feedOwner, app, "docs", "g-bob", ""); err != nil {
		t.Fatal(err)
	}
	fs.put(app, "docs", "b3", `{"kind":"job","channels":["u:bob"]}`)
	for name, s := range map[string]*sseStream{"feed": b, "live query": bq} {
		ev := s.next()
		if ev.name != "error" || !strings.Contains(ev.data, `"code":"forbidden"`) {
			t.Fatalf("%s after losing access: %+v, want an error event", name, ev)
		}
		s.ended()
	}
}

// TestFeedLiveQueryOverHTTP: snapshot, then enter, stay and leave.
func TestFeedLiveQueryOverHTTP(t *testing.T) {
	t.Parallel()
	fs := newFeedServer(t, Options{})
	const app = "alice/jobs"
	fs.app(app, false)
	fs.put(app, "jobs", "j1", `{"status":"running"}`)
	fs.put(app, "jobs", "j2", `{"status":"pending"}`)
	if s, res := fs.open(app, "alice", `db=jobs&field=status&key=running`); s != nil || res.StatusCode != 400 {
		t.Fatalf("an unquoted key: %d, want 400", res.StatusCode)
	}
	s, _ := fs.open(app, "alice", `db=jobs&field=status&key="running"`)
	ev := s.next()
	var snap struct {
		Docs []map[string]any `json:"docs"`
		Seq  int64            `json:"seq"`
	}
	json.Unmarshal([]byte(ev.data), &snap)
	if ev.name != "snapshot" || ev.id != "2" || snap.Seq != 2 || len(snap.Docs) != 1 || snap.Docs[0]["_id"] != "j1" {
		t.Fatalf("snapshot: %+v", ev)
	}
	fs.put(app, "jobs", "j2", `{"status":"running"}`)
	fs.put(app, "jobs", "j1", `{"status":"done"}`)
	fs.put(app, "jobs", "j3", `{"status":"pending"}`)
	if _, err := fs.e.Delete(fs.ctx, feedOwner, app, "jobs", "j2", ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		id    string
		match bool
	}{{"j2", true}, {"j1", false}, {"j2", false}} {
		ev := s.next()
		var qc engine.QueryChange
		if err := json.Unmarshal([]byte(ev.data), &qc); err != nil || ev.name != "change" || qc.ID != want.id || qc.Match != want.match || ev.id != strconv.FormatInt(qc.Seq, 10) {
			t.Fatalf("change %+v, want %+v", ev, want)
		}
	}
}

// TestFeedBenchmark measures the live feed; it runs only with
// HANDOFF_FEED_BENCH=1 (see docs/benchmarks.md):
//
//	HANDOFF_FEED_BENCH=1 go test ./server -run TestFeedBenchmark -v -count=1
//
// 1. Memory of 1,000 idle subscribers, each a real HTTP connection.
// 2. Latency from commit to a subscriber reading the event, with 1 and
// with 100 subscribers.
func TestFeedBenchmark(t *testing.T) {
	if os.Getenv("HANDOFF_FEED_BENCH") == "" {
		t.Skip("set HANDOFF_FEED_BENCH=1 to run the feed benchmark")
	}
	subs := envInt("HANDOFF_FEED_BENCH_IDLE", 1000)
	commits := envInt("HANDOFF_FEED_BENCH_COMMITS", 2000)
	interval := time.Duration(envInt("HANDOFF_FEED_BENCH_INTERVAL_US", 5000)) * time.Microsecond
	t.Logf("GOMAXPROCS %d, NumCPU %d, %s", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())
	t.Run("idle", func(t *testing.T) { benchIdle(t, subs) })
	for _, n := range []int{1, 100} {
		t.Run(fmt.Sprintf("latency-%d", n), func(t *testing.T) { benchLatency(t, n, commits, interval) })
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return "loadavg " + strings.Join(strings.Fields(string(b))[:3], " ")
}

// memNow is the live heap and the goroutine stacks after full GCs.
func memNow() (heap, stack uint64, goroutines int) {
	// Several cycles: each GC may halve an idle goroutine's oversized
	// stack, as it would over time in a long-running server.
	for range 5 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse, runtime.NumGoroutine()
}

// benchIdle opens n subscribers through real TCP connections. The client
// side is a bare socket per subscriber (a request written by hand, no
// goroutine, no buffer), so the growth measured is the server's, plus
// about 0.3 KB per socket object of the client side.
func benchIdle(t *testing.T, n int) {
	fs := newFeedServer(t, Options{})
	const app = "alice/idle"
	fs.app(app, false)
	fs.put(app, "d", "warm", `{}`)
	addr := strings.TrimPrefix(fs.ts.URL, "http://")
	req := "GET /v1/apps/" + app + "/feed?since=1 HTTP/1.1\r\nHost: " + addr +
		"\r\nAuthorization: Bearer " + fs.tokens["alice"] + "\r\nAccept: text/event-stream\r\n\r\n"
	// Warm up: one subscriber opened and closed, so one-time allocations
	// (the app's feed, pools) are not counted.
	warm, _ := fs.open(app, "alice", "since=1")
	warm.next()
	warm.close()
	fs.waitGauge(0)

	heap0, stack0, g0 := memNow()
	conns := make([]net.Conn, 0, n)
	buf := make([]byte, 4096)
	t0 := time.Now()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		// Read the answer's head and the ready event.
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		got := 0
		for !strings.Contains(string(buf[:got]), "event: ready") {
			m, err := c.Read(buf[got:])
			if err != nil {
				t.Fatalf("subscriber %d: %v after %q", len(conns), err, buf[:got])
			}
			got += m
		}
		c.SetReadDeadline(time.Time{})
		conns = append(conns, c)
	}
	opened := time.Since(t0)
	fs.waitGauge(n)
	heap1, stack1, g1 := memNow()
	rss := rssKB()
	perHeap := float64(int64(heap1)-int64(heap0)) / float64(n)
	perStack := float64(int64(stack1)-int64(stack0)) / float64(n)
	t.Logf("IDLE %d subscribers opened in %v: heap +%.1f MB (%.0f B/subscriber), stacks +%.1f MB (%.0f B/subscriber), total %.1f KB/subscriber; goroutines %d -> %d (%.2f/subscriber); process RSS now %d MB",
		n, opened.Round(time.Millisecond), float64(int64(heap1)-int64(heap0))/1e6, perHeap, float64(int64(stack1)-int64(stack0))/1e6, perStack,
		(perHeap+perStack)/1024, g0, g1, float64(g1-g0)/float64(n), rss/1024)

	// Every idle subscriber is live: one commit reaches all of them.
	type arrival struct {
		d   time.Duration
		err error
	}
	arrivals := make(chan arrival, n)
	var start time.Time
	var startMu sync.Mutex
	startMu.Lock()
	for _, c := range conns {
		go func() {
			b := make([]byte, 4096)
			got := 0
			for {
				m, err := c.Read(b[got:])
				if err != nil {
					arrivals <- arrival{err: err}
					return
				}
				got += m
				if strings.Contains(string(b[:got]), "\nid: 2\n") || strings.HasPrefix(string(b[:got]), "id: 2\n") {
					startMu.Lock()
					d := time.Since(start)
					startMu.Unlock()
					arrivals <- arrival{d: d}
					return
				}
				if got == len(b) {
					got = 0
				}
			}
		}()
	}
	start = time.Now()
	startMu.Unlock()
	fs.put(app, "d", "fanout", `{"to":"everyone"}`)
	ds := make([]time.Duration, 0, n)
	for range n {
		select {
		case a := <-arrivals:
			if a.err != nil {
				t.Fatal(a.err)
			}
			ds = append(ds, a.d)
		case <-time.After(60 * time.Second):
			t.Fatalf("only %d of %d subscribers got the commit", len(ds), n)
		}
	}
	slices.Sort(ds)
	t.Logf("FANOUT one put (call to read) to %d subscribers: first %v, p50 %v, p99 %v, last %v",
		n, ds[0].Round(time.Microsecond), pct(ds, 50), pct(ds, 99), ds[n-1].Round(time.Microsecond))
	for _, c := range conns {
		c.Close()
	}
	fs.waitGauge(0)
}

func rssKB() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

func pct(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i].Round(time.Microsecond)
}

// benchLatency commits at a steady rate while n subscribers read the
// stream. The commit time is taken in the store's commit callback
// (Store.Watch, right after the durable commit, where the engine's feed
// is woken); the receive time when a subscriber has read the event's
// blank line off its connection.
func benchLatency(t *testing.T, n, commits int, interval time.Duration) {
	committed := make([]atomic.Int64, commits+10)
	fs := newFeedServerWatched(t, Options{}, func(_, seq int64) {
		if seq < int64(len(committed)) {
			committed[seq].Store(time.Now().UnixNano())
		}
	})
	const app = "alice/latency"
	fs.app(app, false)
	base := fs.put(app, "d", "warm", `{}`)
	streams := make([]*sseStream, n)
	for i := range streams {
		streams[i], _ = fs.open(app, "alice", "since="+strconv.FormatInt(base, 10))
		streams[i].next() // ready
	}
	all := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			ds := make([]time.Duration, 0, commits)
			for len(ds) < commits {
				ev := s.next()
				seq, _ := strconv.ParseInt(ev.id, 10, 64)
				ds = append(ds, time.Duration(ev.at.UnixNano()-committed[seq].Load()))
			}
			all[i] = ds
		})
	}
	put := make([]time.Duration, 0, commits)
	body := []byte(`{"status":"running","worker":"w-1","attempt":1}`)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	t0 := time.Now()
	for i := range commits {
		<-tick.C
		p0 := time.Now()
		if _, err := fs.e.Put(fs.ctx, feedOwner, app, "jobs", fmt.Sprintf("job-%d", i%100), body, appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		put = append(put, time.Since(p0))
	}
	elapsed := time.Since(t0)
	wg.Wait()
	var flat []time.Duration
	last := make([]time.Duration, commits) // per commit, the slowest subscriber
	for _, ds := range all {
		flat = append(flat, ds...)
		for i, d := range ds {
			last[i] = max(last[i], d)
		}
	}
	slices.Sort(flat)
	slices.Sort(last)
	slices.Sort(put)
	t.Logf("LATENCY %d subscribers, %d commits at %.0f/s (%s): commit->received p50 %v, p99 %v, max %v; slowest subscriber per commit p50 %v, p99 %v; put call p50 %v, p99 %v",
		n, commits, float64(commits)/elapsed.Seconds(), loadAvg(), pct(flat, 50), pct(flat, 99), flat[len(flat)-1].Round(time.Microsecond),
		pct(last, 50), pct(last, 99), pct(put, 50), pct(put, 99))
}
