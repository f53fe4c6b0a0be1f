package engine

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

// Passkeys are a second way for a visitor to sign in (WebAuthn). The
// relying party is the app's site, so a passkey made on one app's page
// is useless on every other app's.

// PasskeyRP names the relying party of a ceremony: the app's site.
type PasskeyRP struct {
	ID     string // the site's host without port, e.g. jobs--alice.localhost
	Origin string // scheme://host[:port] of the site
}

// CeremonyLifetime is how long a visitor has between a ceremony's begin
// and finish.
const CeremonyLifetime = 5 * time.Minute

const (
	ticketPasskeyAdd    = "passkey-add"
	ticketPasskeySignIn = "passkey-signin"
)

// Ceremony is what a begin returns: the options for the browser's
// navigator.credentials call and the id to send back with its answer.
type Ceremony struct {
	ID      string `json:"ceremony"`
	Options any    `json:"options"`
}

// passkeyUser is a visitor as the WebAuthn library sees it.
type passkeyUser struct {
	id    string
	name  string
	creds []webauthn.Credential
}

// WebAuthnID is a hash of the visitor id: a user handle must be at most
// 64 bytes and should not be personal data.
func (u *passkeyUser) WebAuthnID() []byte {
	h := sha256.Sum256([]byte(u.id))
	return h[:]
}
func (u *passkeyUser) WebAuthnName() string                       { return u.name }
func (u *passkeyUser) WebAuthnDisplayName() string                { return u.name }
func (u *passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

func (e *Engine) passkeyUser(ctx context.Context, id, name string) (*passkeyUser, error) {
	ps, err := e.st.Passkeys(ctx, id)
	if err != nil {
		return nil, internal(err)
	}
	u := &passkeyUser{id: id, name: name}
	for _, p := range ps {
		var c webauthn.Credential
		if err := json.Unmarshal(p.Data, &c); err != nil {
			return nil, internal(err)
		}
		u.creds = append(u.creds, c)
	}
	return u, nil
}

// relyingParty returns the app and the WebAuthn relying party of its
// site.
func (e *Engine) relyingParty(ctx context.Context, appRef string, rp PasskeyRP) (*appState, *webauthn.WebAuthn, error) {
	app, err := e.app(ctx, appRef)
	if err != nil {
		return nil, nil, err
	}
	w, err := webauthn.New(&webauthn.Config{RPID: rp.ID, RPDisplayName: appRef, RPOrigins: []string{rp.Origin}})
	if err != nil {
		return nil, nil, &errs.Error{Code: errs.Internal, Detail: err.Error(),
			Message: "the app's site " + rp.Origin + " cannot hold passkeys; tell the server's operator"}
	}
	return app, w, nil
}

// putCeremony keeps a ceremony's state until its finish, on the engine's
// clock. The library's own expiry reads the wall clock, so it is cleared.
func (e *Engine) putCeremony(ctx context.Context, appID int64, kind, user string, s *webauthn.SessionData, options any) (Ceremony, error) {
	s.Expires = time.Time{}
	data, err := json.Marshal(s)
	if err != nil {
		return Ceremony{}, internal(err)
	}
	id := NewToken()
	now := e.clock.Now()
	err = e.st.PutTicket(ctx, store.Ticket{AppID: appID, Kind: kind, Hash: HashToken(id), User: user, Data: data,
		Created: now, Expires: now.Add(CeremonyLifetime)})
	if err != nil {
		return Ceremony{}, internal(err)
	}
	return Ceremony{ID: id, Options: options}, nil
}

// takeCeremony returns a ceremony's state once.
func (e *Engine) takeCeremony(ctx context.Context, appID int64, kind, id string) (*store.Ticket, *webauthn.SessionData, error) {
	t, err := e.st.TakeTicket(ctx, appID, kind, HashToken(id), e.clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, errs.New(errs.Invalid, "the passkey ceremony is unknown, used or older than %v; start again", CeremonyLifetime)
	}
	if err != nil {
		return nil, nil, internal(err)
	}
	var s webauthn.SessionData
	if err := json.Unmarshal(t.Data, &s); err != nil {
		return nil, nil, internal(err)
	}
	return t, &s, nil
}

// visitorName checks that a is a visitor of appRef and returns their
// name in it.
func visitorName(a Actor, appRef string) (string, error) {
	if err := a.Scoped(appRef); err != nil {
		return "", err
	}
	if !a.Visitor() {
		if a.User == "" {
			return "", errs.New(errs.Unauthorized, "adding a passkey needs a visitor's sign-in; sign in to %s first", appRef)
		}
		return "", errs.New(errs.Invalid, "passkeys are for visitors of %s; user %s signs in with a token", appRef, a.User)
	}
	name, _, _ := strings.Cut(a.User, "@")
	return name, nil
}

// BeginPasskeyAdd starts adding a passkey for the signed-in visitor a.
func (e *Engine) BeginPasskeyAdd(ctx context.Context, a Actor, appRef string, rp PasskeyRP) (Ceremony, error) {
	name, err := visitorName(a, appRef)
	if err != nil {
		return Ceremony{}, err
	}
	app, w, err := e.relyingParty(ctx, appRef, rp)
	if err != nil {
		return Ceremony{}, err
	}
	u, err := e.passkeyUser(ctx, a.User, name)
	if err != nil {
		return Ceremony{}, err
	}
	var exclude []protocol.CredentialDescriptor
	for _, c := range u.creds {
		exclude = append(exclude, c.Descriptor())
	}
	creation, session, err := w.BeginRegistration(u,
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired),
		webauthn.WithExclusions(exclude))
	if err != nil {
		return Ceremony{}, internal(err)
	}
	return e.putCeremony(ctx, app.ID, ticketPasskeyAdd, a.User, session, creation)
}

