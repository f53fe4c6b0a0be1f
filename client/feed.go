package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/handoff-run/handoff/errs"
)

// The live feed (GET /v1/apps/{owner}/{app}/feed) is a stream of
// server-sent events: "change" events whose id is the change's seq,
// "snapshot" for live queries, "error" when the server ends the stream,
// and ": heartbeat SEQ" comments while nothing happens.

// Feed reconnection defaults.
const (
	// HeartbeatHeader is the server's heartbeat interval in milliseconds,
	// sent with every feed: the client takes a feed that stays silent for
	// three intervals (no event, no heartbeat) for dead and reconnects.
	HeartbeatHeader = "X-Handoff-Heartbeat"
	// defaultIdle is the silence allowed when the server does not say its
	// interval: three of its default 15 s heartbeats.
	defaultIdle = 45 * time.Second

	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
	// maxEventBytes bounds one event, so a broken stream cannot grow the
	// client's memory without end (documents are 1 MiB by default).
	maxEventBytes = 64 << 20
)

// QueryChange is one change of a live query. Match tells whether the
// document is in the result after it: false means it left (changed, was
// deleted, or became unreadable to you; then Doc is null).
type QueryChange struct {
	Entry
	Match bool `json:"match"`
}

// Follow reads the live changes feed of app (of every database when db is
// ""), starting after since, and calls fn for each change the caller may
// read, in commit order. A dropped connection is reopened with backoff
// and resumed from the last change seen (Last-Event-ID), so fn sees every
// change exactly once.
//
// Follow returns fn's error as soon as fn fails, ctx.Err() when ctx ends,
// and the server's error when it refuses the feed (no access, unknown
// app, bad since). A server that cannot be reached on the first attempt
// is an error too; once the feed has been open, Follow keeps retrying
// until ctx ends.
func (c *Client) Follow(ctx context.Context, app, db string, since int64, fn func(Entry) error) error {
	p, err := appPath(app)
	if err != nil {
		return err
	}
	if since < 0 {
		return errs.New(errs.Invalid, "since must be 0 or a sequence number from the feed, not %d", since)
	}
	q := url.Values{}
	if db != "" {
		q.Set("db", db)
	}
	if since > 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	last := since
	return c.stream(ctx, p+"/feed", q, func() int64 { return last }, func(ev sseEvent) error {
		switch ev.name {
		case "change":
			var en Entry
			if err := json.Unmarshal(ev.data, &en); err != nil {
				return badEvent(c.base, ev, err)
			}
			if en.Seq <= last {
				return nil // already delivered before a reconnect
			}
			if err := fn(en); err != nil {
				return fnError{err}
			}
			last = en.Seq
		case "heartbeat":
			// Every change up to the heartbeat's seq that this reader may
			// see has been sent: resume after it.
			last = max(last, ev.id)
		}
		return nil
	})
}

// LiveQuery follows the documents of db whose field (a name or a dotted
// path) equals key, a JSON value. fn is first called with snapshot true
// and the matching documents, then with each change that enters, stays
// in or leaves the result (change.Match false means it left). After a
// reconnection the server sends a fresh snapshot: fn gets snapshot true
// again and should replace what it holds. A change may carry a newer
// revision of a document the snapshot already showed: keep the newer
// _rev. LiveQuery returns like Follow.
func (c *Client) LiveQuery(ctx context.Context, app, db, field string, key json.RawMessage,
	fn func(snapshot bool, docs []json.RawMessage, change *QueryChange) error) error {
	p, err := appPath(app)
	if err != nil {
		return err
	}
	if db == "" {
		return errs.New(errs.Invalid, "a live query needs a database; pass db")
	}
	if field == "" || !json.Valid(key) {
		return errs.New(errs.Invalid, "a live query needs a field and a JSON key (quote strings: \"running\"), not %q=%q", field, key)
	}
	q := url.Values{"db": {db}, "field": {field}, "key": {string(key)}}
	last := int64(0) // a live query starts over; Last-Event-ID is ignored
	return c.stream(ctx, p+"/feed", q, func() int64 { return 0 }, func(ev sseEvent) error {
		switch ev.name {
		case "snapshot":
			var s struct {
				Docs []json.RawMessage `json:"docs"`
				Seq  int64             `json:"seq"`
			}
			if err := json.Unmarshal(ev.data, &s); err != nil {
				return badEvent(c.base, ev, err)
			}
			last = s.Seq
			if err := fn(true, nonNil(s.Docs), nil); err != nil {
				return fnError{err}
			}
		case "change":
			var ch QueryChange
			if err := json.Unmarshal(ev.data, &ch); err != nil {
				return badEvent(c.base, ev, err)
			}
			if ch.Seq <= last {
				return nil
			}
			last = ch.Seq
			if err := fn(false, nil, &ch); err != nil {
				return fnError{err}
			}
		}
		return nil
	})
}

// fnError marks the callback's own error, returned to the caller as is.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func badEvent(base string, ev sseEvent, err error) error {
	return errs.New(errs.Internal, "the server at %s sent a %q feed event that is not the expected JSON: %v", base, ev.name, err)
}

