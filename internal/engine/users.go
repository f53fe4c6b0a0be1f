package engine

import (
	"context"

	"github.com/handoff-run/handoff/internal/identity"
)

// Users, tokens and devices are package identity's; the engine answers
// for them so that one value serves every call of the server.

// Actor is who makes a call (identity.Actor).
type Actor = identity.Actor

// UserInfo is a user as the API shows it.
type UserInfo = identity.UserInfo

// DeviceInfo is a registered device as the API shows it.
type DeviceInfo = identity.DeviceInfo

// AdminUser is the name of the user created on first start.
const AdminUser = identity.AdminUser

// NewToken returns a random bearer token.
func NewToken() string { return identity.NewToken() }

// HashToken is how tokens are stored: never in clear.
func HashToken(token string) []byte { return identity.HashToken(token) }

// ClientPath keeps the client-declared paths that are only labels.
func ClientPath(p string) string { return identity.ClientPath(p) }

// Bootstrap creates the admin user on first start; see identity.
func (e *Engine) Bootstrap(ctx context.Context, token string) (string, error) {
	if token == "" {
		return e.id.Bootstrap(ctx, token)
	}
	// A chosen token replaces the admin's others, which other nodes'
	// feeds may hold.
	var t string
	err := e.revoking(ctx, AdminUser, func() (err error) {
		t, err = e.id.Bootstrap(ctx, token)
		return err
	})
	return t, err
}

// RotateToken gives user a new token and revokes their others.
func (e *Engine) RotateToken(ctx context.Context, a Actor, user string) (string, error) {
	var token string
	err := e.revoking(ctx, user, func() (err error) {
		token, err = e.id.RotateToken(ctx, a, user)
		return err
	})
	return token, err
}

// Authenticate maps a bearer token to its actor.
func (e *Engine) Authenticate(ctx context.Context, token string) (Actor, error) {
	return e.id.Authenticate(ctx, token)
}

// AddUser creates a user and returns the user's first token.
func (e *Engine) AddUser(ctx context.Context, a Actor, name string) (string, error) {
	return e.id.AddUser(ctx, a, name)
}

// Users lists every user with the apps they own.
func (e *Engine) Users(ctx context.Context, a Actor) ([]UserInfo, error) { return e.id.Users(ctx, a) }

// RemoveUser deletes a user who owns no app.
func (e *Engine) RemoveUser(ctx context.Context, a Actor, name string) error {
	return e.revoking(ctx, name, func() error { return e.id.RemoveUser(ctx, a, name) })
}

// AddDevice registers a device's public key for the calling user.
func (e *Engine) AddDevice(ctx context.Context, a Actor, name string, public []byte, appRef string) (DeviceInfo, error) {
	return e.id.AddDevice(ctx, a, name, public, appRef)
}

// Devices lists the calling user's devices.
func (e *Engine) Devices(ctx context.Context, a Actor) ([]DeviceInfo, error) {
	return e.id.Devices(ctx, a)
}

// RevokeDevice revokes one of the calling user's devices.
func (e *Engine) RevokeDevice(ctx context.Context, a Actor, name string) error {
	return e.revoking(ctx, a.User, func() error { return e.id.RevokeDevice(ctx, a, name) })
}

// AuthenticateDevice verifies a device-signed request.
func (e *Engine) AuthenticateDevice(ctx context.Context, cred, method, target string, body []byte) (Actor, error) {
	return e.id.AuthenticateDevice(ctx, cred, method, target, body)
}

// AuthenticateDeviceBody is AuthenticateDevice for a body still to come.
func (e *Engine) AuthenticateDeviceBody(ctx context.Context, cred, method, target string, body func() ([]byte, error)) (Actor, error) {
	return e.id.AuthenticateDeviceBody(ctx, cred, method, target, body)
}

// mayReadApp is identity's MayRead hook.
func (e *Engine) mayReadApp(ctx context.Context, a Actor, appRef string) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	return e.mayRead(a, app)
}
