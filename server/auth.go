package server

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/handoff-run/handoff/auth"
	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
)

// pathHeader is how clients label their writes in the ledger ("cli",
// "import", "console"); the engine keeps only known labels.
const pathHeader = "X-Handoff-Path"

// actor authenticates the request. No Authorization header is the
// anonymous actor; a header that is not a valid credential is refused,
// never downgraded to anonymous. Two schemes are accepted:
//
//   - "Bearer <token>": a user's token;
//   - "Device <payload>.<sig>": a request signed by a registered device
//     key (package auth). The signature covers the method, the path and
//     query (r.URL.RequestURI()) and the body, so the body is read here,
//     bounded, and put back for the handler.
//
// A client address that sent too many bad credentials is answered
// rate_limited for a while, whatever credential it sends (ratelimit.go).
// Nothing a client sends can make it a backend handler: the actor built
// here never has Handler set.
func (s *Server) actor(r *http.Request) (engine.Actor, error) {
	hs := r.Header.Values("Authorization")
	if len(hs) > 1 {
		return engine.Actor{}, errs.New(errs.Unauthorized, "the request has %d Authorization headers; send exactly one", len(hs))
	}
	h := ""
	if len(hs) == 1 {
		h = strings.TrimSpace(hs[0])
	}
	if h == "" {
		return engine.Actor{Path: engine.ClientPath(r.Header.Get(pathHeader))}, nil
	}
	key := clientKey(r)
	now := s.e.Clock().Now()
	if wait := s.authFails.blocked(key, now); wait > 0 {
		return engine.Actor{}, errs.New(errs.RateLimited,
			"too many requests with a bad credential came from your address (the limit is %d a minute); until %s from now every credential from it is refused, so wait, then retry with a valid one",
			authFailBurst, wait.Round(time.Second)+time.Second)
	}
	a, err := s.authenticate(r, h)
	if err != nil {
		if errs.Is(err, errs.Unauthorized) {
			s.authFails.fail(key, now)
		}
		return engine.Actor{}, err
	}
	a.Handler = "" // only the engine makes handler actors
	a.Path = engine.ClientPath(r.Header.Get(pathHeader))
	return a, nil
}

// authenticate checks one Authorization value of either scheme; the
// scheme is case-insensitive (RFC 9110).
func (s *Server) authenticate(r *http.Request, h string) (engine.Actor, error) {
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		if cred == "" {
			return engine.Actor{}, errs.New(errs.Unauthorized, "the bearer token is empty; pass a handoff token (HANDOFF_TOKEN) or drop the Authorization header to read anonymously")
		}
		return s.e.Authenticate(r.Context(), cred)
	case strings.EqualFold(scheme, auth.SchemeDevice):
		if cred == "" {
			return engine.Actor{}, errs.New(errs.Unauthorized, "the device token is empty; sign requests with the handoff CLI or client (HANDOFF_DEVICE)")
		}
		body, err := s.signedBody(r)
		if err != nil {
			return engine.Actor{}, err
		}
		return s.e.AuthenticateDevice(r.Context(), cred, r.Method, r.URL.RequestURI(), body)
	}
	return engine.Actor{}, errs.New(errs.Unauthorized, "the Authorization header must be \"Bearer <token>\" (HANDOFF_TOKEN) or a device signature \"Device ...\" made by the handoff CLI or client (HANDOFF_DEVICE)")
}

// signedBody reads the whole body of a device-signed request, up to the
// largest body any route accepts, and puts it back for the handler.
func (s *Server) signedBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := max(bulkBodyBytes(s.e.MaxDocBytes()), codeBodyBytes)
	tooLarge := errs.New(errs.TooLarge, "the request body is over the limit of %d bytes; make it smaller", limit)
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	_ = r.Body.Close()
	if err != nil {
		return nil, bodyError(err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	return b, nil
}
