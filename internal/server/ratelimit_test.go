package server

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
)

// The tests here count password checks, a number the whole process
// shares, and measure the heap: they do not run in parallel, so that no
// other test of the package runs beside them.

// burst sends n requests at once, each from the address addr(i), and
// counts the answers by status.
func (r *rateEnv) burst(n int, addr func(i int) string, path string, body func(i int) string) map[int]int {
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			code, _, _ := r.post(addr(i), path, body(i))
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return codes
}

func oneAddress(int) string { return "203.0.113.9:4000" }

func manyAddresses(i int) string { return fmt.Sprintf("198.51.%d.%d:1", i/250, i%250+1) }

// wantAtMost fails unless the burst got at most limit answers of status
// counted and the rest rate_limited.
func wantAtMost(t *testing.T, what string, codes map[int]int, counted, limit, n int) {
	t.Helper()
	if codes[counted] > limit || codes[counted]+codes[429] != n || codes[counted] == 0 {
		t.Fatalf("%s: answers %v; want at most %d × %d and the rest 429", what, codes, limit, counted)
	}
}

// TestRateLimitsHoldUnderConcurrency sends 200 attempts at once to every
// rate-limited visitor route. Attempts are counted before they are made,
// so no more get through than the limit allows, and 200 wrong passwords
// at once are checked no more than authFailBurst times.
func TestRateLimitsHoldUnderConcurrency(t *testing.T) {
	cheapPasswords()
	r := newRateEnv(t)
	ctx := context.Background()
	admin, _ := r.srv.e.Authenticate(ctx, adminToken)
	if err := r.srv.e.SetSignup(ctx, admin, "admin/pub", engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	if _, err := r.srv.e.CreateApp(ctx, admin, "admin/club", false); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.e.SetSignup(ctx, admin, "admin/club", engine.SignupInvite); err != nil {
		t.Fatal(err)
	}
	const vis = "/v1/apps/admin/pub/visitors"
	if code, body, _ := r.post("192.0.2.1:1", vis+"/signup", `{"name":"sam","password":"long enough"}`); code != 201 {
		t.Fatalf("sign-up: %d %s", code, body)
	}
	const n = 200
	guess := func(i int) string { return fmt.Sprintf(`{"name":"sam","password":"guess %03d"}`, i) }

	before := auth.PasswordChecks()
	codes := r.burst(n, oneAddress, vis+"/signin", guess)
	wantAtMost(t, "sign-in from one address", codes, 401, authFailBurst, n)
	if checked := auth.PasswordChecks() - before; checked > authFailBurst {
		t.Fatalf("%d wrong sign-ins at once from one address checked %d passwords; the limit is %d", n, checked, authFailBurst)
	} else {
		t.Logf("%d wrong sign-ins at once from one address: %d passwords checked, answers %v", n, checked, codes)
	}

	// From 200 addresses, the name's own bucket holds. It is empty by
	// now: a new name is used.
	if code, body, _ := r.post("192.0.2.2:1", vis+"/signup", `{"name":"kim","password":"long enough"}`); code != 201 {
		t.Fatalf("sign-up: %d %s", code, body)
	}
	before = auth.PasswordChecks()
	codes = r.burst(n, manyAddresses, vis+"/signin", func(i int) string { return fmt.Sprintf(`{"name":"kim","password":"guess %03d"}`, i) })
	wantAtMost(t, "sign-in at one name from many addresses", codes, 401, authFailBurst, n)
	if checked := auth.PasswordChecks() - before; checked > authFailBurst {
		t.Fatalf("%d wrong sign-ins at once at one name checked %d passwords; the limit is %d", n, checked, authFailBurst)
	}

	// Sign-ups probing a taken name, from a fresh address.
	if code, body, _ := r.post("192.0.2.3:1", vis+"/signup", `{"name":"lee","password":"long enough"}`); code != 201 {
		t.Fatalf("sign-up: %d %s", code, body)
	}
	codes = r.burst(n, func(int) string { return "203.0.113.10:1" }, vis+"/signup", func(int) string { return `{"name":"lee","password":"long enough"}` })
	wantAtMost(t, "sign-up as a taken name", codes, 409, authFailBurst, n)

	// Invite codes guessed at once.
	codes = r.burst(n, func(int) string { return "203.0.113.11:1" }, "/v1/apps/admin/club/visitors/signup", func(i int) string {
		return fmt.Sprintf(`{"name":"v%d","password":"long enough","invite":"hnd_guess%d"}`, i, i)
	})
	wantAtMost(t, "invite use", codes, 403, authFailBurst, n)

	// Passkey ceremonies started at once.
	codes = r.burst(n, func(int) string { return "203.0.113.12:1" }, vis+"/passkeys/signin/begin", func(int) string { return "" })
	wantAtMost(t, "passkey sign-in begin", codes, 200, ceremonyBurst, n)

	// Passkey answers that do not verify, sent at once: the ceremonies are
	// begun from many addresses, the answers all come from one.
	ceremonies := make([]string, n)
	for i := range n {
		code, body, _ := r.post(manyAddresses(i), vis+"/passkeys/signin/begin", "")
		if code != 200 {
			t.Fatalf("begin %d: %d %s", i, code, body)
		}
		var c struct{ Ceremony string }
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			t.Fatal(err)
		}
		ceremonies[i] = c.Ceremony
	}
	codes = r.burst(n, func(int) string { return "203.0.113.13:1" }, vis+"/passkeys/signin/finish", func(i int) string {
		return `{"ceremony":"` + ceremonies[i] + `","credential":{"id":"x"}}`
	})
	wantAtMost(t, "passkey sign-in finish", codes, 401, authFailBurst, n)

	// What was no guess gives its token back: malformed sign-ins from a
	// fresh address never run out.
	codes = r.burst(n, func(int) string { return "203.0.113.14:1" }, vis+"/signin", func(int) string { return `{"name":1}` })
	if codes[400] != n {
		t.Fatalf("malformed sign-ins: %v; want %d × 400", codes, n)
	}
}

