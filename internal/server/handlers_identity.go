package server

import (
	"net/http"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// whoami tells a client which credential it is using; the CLI's login
// checks a token with it.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	if a.User == "" {
		return errs.New(errs.Unauthorized, "no credential was sent; pass a token in the Authorization header (HANDOFF_TOKEN)")
	}
	writeJSON(w, http.StatusOK, struct {
		User   string `json:"user"`
		Admin  bool   `json:"admin"`
		Device string `json:"device,omitempty"`
		App    string `json:"app,omitempty"` // the one app a device or visitor may use
	}{a.User, a.Admin, a.Device, a.App})
	return nil
}

func (s *Server) addUser(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeBody(w, r, smallBodyBytes, &req, `{"name":"alice"}`); err != nil {
		return err
	}
	token, err := s.e.AddUser(r.Context(), a, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, struct {
		Name  string `json:"name"`
		Token string `json:"token"`
	}{req.Name, token})
	return nil
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	us, err := s.e.Users(r.Context(), a)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Users []engine.UserInfo `json:"users"`
	}{us})
	return nil
}

// removeUser deletes a user with their tokens, devices and roles.
func (s *Server) removeUser(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	if err := s.e.RemoveUser(r.Context(), a, r.PathValue("user")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, okBody)
	return nil
}

// rotateToken gives a user a new token and revokes the old ones.
func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	user := r.PathValue("user")
	token, err := s.e.RotateToken(r.Context(), a, user)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Name  string `json:"name"`
		Token string `json:"token"`
	}{user, token})
	return nil
}

func (s *Server) createApp(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		App    string `json:"app"`
		Public bool   `json:"public"`
	}
	if err := decodeBody(w, r, smallBodyBytes, &req, `{"app":"alice/jobs","public":false}`); err != nil {
		return err
	}
	info, err := s.e.CreateApp(r.Context(), a, req.App, req.Public)
	if err != nil {
		return err
	}
	info.Site = s.siteURL(r, info.App)
	writeJSON(w, http.StatusCreated, info)
	return nil
}

func (s *Server) listApps(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	apps, err := s.e.Apps(r.Context(), a)
	if err != nil {
		return err
	}
	for i := range apps {
		apps[i].Site = s.siteURL(r, apps[i].App)
	}
	writeJSON(w, http.StatusOK, struct {
		Apps []engine.AppInfo `json:"apps"`
	}{apps})
	return nil
}

func (s *Server) addMember(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		User string `json:"user"`
		Role string `json:"role"`
	}
	if err := decodeBody(w, r, smallBodyBytes, &req, `{"user":"bob","role":"editor"}`); err != nil {
		return err
	}
	if req.User == "" || req.Role == "" {
		return errs.New(errs.Invalid, "both user and role are required; send {\"user\":\"bob\",\"role\":\"editor\"}")
	}
	if err := s.e.AddMember(r.Context(), a, appRef(r), req.User, req.Role); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, okBody)
	return nil
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	ms, err := s.e.Members(r.Context(), a, appRef(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Members []engine.Member `json:"members"`
	}{ms})
	return nil
}

var okBody = map[string]bool{"ok": true}
