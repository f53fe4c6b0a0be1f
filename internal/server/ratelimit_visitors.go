package server

import (
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
// gets few tries at one name. A failure takes a token from both buckets;
// a success empties the name's count, not the address's, or a guesser
// with an account of their own could clear their address between
// guesses.
type visitorLimit struct {
	addr, name string // bucket keys; name is "" when the name is unknown
}

func visitorKeys(r *http.Request, name string) visitorLimit {
	l := visitorLimit{addr: "addr " + clientKey(r)}
	if name != "" {
		l.name = "name " + appRef(r) + " " + name
	}
	return l
}

// visitorWait answers rate_limited while either bucket is empty, with
// when to retry in the message and in Retry-After.
func (s *Server) visitorWait(w http.ResponseWriter, l visitorLimit) error {
	now := s.e.Clock().Now()
	wait, who := s.visitorFails.blocked(l.addr, now), "your address"
	if l.name != "" {
		if d := s.visitorFails.blocked(l.name, now); d > wait {
			wait, who = d, "this name"
		}
	}
	if wait <= 0 {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return errs.New(errs.RateLimited, "too many failed attempts for %s (the limit is %d a minute); retry in %s",
		who, authFailBurst, fmt.Sprint(time.Duration(secs)*time.Second))
}

// visitorDone counts the outcome of an attempt: refusals a guesser
// learns from count against both buckets; a success clears the name's.
// Malformed requests and server trouble are no guess and do not count.
func (s *Server) visitorDone(l visitorLimit, err error) {
	if err == nil {
		if l.name != "" {
			s.visitorFails.reset(l.name)
		}
		return
	}
	now := s.e.Clock().Now()
	switch errs.CodeOf(err) {
	case errs.Unauthorized, errs.Forbidden, errs.Exists:
		s.visitorFails.fail(l.addr, now)
		if l.name != "" {
			s.visitorFails.fail(l.name, now)
		}
	}
}