// TestFailedSignInsHoldNoNames: the limiter keeps a fixed-size key per
// name, never the name itself, so failures with huge names leave the
// live heap where it was.
func TestFailedSignInsHoldNoNames(t *testing.T) {
	cheapPasswords()
	r := newRateEnv(t)
	admin, _ := r.srv.e.Authenticate(context.Background(), adminToken)
	if err := r.srv.e.SetSignup(context.Background(), admin, "admin/pub", engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	const failures, addrs, nameBytes = 2000, 200, 60 << 10
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// One failure first, so the tables and pools that any sign-in makes
	// are there before the measure starts.
	r.post("192.0.2.1:1", "/v1/apps/admin/pub/visitors/signin", `{"name":"x","password":"long enough"}`)
	start := heap()
	for i := range failures {
		name := strings.Repeat(string(rune('a'+i%26)), nameBytes-8) + fmt.Sprintf("%08d", i)
		body := `{"name":"` + name + `","password":"long enough"}`
		if code, resp, _ := r.post(manyAddresses(i%addrs), "/v1/apps/admin/pub/visitors/signin", body); code != 401 {
			t.Fatalf("failure %d: %d %.200s", i, code, resp)
		}
	}
	grew := int64(heap()) - int64(start)
	t.Logf("live heap: %d KiB before, %+d KiB after %d failures with %d KiB names", start>>10, grew>>10, failures, nameBytes>>10)
	if grew > 8<<20 {
		t.Fatalf("the live heap grew by %d MiB after %d failed sign-ins with %d KiB names", grew>>20, failures, nameBytes>>10)
	}
	r.srv.visitorFails.mu.Lock()
	defer r.srv.visitorFails.mu.Unlock()
	if len(r.srv.visitorFails.buckets) < failures {
		t.Fatalf("the limiter holds %d buckets; want one per name and address", len(r.srv.visitorFails.buckets))
	}
	for k := range r.srv.visitorFails.buckets {
		if len(k) > 64 {
			t.Fatalf("a limiter key is %d bytes: %.80q", len(k), k)
		}
	}
}

// TestFullLimiterKeepsTheBucketsThatRememberMost: when the table fills,
// a drained bucket outlives every bucket with more tokens left, so a
// flood of new keys cannot wipe the count of a name under attack.
func TestFullLimiterKeepsTheBucketsThatRememberMost(t *testing.T) {
	t.Parallel()
	var l failLimiter
	now := time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)
	for range authFailBurst {
		l.fail("name victim", now)
	}
	if wait := l.blocked("name victim", now); wait == 0 {
		t.Fatal("the victim's bucket is not drained")
	}
	// Junk keys, each with one failure: they remember less.
	for i := range 2 * authFailMaxClients {
		l.fail(fmt.Sprintf("name junk-%d", i), now)
	}
	if n := len(l.buckets); n > authFailMaxClients {
		t.Fatalf("the table holds %d buckets; the bound is %d", n, authFailMaxClients)
	}
	if wait := l.blocked("name victim", now); wait == 0 {
		t.Fatal("a flood of new keys reset the drained bucket of the name under attack")
	}
}

// TestFailuresAfterTheCheckStayCounted: an attempt that fails for any
// reason but a malformed request costs a guess, whatever the code: an
// answer that differs by whether the password was right must not be
// free.
func TestFailuresAfterTheCheckStayCounted(t *testing.T) {
	t.Parallel()
	r := newRateEnv(t)
	l := visitorLimit{addr: "addr x", name: "name y"}
	for _, err := range []error{errs.New(errs.Unavailable, "busy"), errs.New(errs.Internal, "store"), errs.New(errs.Unauthorized, "wrong")} {
		now := r.clk.Now()
		if wait, _ := r.srv.visitorFails.take(now, l.keys()...); wait != 0 {
			t.Fatalf("take: wait %v", wait)
		}
		r.srv.visitorDone(l, err)
	}
	if got := r.srv.visitorFails.buckets["addr x"].tokens; got != authFailBurst-3 {
		t.Fatalf("after three failures the address has %v tokens; want %d", got, authFailBurst-3)
	}
	r.srv.visitorFails.take(r.clk.Now(), l.keys()...)
	r.srv.visitorDone(l, errs.New(errs.Invalid, "malformed"))
	if got := r.srv.visitorFails.buckets["addr x"].tokens; got != authFailBurst-3 {
		t.Fatalf("a malformed attempt kept its token: %v left", got)
	}
}
