package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
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
//     bounded, and put back for the handler; it is read once the rest of
//     the signature holds, under the body deadline of a signed-in caller.
//
// A client address that sent too many bad credentials is answered
// rate_limited for a while, whatever credential it sends (ratelimit.go),
// except a revoked device, which is told so.
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
		if s.revokedDevice(r.Context(), h) {
			// Its holder must learn that it was revoked, not to wait:
			// the engine's refusal says so.
			_, err := s.authenticate(r, h)
			return engine.Actor{}, err
		}
		return engine.Actor{}, errs.New(errs.RateLimited,
			"too many requests with a bad credential came from your address (the limit is %d a minute); until %s from now every credential from it is refused, so wait, then retry with a valid one",
			authFailBurst, wait.Round(time.Second)+time.Second)
	}
	a, err := s.authenticate(r, h)
	if err != nil {
		// A revoked device retrying is no guess: it does not use up the
		// address's allowance.
		if errs.Is(err, errs.Unauthorized) && !s.revokedDevice(r.Context(), h) {
			s.authFails.fail(key, now)
		}
		return engine.Actor{}, err
	}
	a.Handler = "" // only the engine makes handler actors
	a.Path = engine.ClientPath(r.Header.Get(pathHeader))
	return a, nil
}

// revokedDevice reports whether h is a device signature naming a device
// its user revoked (and has no live device of that name). It tells no
// more than the refusal of the request itself would.
func (s *Server) revokedDevice(ctx context.Context, h string) bool {
	scheme, cred, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, auth.SchemeDevice) {
		return false
	}
	sg, err := auth.ParseSigned(strings.TrimSpace(cred))
	if err != nil {
		return false
	}
	ds, err := s.e.Devices(ctx, engine.Actor{User: sg.User})
	if err != nil {
		return false
	}
	revoked := false
	for _, d := range ds {
		if d.Name == sg.Device {
			if d.Revoked == nil {
				return false
			}
			revoked = true
		}
	}
	return revoked
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
		return s.e.AuthenticateDeviceBody(r.Context(), cred, r.Method, r.URL.RequestURI(), func() ([]byte, error) {
			// The signature is the device's own: its body may take as
			// long as a token holder's.
			s.authenticated(r)
			return s.signedBody(r)
		})
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
