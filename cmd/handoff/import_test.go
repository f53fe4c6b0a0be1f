package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestImportStopped: Ctrl-C (the command's context ending) stops an
// import with the counts of what was written, what may have been, and
// how to finish the job; whether it waited on the server or on its input.
func TestImportStopped(t *testing.T) {
	t.Parallel()
	// The server answers the first bulk request and holds the second until
	// the client goes away.
	var requests atomic.Int32
	holding := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/bulk") {
			http.NotFound(w, r)
			return
		}
		var req struct{ Docs []json.RawMessage }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("bulk body: %v", err)
		}
		if requests.Add(1) > 1 {
			holding <- struct{}{}
			<-r.Context().Done()
			return
		}
		var res []map[string]any
		for i := range req.Docs {
			res = append(res, map[string]any{"ok": true, "id": fmt.Sprint(i), "rev": "1-a"})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": res})
	}))
	defer srv.Close()
	env := map[string]string{"HANDOFF_SERVER": srv.URL, "HANDOFF_TOKEN": "t"}

	// start runs an import of stdin with batches of 2 and returns a stop
	// (the context's cancel) and its outcome.
	start := func(stdin io.Reader) (context.CancelFunc, <-chan [3]string) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan [3]string, 1)
		go func() {
			var out, errb bytes.Buffer
			code := run(ctx, []string{"db", "import", "--app", "a/b", "--db", "d", "--batch", "2", "-"}, stdin, &out, &errb,
				func(k string) string { return env[k] })
			done <- [3]string{fmt.Sprint(code), out.String(), errb.String()}
		}()
		return cancel, done
	}
	wait := func(done <-chan [3]string) (code, stdout, stderr string) {
		select {
		case r := <-done:
			return r[0], r[1], r[2]
		case <-time.After(30 * time.Second):
			t.Fatal("the import did not stop within 30 s of its context ending")
		}
		return
	}

	t.Run("while a batch is sent", func(t *testing.T) {
		stop, done := start(strings.NewReader(`{"_id":"a"}` + "\n" + `{"_id":"b"}` + "\n" + `{"_id":"c"}` + "\n" + `{"_id":"d"}` + "\n"))
		<-holding
		stop()
		code, stdout, stderr := wait(done)
		var sum importSummary
		if err := json.Unmarshal([]byte(stdout), &sum); err != nil || sum != (importSummary{Docs: 4, Written: 2, Stopped: true}) {
			t.Errorf("summary %q (%v); want 4 docs, 2 written, stopped", stdout, err)
		}
		if code != "1" || !strings.HasPrefix(stderr, "error: unavailable: the import was stopped") ||
			!strings.Contains(stderr, "2 documents were written and 0 were there already before the stop") ||
			!strings.Contains(stderr, "the 2 documents being sent may or may not be written") ||
			!strings.Contains(stderr, "run the same import again with --if-absent") || strings.Contains(stderr, "context canceled") {
			t.Errorf("exit %s, stderr %q", code, stderr)
		}
	})

	t.Run("while the input is read", func(t *testing.T) {
		// A pipe that never ends: the import waits on it for line 2.
		pr, pw := io.Pipe()
		defer pw.Close()
		stop, done := start(pr)
		if _, err := pw.Write([]byte(`{"_id":"a"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		stop()
		code, stdout, stderr := wait(done)
		if code != "1" || !strings.Contains(stdout, `"stopped":true`) ||
			!strings.Contains(stderr, "0 documents were written") || strings.Contains(stderr, "being sent") ||
			!strings.Contains(stderr, "--if-absent") {
			t.Errorf("exit %s, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
}
