package server

import (
	"net/http"
	"strings"

	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
)

// pathHeader is how clients label their writes in the ledger ("cli",
// "import", "console"); the engine keeps only known labels.
const pathHeader = "X-Handoff-Path"

// actor authenticates the request. No Authorization header is the
// anonymous actor; a header that is not a valid bearer token is refused,
// never downgraded to anonymous.
func (s *Server) actor(r *http.Request) (engine.Actor, error) {
	token, err := bearerToken(r.Header.Get("Authorization"))
	if err != nil {
		return engine.Actor{}, err
	}
	a, err := s.e.Authenticate(r.Context(), token)
	if err != nil {
		return engine.Actor{}, err
	}
	a.Path = engine.ClientPath(r.Header.Get(pathHeader))
	return a, nil
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header; the scheme is case-insensitive (RFC 9110).
func bearerToken(h string) (string, error) {
	if h == "" {
		return "", nil
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", errs.New(errs.Unauthorized, "the Authorization header must be \"Bearer <token>\"; pass a handoff token (HANDOFF_TOKEN)")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", errs.New(errs.Unauthorized, "the bearer token is empty; pass a handoff token (HANDOFF_TOKEN) or drop the Authorization header to read anonymously")
	}
	return token, nil
}
