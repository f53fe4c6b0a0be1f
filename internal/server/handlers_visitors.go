package server

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// signedIn is the answer to a sign-up or sign-in: the visitor's new
// token, scoped to the app, and who they are.
type signedIn struct {
	Token string         `json:"token"`
	User  engine.Visitor `json:"user"`
}

func (s *Server) signUp(w http.ResponseWriter, r *http.Request, _ engine.Actor) error {
	var req struct {
		Name     string `json:"name"`
		Password string `json:"password"`
		Invite   string `json:"invite"`
	}
	if err := decodeBody(w, r, smallBodyBytes, &req, `{"name":"sam","password":"...","invite":"(if the app asks for one)"}`); err != nil {
		return err
	}
	l := visitorKeys(r, req.Name)
	if err := s.visitorTake(w, l); err != nil {
		return err
	}
	token, v, err := s.e.SignUp(r.Context(), appRef(r), req.Name, req.Password, req.Invite)
	s.visitorDone(l, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, signedIn{Token: token, User: v})
	return nil
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request, _ engine.Actor) error {
	var req struct {
		Name     string `json:"name"`
		Password string `json:"password"`
	}
	if err := decodeBody(w, r, smallBodyBytes, &req, `{"name":"sam","password":"..."}`); err != nil {
		return err
	}
	l := visitorKeys(r, req.Name)
	if err := s.visitorTake(w, l); err != nil {
		return err
	}
	token, v, err := s.e.SignIn(r.Context(), appRef(r), req.Name, req.Password)
	s.visitorDone(l, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, signedIn{Token: token, User: v})
	return nil
}

// signOut revokes the token the request was made with, and no other.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	if a.User == "" {
		return errs.New(errs.Unauthorized, "sign-out needs the visitor's token in Authorization (Bearer)")
	}
	if err := s.e.SignOut(r.Context(), a, appRef(r)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

func (s *Server) invite(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	code, err := s.e.Invite(r.Context(), a, appRef(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"code": code})
	return nil
}

// passkeyRP is the relying party of the app named in the path: its site,
// in the form the page calling is on when it is one of the site's (with
// --site-domain a site is served at two origins).
func (s *Server) passkeyRP(r *http.Request) engine.PasskeyRP {
	owner, name := r.PathValue("owner"), r.PathValue("app")
	origin := r.Header.Get("Origin")
	if !s.isSiteOrigin(r, origin, owner, name) {
		origin = s.siteOrigin(r, owner, name)
	}
	rp := engine.PasskeyRP{Origin: origin}
	if u, err := url.Parse(origin); err == nil {
		rp.ID = u.Hostname()
	}
	return rp
}

// ceremonyAnswer is the body of a finish: the begin's ceremony id and
// the browser's credential, as PublicKeyCredential.toJSON() gives it.
type ceremonyAnswer struct {
	Ceremony   string          `json:"ceremony"`
	Credential json.RawMessage `json:"credential"`
}

const ceremonyExample = `{"ceremony":"(from begin)","credential":{...PublicKeyCredential...}}`

func decodeCeremony(w http.ResponseWriter, r *http.Request) (ceremonyAnswer, error) {
	var req ceremonyAnswer
	if err := decodeBody(w, r, smallBodyBytes, &req, ceremonyExample); err != nil {
		return req, err
	}
	if req.Ceremony == "" || len(req.Credential) == 0 {
		return req, errs.New(errs.Invalid, "send the ceremony id from begin and the browser's credential: %s", ceremonyExample)
	}
	return req, nil
}

func (s *Server) passkeyAddBegin(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	if err := s.ceremonyTake(w, r); err != nil {
		return err
	}
	c, err := s.e.BeginPasskeyAdd(r.Context(), a, appRef(r), s.passkeyRP(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) passkeyAddFinish(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	req, err := decodeCeremony(w, r)
	if err != nil {
		return err
	}
	if err := s.e.FinishPasskeyAdd(r.Context(), a, appRef(r), s.passkeyRP(r), req.Ceremony, req.Credential); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]bool{"ok": true})
	return nil
}

func (s *Server) passkeySignInBegin(w http.ResponseWriter, r *http.Request, _ engine.Actor) error {
	if err := s.ceremonyTake(w, r); err != nil {
		return err
	}
	c, err := s.e.BeginPasskeySignIn(r.Context(), appRef(r), s.passkeyRP(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) passkeySignInFinish(w http.ResponseWriter, r *http.Request, _ engine.Actor) error {
	req, err := decodeCeremony(w, r)
	if err != nil {
		return err
	}
	l := visitorKeys(r, "")
	if err := s.visitorTake(w, l); err != nil {
		return err
	}
	token, v, err := s.e.FinishPasskeySignIn(r.Context(), appRef(r), s.passkeyRP(r), req.Ceremony, req.Credential)
	s.visitorDone(l, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, signedIn{Token: token, User: v})
	return nil
}
