package server

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// Devices, secrets and member removal (docs/api.md, "Devices, secrets and
// members"). The engine decides who may; these only translate.

func (s *Server) addDevice(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		Name      string `json:"name"`
		PublicKey string `json:"publicKey"`
		App       string `json:"app"`
	}
	const example = `{"name":"ci","publicKey":"<32 bytes of Ed25519, base64url>","app":"alice/jobs"}`
	if err := decodeBody(w, r, smallBodyBytes, &req, example); err != nil {
		return err
	}
	if req.Name == "" || req.PublicKey == "" {
		return errs.New(errs.Invalid, "both name and publicKey are required; send %s", example)
	}
	pub, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(req.PublicKey, "="))
	if err != nil {
		return errs.New(errs.Invalid, "publicKey is not base64url: %v; let `handoff device add` make the key", err)
	}
	info, err := s.e.AddDevice(r.Context(), a, req.Name, pub, req.App)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, info)
	return nil
}

func (s *Server) listDevices(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	ds, err := s.e.Devices(r.Context(), a)
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []engine.DeviceInfo{}
	}
	writeJSON(w, http.StatusOK, struct {
		Devices []engine.DeviceInfo `json:"devices"`
	}{ds})
	return nil
}

func (s *Server) revokeDevice(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	name := r.PathValue("name")
	if err := s.e.RevokeDevice(r.Context(), a, name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "device": name})
	return nil
}

// secretBodyBytes bounds a secret's request: a value at the engine's
// limit (64 KiB) even if JSON escapes every byte of it.
const secretBodyBytes = 512 << 10

// setSecret stores the value of {"value": "..."}; the answer never
// repeats it.
func (s *Server) setSecret(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		Value *string `json:"value"`
	}
	const example = `{"value":"s3cret"}`
	if err := decodeBody(w, r, secretBodyBytes, &req, example); err != nil {
		return err
	}
	if req.Value == nil {
		return errs.New(errs.Invalid, "the secret's value is missing; send %s", example)
	}
	name := r.PathValue("name")
	if err := s.e.SetSecret(r.Context(), a, appRef(r), name, []byte(*req.Value)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "app": appRef(r), "name": name})
	return nil
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	ss, err := s.e.ListSecrets(r.Context(), a, appRef(r))
	if err != nil {
		return err
	}
	if ss == nil {
		ss = []engine.SecretInfo{}
	}
	writeJSON(w, http.StatusOK, struct {
		Secrets []engine.SecretInfo `json:"secrets"`
	}{ss})
	return nil
}

func (s *Server) removeSecret(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	name := r.PathValue("name")
	if err := s.e.RemoveSecret(r.Context(), a, appRef(r), name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "app": appRef(r), "name": name})
	return nil
}

// removeMember takes ?role=R from the user, or every role without it.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	user, role := r.PathValue("user"), r.URL.Query().Get("role")
	if err := s.e.RemoveMember(r.Context(), a, appRef(r), user, role); err != nil {
		return err
	}
	out := map[string]any{"ok": true, "app": appRef(r), "user": user}
	if role != "" {
		out["role"] = role
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
