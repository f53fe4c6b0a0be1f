package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
)

// The body deadlines of these tests: tens of milliseconds, so that a
// trickling client crosses the short one in real time.
const (
	testBodyTimeout     = 50 * time.Millisecond
	testAuthBodyTimeout = 10 * time.Second
)

// trickle sends a request whose body arrives in pieces, pause apart, on
// a raw connection, and reads the answer. The body it announces is extra
// bytes longer than the pieces. token is a bearer token, or a whole
// Authorization value starting with "Device ".
func trickle(t *testing.T, v *env, method, path, token string, extra int, pieces []string, pause time.Duration) (*http.Response, string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", v.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A bound on the whole exchange, far above the deadlines under test.
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	n := extra
	for _, p := range pieces {
		n += len(p)
	}
	head := method + " " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
	switch {
	case strings.HasPrefix(token, "Device "):
		head += "Authorization: " + token + "\r\n"
	case token != "":
		head += "Authorization: Bearer " + token + "\r\n"
	}
	start := time.Now()
	if _, err := io.WriteString(conn, head+"Content-Length: "+itoa(n)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	for i, p := range pieces {
		if i > 0 {
			time.Sleep(pause)
		}
		if _, err := io.WriteString(conn, p); err != nil {
			break // the server may have answered and closed already
		}
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	return res, string(b), time.Since(start)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestSlowBodiesAreCutOff: an anonymous body that has not arrived within
// BodyTimeout is answered with invalid at once, instead of holding the
// connection; with a valid token the same slow body has AuthBodyTimeout
// and is written.
func TestSlowBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	v := newEnvWith(t, Options{BodyTimeout: testBodyTimeout, AuthBodyTimeout: testAuthBodyTimeout})
	// Half a body, then nothing.
	res, body, took := trickle(t, v, "PUT", docPath("alice/pub", "jobs", "slow"), "", 10, []string{`{"status":`}, 0)
	if res.StatusCode != 400 || !strings.Contains(body, "did not arrive within 50ms") {
		t.Fatalf("a stalled anonymous body: %d %s", res.StatusCode, body)
	}
	if took > 5*time.Second {
		t.Errorf("the stalled body was answered after %v", took)
	}

	pieces := []string{`{"sta`, `tus":"pen`, `ding"}`}
	pause := 2 * testBodyTimeout
	res, body, _ = trickle(t, v, "PUT", docPath("alice/jobs", "jobs", "slow"), v.tokens["alice"], 0, pieces, pause)
	if res.StatusCode != 200 {
		t.Fatalf("a slow body with a token: %d %s", res.StatusCode, body)
	}
	res, body, _ = trickle(t, v, "POST", "/v1/apps/alice/pub/dbs/jobs/docs", "", 0, pieces, pause)
	if res.StatusCode != 400 || !strings.Contains(body, "did not arrive within 50ms") {
		t.Fatalf("the same slow body without a token: %d %s", res.StatusCode, body)
	}
	// The server goes on serving.
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "slow"), "alice", ""), 200, nil)
}

// deadlineRecorder records the read deadlines a handler sets.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	mu        sync.Mutex
	deadlines []time.Time
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deadlines = append(d.deadlines, t)
	return nil
}

// TestBodyDeadlineIsLiftedOnceTheBodyIsIn: a body's deadline starts
// short, moves to the generous one once the token is checked, and is
// lifted when the body is in, so it cannot cut a long answer short; a
// request without a body (a live feed) never gets one.
func TestBodyDeadlineIsLiftedOnceTheBodyIsIn(t *testing.T) {
	t.Parallel()
	v := newEnvWith(t, Options{BodyTimeout: testBodyTimeout, AuthBodyTimeout: testAuthBodyTimeout})
	serve := func(method, path, token, body string) []time.Time {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, path, rd)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		v.srv.ServeHTTP(w, req)
		if w.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		return w.deadlines
	}
	d := serve("PUT", docPath("alice/jobs", "jobs", "d1"), v.tokens["alice"], `{"status":"pending"}`)
	if len(d) != 3 || d[1].Sub(d[0]) != testAuthBodyTimeout-testBodyTimeout || !d[2].IsZero() {
		t.Errorf("deadlines of a put with a token: %v; want short, generous, none", d)
	}
	if d := serve("GET", docPath("alice/jobs", "jobs", "d1"), v.tokens["alice"], ""); len(d) != 0 {
		t.Errorf("deadlines of a request without a body: %v", d)
	}
}

// TestDeviceSignedBodiesHaveTheGenerousDeadline: a body signed by a
// registered device may arrive as slowly as a token holder's, since the
// signature is checked before the body; a signature that does not hold
// is refused at once, without waiting for the body.
func TestDeviceSignedBodiesHaveTheGenerousDeadline(t *testing.T) {
	t.Parallel()
	v := newEnvWith(t, Options{BodyTimeout: testBodyTimeout, AuthBodyTimeout: testAuthBodyTimeout})
	key, err := auth.NewDeviceKey("alice", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.AddDevice(context.Background(), engine.Actor{User: "alice"}, "laptop", key.Public(), ""); err != nil {
		t.Fatal(err)
	}
	pieces := []string{`{"sta`, `tus":"pen`, `ding"}`}
	body := []byte(strings.Join(pieces, ""))
	path := docPath("alice/jobs", "jobs", "slow")
	res, out, _ := trickle(t, v, "PUT", path, key.Sign("PUT", path, body, time.Now()), 0, pieces, 2*testBodyTimeout)
	if res.StatusCode != 200 {
		t.Fatalf("a slow device-signed body: %d %s", res.StatusCode, out)
	}
	// Signed with another key under the same names: refused before the
	// body has come, not given the generous deadline.
	forger, _ := auth.NewDeviceKey("alice", "laptop")
	stalled := []string{`{"status":`}
	res, out, took := trickle(t, v, "PUT", path, forger.Sign("PUT", path, body, time.Now()), 10, stalled, 0)
	if res.StatusCode != 401 || !strings.Contains(out, "does not verify") {
		t.Fatalf("a forged signature: %d %s", res.StatusCode, out)
	}
	if took > 5*time.Second {
		t.Errorf("the forged signature was answered after %v", took)
	}
	// The body is still checked against the signature once it is in.
	res, out, _ = trickle(t, v, "PUT", path, key.Sign("PUT", path, []byte(`{"status":"done"}`), time.Now()), 0, pieces, 0)
	if res.StatusCode != 401 || !strings.Contains(out, "signed for another request") {
		t.Fatalf("a body other than the signed one: %d %s", res.StatusCode, out)
	}

	// The deadlines set: short, generous once the signature holds, none
	// once the body is in.
	req := httptest.NewRequest("PUT", docPath("alice/jobs", "jobs", "d2"), strings.NewReader(`{"status":"pending"}`))
	req.Header.Set("Authorization", key.Sign("PUT", req.URL.RequestURI(), []byte(`{"status":"pending"}`), time.Now()))
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	v.srv.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Fatalf("a device-signed put: %d %s", w.Code, w.Body)
	}
	if d := w.deadlines; len(d) != 3 || d[1].Sub(d[0]) != testAuthBodyTimeout-testBodyTimeout || !d[2].IsZero() {
		t.Errorf("deadlines of a device-signed put: %v; want short, generous, none", d)
	}
}
