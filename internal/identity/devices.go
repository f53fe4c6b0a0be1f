package identity

import (
	"context"
	"crypto/ed25519"
	"errors"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/store"
)

// DeviceInfo is a registered device as the API shows it.
type DeviceInfo struct {
	Name    string     `json:"name"`
	User    string     `json:"user"`
	App     string     `json:"app,omitempty"`
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

func deviceInfo(d store.Device) DeviceInfo {
	info := DeviceInfo{Name: d.Name, User: d.User, App: d.App, Created: d.Created.UTC()}
	if !d.Revoked.IsZero() {
		r := d.Revoked.UTC()
		info.Revoked = &r
	}
	return info
}

// signedIn refuses anonymous callers and devices: devices are managed by
// the person they belong to, with a token.
func signedIn(a Actor, what string) error {
	if a.User == "" {
		return errs.New(errs.Unauthorized, "%s needs a credential; pass a token (HANDOFF_TOKEN) or run `handoff login`", what)
	}
	if a.Device != "" {
		return &errs.Error{Code: errs.Forbidden, Reason: "devices cannot do this",
			Message: "a device cannot " + what + "; use your own token (HANDOFF_TOKEN) instead of HANDOFF_DEVICE"}
	}
	return a.Scoped("")
}

// AddDevice registers a device's public key for the calling user,
// optionally scoped to one app.
func (e *Service) AddDevice(ctx context.Context, a Actor, name string, public []byte, appRef string) (DeviceInfo, error) {
	if err := signedIn(a, "add devices"); err != nil {
		return DeviceInfo{}, err
	}
	if err := ValidUserName(name); err != nil {
		return DeviceInfo{}, errs.New(errs.Invalid, "device name %q must be 1-64 lowercase letters, digits or '-'", name)
	}
	if len(public) != ed25519.PublicKeySize {
		return DeviceInfo{}, errs.New(errs.Invalid, "the public key must be %d bytes of Ed25519; let `handoff device add` make it", ed25519.PublicKeySize)
	}
	if appRef != "" {
		if err := e.hooks.MayRead(ctx, a, appRef); err != nil {
			return DeviceInfo{}, err
		}
	}
	d := store.Device{User: a.User, Name: name, PublicKey: public, App: appRef, Created: e.clock.Now()}
	err := e.st.AddDevice(ctx, d)
	if errors.Is(err, store.ErrExists) {
		return DeviceInfo{}, errs.New(errs.Exists, "you already have a device named %q; revoke it first with `handoff device revoke %s`, or pick another name", name, name)
	}
	if err != nil {
		return DeviceInfo{}, errs.Storage(err)
	}
	return deviceInfo(d), nil
}

// Devices lists the calling user's devices, revoked ones included.
func (e *Service) Devices(ctx context.Context, a Actor) ([]DeviceInfo, error) {
	if err := signedIn(a, "list devices"); err != nil {
		return nil, err
	}
	ds, err := e.st.Devices(ctx, a.User)
	if err != nil {
		return nil, errs.Storage(err)
	}
	out := make([]DeviceInfo, len(ds))
	for i, d := range ds {
		out[i] = deviceInfo(d)
	}
	return out, nil
}

// RevokeDevice revokes one of the calling user's devices. The next
// request it signs is refused: devices are looked up on every request.
func (e *Service) RevokeDevice(ctx context.Context, a Actor, name string) error {
	if err := signedIn(a, "revoke devices"); err != nil {
		return err
	}
	err := store.ErrNotFound
	if ValidUserName(name) == nil { // device names follow the user name rule
		err = e.st.RevokeDevice(ctx, a.User, name, e.clock.Now())
	}
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.NotFound, "you have no device named %q that is still valid; list them with `handoff device list`", name)
	}
	if err != nil {
		return errs.Storage(err)
	}
	return nil
}

// AuthenticateDevice verifies a device-signed request: cred is the
// Authorization value after "Device ", target the request's path and
// query, body its bytes. Each token is accepted once.
func (e *Service) AuthenticateDevice(ctx context.Context, cred, method, target string, body []byte) (Actor, error) {
	return e.AuthenticateDeviceBody(ctx, cred, method, target, func() ([]byte, error) { return body, nil })
}

// AuthenticateDeviceBody is AuthenticateDevice for a body still to come:
// it calls body only once the rest of the token has verified, from a
// known and live device, so the caller may give a signer's body more time
// than a stranger's (HTTP bodies over slow links). An error of body is
// returned as it is.
func (e *Service) AuthenticateDeviceBody(ctx context.Context, cred, method, target string, body func() ([]byte, error)) (Actor, error) {
	s, err := auth.ParseSigned(cred)
	if err != nil {
		return Actor{}, errs.New(errs.Unauthorized, "%v", err)
	}
	var d *store.Device
	err = store.ErrNotFound
	if ValidUserName(s.User) == nil && ValidUserName(s.Device) == nil {
		d, err = e.st.Device(ctx, s.User, s.Device)
	}
	if errors.Is(err, store.ErrNotFound) {
		return Actor{}, errs.New(errs.Unauthorized, "device %s of user %s is not registered; add it with `handoff device add`", s.Device, s.User)
	}
	if err != nil {
		return Actor{}, errs.Storage(err)
	}
	if !d.Revoked.IsZero() {
		return Actor{}, errs.New(errs.Unauthorized, "device %s of user %s was revoked on %s; add a new device with `handoff device add`", d.Name, d.User, d.Revoked.UTC().Format(time.RFC3339))
	}
	now := e.clock.Now()
	if err := s.VerifyRequest(d.PublicKey, method, target, now); err != nil {
		return Actor{}, errs.New(errs.Unauthorized, "%v", err)
	}
	b, err := body()
	if err != nil {
		return Actor{}, err
	}
	if err := s.VerifyBody(b); err != nil {
		return Actor{}, errs.New(errs.Unauthorized, "%v", err)
	}
	replayed := errs.New(errs.Unauthorized, "this signed request was already used; sign each request anew")
	if !e.replays.Fresh(s.NonceKey(), now) {
		return Actor{}, replayed
	}
	// Other nodes may have seen it: the store keeps the tokens they used.
	if nk := e.caps.Nonces; nk != nil {
		fresh, err := nk.UseNonce(ctx, s.NonceKey(), now, now.Add(2*auth.TokenLifetime))
		if err != nil {
			return Actor{}, errs.Storage(err)
		}
		if !fresh {
			return Actor{}, replayed
		}
	}
	u, err := e.st.User(ctx, d.User)
	if err != nil {
		return Actor{}, errs.Storage(err)
	}
	return Actor{User: u.Name, Admin: u.Admin, Device: d.Name, App: d.App, deviceKey: string(d.PublicKey)}, nil
}