// FinishPasskeyAdd checks the browser's answer to BeginPasskeyAdd and
// stores the new passkey.
func (e *Engine) FinishPasskeyAdd(ctx context.Context, a Actor, appRef string, rp PasskeyRP, ceremony string, response []byte) error {
	name, err := visitorName(a, appRef)
	if err != nil {
		return err
	}
	app, w, err := e.relyingParty(ctx, appRef, rp)
	if err != nil {
		return err
	}
	t, session, err := e.takeCeremony(ctx, app.ID, ticketPasskeyAdd, ceremony)
	if err != nil {
		return err
	}
	if t.User != a.User {
		return errs.New(errs.Invalid, "the passkey ceremony was started by another visitor; start again")
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		return passkeyRefused(err)
	}
	u, err := e.passkeyUser(ctx, a.User, name)
	if err != nil {
		return err
	}
	c, err := w.CreateCredential(u, *session, parsed)
	if err != nil {
		return passkeyRefused(err)
	}
	data, err := json.Marshal(c)
	if err != nil {
		return internal(err)
	}
	err = e.st.AddPasskey(ctx, store.Passkey{User: a.User, ID: c.ID, Data: data, Created: e.clock.Now()})
	if errors.Is(err, store.ErrExists) {
		return errs.New(errs.Exists, "this passkey is registered already")
	}
	if err != nil {
		return internal(err)
	}
	return nil
}

// BeginPasskeySignIn starts a sign-in with any passkey of the app's
// visitors: the browser offers the ones it holds for the site.
func (e *Engine) BeginPasskeySignIn(ctx context.Context, appRef string, rp PasskeyRP) (Ceremony, error) {
	app, w, err := e.relyingParty(ctx, appRef, rp)
	if err != nil {
		return Ceremony{}, err
	}
	assertion, session, err := w.BeginDiscoverableLogin()
	if err != nil {
		return Ceremony{}, internal(err)
	}
	return e.putCeremony(ctx, app.ID, ticketPasskeySignIn, "", session, assertion)
}

// FinishPasskeySignIn checks the browser's answer to BeginPasskeySignIn
// and returns a new token for the visitor whose passkey signed it.
func (e *Engine) FinishPasskeySignIn(ctx context.Context, appRef string, rp PasskeyRP, ceremony string, response []byte) (string, Visitor, error) {
	app, w, err := e.relyingParty(ctx, appRef, rp)
	if err != nil {
		return "", Visitor{}, err
	}
	_, session, err := e.takeCeremony(ctx, app.ID, ticketPasskeySignIn, ceremony)
	if err != nil {
		return "", Visitor{}, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return "", Visitor{}, passkeyRefused(err)
	}
	var found *passkeyUser
	lookup := func(rawID, userHandle []byte) (webauthn.User, error) {
		p, err := e.st.PasskeyByID(ctx, appRef, rawID)
		if err != nil {
			return nil, err
		}
		name, _, _ := strings.Cut(p.User, "@")
		found, err = e.passkeyUser(ctx, p.User, name)
		return found, err
	}
	_, c, err := w.ValidatePasskeyLogin(lookup, *session, parsed)
	if err != nil {
		return "", Visitor{}, passkeyRefused(err)
	}
	if c.Authenticator.CloneWarning {
		return "", Visitor{}, &errs.Error{Code: errs.Unauthorized, Reason: "passkey cloned",
			Message: "the passkey's counter went back, a sign that it was copied; sign in with your password and add a new passkey"}
	}
	data, err := json.Marshal(c)
	if err != nil {
		return "", Visitor{}, internal(err)
	}
	if err := e.st.UpdatePasskey(ctx, found.id, c.ID, data); err != nil {
		return "", Visitor{}, internal(err)
	}
	token, err := e.newToken(ctx, found.id)
	return token, visitorOf(appRef, found.name), err
}

// passkeyRefused is a browser answer that does not verify. The library's
// detail goes to the server's log; the visitor learns what to do.
func passkeyRefused(err error) error {
	detail := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		detail = pe.Details + ": " + pe.DevInfo
	}
	return &errs.Error{Code: errs.Unauthorized, Reason: "passkey not accepted", Detail: detail,
		Message: "the passkey was not accepted (" + detail + "); retry, or sign in with your password"}
}
