package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// timedBody is a request body that must arrive by a deadline: the
// connection's read deadline, set when the request starts and moved once
// the caller is known. It is lifted when the body is in, so that a long
// answer (a bulk write, a live feed) is not cut short by it.
type timedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time

	mu    sync.Mutex
	limit time.Duration
	done  bool
}

func newTimedBody(body io.ReadCloser, rc *http.ResponseController, start time.Time, limit time.Duration) *timedBody {
	b := &timedBody{ReadCloser: body, rc: rc, start: start, limit: limit}
	// Where deadlines are not supported (a test's recorder), there is no
	// connection to hold either.
	_ = rc.SetReadDeadline(start.Add(limit))
	return b
}

// errBodyTimeout is a body that did not arrive in time.
type errBodyTimeout struct{ limit time.Duration }

func (e errBodyTimeout) Error() string { return "the body did not arrive within " + e.limit.String() }

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.mu.Lock()
		if !b.done {
			b.done = true
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.mu.Unlock()
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.mu.Lock()
		limit := b.limit
		b.mu.Unlock()
		err = errBodyTimeout{limit}
	}
	return n, err
}

// extend gives the rest of the body until limit after the start of the
// request, unless it is in already.
func (b *timedBody) extend(limit time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done && limit > b.limit {
		b.limit = limit
		_ = b.rc.SetReadDeadline(b.start.Add(limit))
	}
}

// authenticated moves the body deadline of a request whose bearer token
// was valid to the generous one.
func (s *Server) authenticated(r *http.Request) {
	if b, ok := r.Body.(*timedBody); ok {
		b.extend(s.authBodyTimeout)
	}
}