// sseEvent is one dispatched server-sent event; a heartbeat comment is
// an event named "heartbeat" whose id is the seq it carries.
type sseEvent struct {
	id   int64
	name string
	data []byte
}

// stream keeps a feed open: it connects, hands each event to handle and
// reconnects after a drop, sending lastID() as Last-Event-ID when it is
// not 0. handle's error ends the stream.
func (c *Client) stream(ctx context.Context, path string, q url.Values, lastID func() int64, handle func(sseEvent) error) error {
	hc := *c.hc
	hc.Timeout = 0     // a feed stays open for as long as it is followed
	connected := false // once it was: keep retrying instead of failing
	backoff := minBackoff
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		began := time.Now()
		opened, err := c.streamOnce(ctx, &hc, path, q, lastID(), handle)
		var fe fnError
		switch {
		case errors.As(err, &fe):
			return fe.err
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !retryable(err):
			return err
		case err != nil && !connected && !opened:
			return err
		}
		if opened {
			connected = true
			// A connection that held for a while starts the backoff over;
			// one that keeps dropping at once does not.
			if time.Since(began) > 5*time.Second {
				backoff = minBackoff
			}
		}
		// Wait a little before reconnecting (with jitter, so that many
		// clients dropped at once do not come back at once).
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, maxBackoff)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// retryable tells the errors a reconnection may cure: an unreachable or
// overloaded server, or a stream that broke.
func retryable(err error) bool {
	var ee *errs.Error
	if !errors.As(err, &ee) {
		return true // a broken stream (read error, EOF)
	}
	return ee.Code == errs.Unavailable
}

// streamOnce runs one connection of a feed until it ends. opened reports
// whether the server accepted it (2xx).
func (c *Client) streamOnce(ctx context.Context, hc *http.Client, path string, q url.Values, last int64, handle func(sseEvent) error) (opened bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, errs.New(errs.Invalid, "bad server address %q: %v; set --server or HANDOFF_SERVER to http://HOST:PORT", c.base, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	if err := c.authorize(req, nil); err != nil {
		return false, err
	}
	if c.ua != "" {
		req.Header.Set("User-Agent", c.ua)
	}
	// The watchdog drops a connection that went silent: the server sends
	// heartbeats, so silence means it is gone.
	idle := defaultIdle
	watchdog := time.AfterFunc(idle, cancel)
	defer watchdog.Stop()
	resp, err := hc.Do(req)
	if err != nil {
		return false, unreachable(c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		err := decodeError(resp)
		if resp.StatusCode/100 == 5 {
			// A server in trouble (or a proxy in front of it) may recover.
			return false, errs.New(errs.Unavailable, "%v", err)
		}
		return false, err
	}
	if ms, err := strconv.ParseInt(resp.Header.Get(HeartbeatHeader), 10, 64); err == nil && ms > 0 {
		idle = 3 * time.Duration(ms) * time.Millisecond
	}
	watchdog.Reset(idle)
	br := bufio.NewReader(resp.Body)
	var ev sseEvent
	var data bytes.Buffer
	for {
		line, err := readLine(br)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // a feed never ends by itself
			}
			return true, err
		}
		watchdog.Reset(idle)
		if len(line) == 0 { // dispatch
			if ev.name == "" && data.Len() == 0 {
				continue
			}
			if ev.name == "" {
				ev.name = "message"
			}
			ev.data = bytes.TrimSuffix(data.Bytes(), []byte("\n"))
			if ev.name == "error" {
				var body struct {
					Error *errs.Error `json:"error"`
				}
				if json.Unmarshal(ev.data, &body) == nil && body.Error != nil && body.Error.Code != "" {
					if body.Error.Code == errs.Internal {
						// A failure of the server, not of the request: it may
						// pass, so the feed is tried again.
						return true, errs.New(errs.Unavailable, "%v", body.Error)
					}
					return true, body.Error
				}
				return true, errs.New(errs.Internal, "the server at %s ended the feed with an error it did not describe: %s", c.base, ev.data)
			}
			if err := handle(ev); err != nil {
				return true, err
			}
			ev = sseEvent{}
			data.Reset()
			continue
		}
		if line[0] == ':' {
			if seq, ok := bytes.CutPrefix(line, []byte(": heartbeat ")); ok {
				if n, err := strconv.ParseInt(string(seq), 10, 64); err == nil {
					if err := handle(sseEvent{id: n, name: "heartbeat"}); err != nil {
						return true, err
					}
				}
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			if data.Len()+len(value) > maxEventBytes {
				return true, errs.New(errs.TooLarge, "a feed event from %s is over %d bytes", c.base, maxEventBytes)
			}
			data.Write(value)
			data.WriteByte('\n')
		case "id":
			if n, err := strconv.ParseInt(string(value), 10, 64); err == nil {
				ev.id = n
			}
		}
	}
}

// readLine reads one line of the stream without its end (\n, \r\n).
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A long data line: collect it whole, within the event bound.
		buf := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(buf) > maxEventBytes {
				return nil, errs.New(errs.TooLarge, "a feed line is over %d bytes", maxEventBytes)
			}
			line, err = br.ReadSlice('\n')
			buf = append(buf, line...)
		}
		line = buf
	}
	if err != nil {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}
