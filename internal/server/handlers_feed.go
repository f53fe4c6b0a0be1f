package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// defaultHeartbeat is how often an idle stream sends a comment
// (Options.Heartbeat): it keeps the stream alive through proxies and lets
// both ends notice a dead connection.
const defaultHeartbeat = 15 * time.Second

// feed streams an app's changes as server-sent events (docs/architecture.md, "The live feed"). Each
// event's id is its seq: a client that reconnects with Last-Event-ID (or
// ?since=) resumes right after the last event it saw. With ?field= and
// key=, from=/to= or prefix= (and ?db=) it is a live query: a snapshot event, then each change that
// enters or leaves the result, with "match"; a live query starts over
// with a new snapshot on every connection.
//
// Errors found before the stream starts are ordinary JSON answers. One
// that ends a stream (the reader lost access to the app) is sent as an
// "error" event, {"error":{code,message}}, before the stream closes.
func (s *Server) feed(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	since, err := sinceParam(r)
	if err != nil {
		return err
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if since, err = strconv.ParseInt(id, 10, 64); err != nil || since < 0 {
			return errs.New(errs.Invalid, "Last-Event-ID %q is not a sequence number; reconnect without it to start over", id)
		}
	}
	q := r.URL.Query()
	db, field := q.Get("db"), q.Get("field")
	rc := http.NewResponseController(w)
	started := false
	start := func() {
		started = true
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		// Clients take three silent intervals for a dead connection.
		h.Set("X-Handoff-Heartbeat", strconv.FormatInt(s.heartbeat.Milliseconds(), 10))
		w.WriteHeader(http.StatusOK)
		s.metrics.streams.Inc()
	}
	defer func() {
		if started {
			s.metrics.streams.Dec()
		}
	}()
	send := func(id int64, event string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if id > 0 {
			fmt.Fprintf(w, "id: %d\n", id)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
		return nil
	}
	heartbeat := func(last int64) {
		fmt.Fprintf(w, ": heartbeat %d\n\n", last)
	}
	// ended reports the error that stopped a stream to the client, unless
	// the client itself went away.
	ended := func(err error) error {
		if r.Context().Err() == nil {
			send(0, "error", errorBody{Error: s.asError(r, err)})
			rc.Flush()
		}
		return nil
	}
	ctx := r.Context()

	if field != "" {
		sel, err := selectorParams(r)
		if err != nil {
			return err
		}
		qf, snap, seq, err := s.e.FollowSelect(ctx, a, appRef(r), db, sel)
		if err != nil {
			return err
		}
		defer qf.Close()
		start()
		send(seq, "snapshot", map[string]any{"docs": snap.Docs, "seq": seq})
		if rc.Flush() != nil {
			return nil
		}
		for {
			changes, last, err := qf.Next(ctx, s.heartbeat)
			if err != nil {
				return ended(err)
			}
			if len(changes) == 0 {
				heartbeat(last)
			}
			for _, c := range changes {
				send(c.Seq, "change", c)
			}
			if rc.Flush() != nil {
				return nil
			}
		}
	}

	f, err := s.e.Follow(ctx, a, appRef(r), db, since)
	if err != nil {
		return err
	}
	defer f.Close()
	start()
	fmt.Fprintf(w, "event: ready\ndata: {\"since\":%d}\n\n", since)
	if rc.Flush() != nil {
		return nil
	}
	for {
		c, err := f.Next(ctx, s.heartbeat)
		if err != nil {
			return ended(err)
		}
		if len(c.Changes) == 0 {
			heartbeat(c.Last)
		}
		for _, en := range c.Changes {
			send(en.Seq, "change", en)
		}
		if rc.Flush() != nil {
			return nil
		}
	}
}
