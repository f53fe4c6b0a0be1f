package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/handoff-run/handoff/errs"
)

// Visitor sign-ins and sign-ups are limited like bad credentials
// (ratelimit.go), in buckets of their own: per client address, and per
// visitor name on an app, so a guesser spread over many addresses still
// gets few tries at one name. An attempt takes a token from both buckets
// before the password is looked at, so a burst sent at once is checked
// no more often than the buckets allow; a malformed attempt, which was no
// guess, gives them back. Every other failure stays counted, a busy
// server's or a failing store's too: an answer that differs by whether
// the name or password was right must cost a guess. A success gives back
// the address's token and empties the name's count, not the address's,
// or a guesser with an account of their own could clear their address
// between guesses.
type visitorLimit struct {
	addr, name string // bucket keys; name is "" when the attempt names none
}

// visitorKeys are the buckets of an attempt at name. The name's key is a
// hash: a client chooses the name, and a table of its raw bytes would
// hold whatever size it sent.
func visitorKeys(r *http.Request, name string) visitorLimit {
	l := visitorLimit{addr: "addr " + clientKey(r)}
	if name != "" {
		h := sha256.Sum256([]byte(appRef(r) + "\x00" + name))
		l.name = "name " + hex.EncodeToString(h[:16])
	}
	return l
}

func (l visitorLimit) keys() []string {
	if l.name == "" {
		return []string{l.addr}
	}
	return []string{l.addr, l.name}
}

// visitorTake counts an attempt before it is made, or answers
// rate_limited while either bucket is empty.
func (s *Server) visitorTake(w http.ResponseWriter, l visitorLimit) error {
	wait, who := s.visitorFails.take(s.e.Clock().Now(), l.keys()...)
	if wait <= 0 {
		return nil
	}
	whom := "your address"
	if who == 1 {
		whom = "this name"
	}
	return rateLimited(w, wait, "too many failed attempts for %s (the limit is %d at once, then one every %s); retry in %s",
		whom, authFailBurst, authFailRefill)
}

// visitorDone settles an attempt that visitorTake counted: a success
// gives the address's token back and clears the name's; a malformed
// request gives both back; every other failure stays counted.
func (s *Server) visitorDone(l visitorLimit, err error) {
	now := s.e.Clock().Now()
	switch {
	case err == nil:
		s.visitorFails.refund(now, l.addr)
		if l.name != "" {
			s.visitorFails.reset(l.name)
		}
	case errs.Is(err, errs.Invalid):
		s.visitorFails.refund(now, l.keys()...)
	}
}

// Passkey ceremonies are limited per address as they start: each begin
// stores a ceremony until it is used or expires, so a client may start
// ceremonyBurst at once, then one more every ceremonyRefill.
const (
	ceremonyBurst  = 20
	ceremonyRefill = 3 * time.Second
)

// ceremonyTake counts a ceremony's start, or answers rate_limited.
func (s *Server) ceremonyTake(w http.ResponseWriter, r *http.Request) error {
	wait, _ := s.ceremonyStarts.take(s.e.Clock().Now(), "addr "+clientKey(r))
	if wait <= 0 {
		return nil
	}
	return rateLimited(w, wait, "too many passkey ceremonies were started from your address (the limit is %d at once, then one every %s); retry in %s",
		ceremonyBurst, ceremonyRefill)
}

// rateLimited is the rate_limited answer: when to retry goes in
// Retry-After and, as the last argument of format, in the message.
func rateLimited(w http.ResponseWriter, wait time.Duration, format string, args ...any) error {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return errs.New(errs.RateLimited, format, append(args, fmt.Sprint(time.Duration(secs)*time.Second))...)
}
