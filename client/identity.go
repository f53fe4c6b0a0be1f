package client

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
)

// Device is a registered device credential as the API shows it.
type Device struct {
	Name    string     `json:"name"`
	User    string     `json:"user"`
	App     string     `json:"app,omitempty"`
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// Secret names a secret of an app; values never come back.
type Secret struct {
	Name    string    `json:"name"`
	Updated time.Time `json:"updated"`
}

// Settings are the app settings to change; nil fields stay as they are.
type Settings struct {
	AccessTimeout *time.Duration
	Public        *bool
	// Origins replaces the web origins, besides the app's own site,
	// whose pages may call the API for the app; an empty list clears it.
	Origins *[]string
	// Signup is who may sign up as a visitor: closed, invite or open.
	Signup *string
	// JSMemory is the MiB one call of the app's JavaScript may grow the
	// heap by, 0 for the server's default; only a server admin may set it.
	JSMemory *int
}

// AddDevice registers k's public key as the caller's device k.Name,
// scoped to app when app is not "". The private key is not sent.
func (c *Client) AddDevice(ctx context.Context, k auth.DeviceKey, app string) (Device, error) {
	body := map[string]string{"name": k.Name, "publicKey": base64.RawURLEncoding.EncodeToString(k.Public())}
	if app != "" {
		if _, err := appPath(app); err != nil {
			return Device{}, err
		}
		body["app"] = app
	}
	var out Device
	err := c.do(ctx, http.MethodPost, "/v1/devices", nil, body, &out)
	return out, err
}

// Devices lists the caller's devices, revoked ones included.
func (c *Client) Devices(ctx context.Context) ([]Device, error) {
	var out struct {
		Devices []Device `json:"devices"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/devices", nil, nil, &out)
	return nonNil(out.Devices), err
}

// RevokeDevice revokes the caller's device name; its next request is
// refused.
func (c *Client) RevokeDevice(ctx context.Context, name string) error {
	if name == "" {
		return errs.New(errs.Invalid, "no device name given")
	}
	return c.do(ctx, http.MethodDelete, "/v1/devices/"+url.PathEscape(name), nil, nil, nil)
}

// SetSecret stores a secret of app. The value is sent once and never
// returned by any call.
func (c *Client) SetSecret(ctx context.Context, app, name, value string) error {
	p, err := secretPath(app, name)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPut, p, nil, map[string]string{"value": value}, nil)
}

// Secrets lists the names of app's secrets.
func (c *Client) Secrets(ctx context.Context, app string) ([]Secret, error) {
	p, err := appPath(app)
	if err != nil {
		return nil, err
	}
	var out struct {
		Secrets []Secret `json:"secrets"`
	}
	err = c.do(ctx, http.MethodGet, p+"/secrets", nil, nil, &out)
	return nonNil(out.Secrets), err
}

// RemoveSecret deletes a secret of app.
func (c *Client) RemoveSecret(ctx context.Context, app, name string) error {
	p, err := secretPath(app, name)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, p, nil, nil, nil)
}

func secretPath(app, name string) (string, error) {
	p, err := appPath(app)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", errs.New(errs.Invalid, "no secret name given")
	}
	return p + "/secrets/" + url.PathEscape(name), nil
}

// RemoveMember takes role from user in app; role "" takes every role.
func (c *Client) RemoveMember(ctx context.Context, app, user, role string) error {
	p, err := appPath(app)
	if err != nil {
		return err
	}
	if user == "" {
		return errs.New(errs.Invalid, "no user given")
	}
	q := url.Values{}
	if role != "" {
		q.Set("role", role)
	}
	return c.do(ctx, http.MethodDelete, p+"/members/"+url.PathEscape(user), q, nil, nil)
}

// SetSettings changes the app's settings given in s.
func (c *Client) SetSettings(ctx context.Context, app string, s Settings) error {
	p, err := appPath(app)
	if err != nil {
		return err
	}
	body := map[string]any{}
	if s.AccessTimeout != nil {
		body["accessTimeout"] = s.AccessTimeout.String()
	}
	if s.Public != nil {
		body["public"] = *s.Public
	}
	if s.Origins != nil {
		body["origins"] = append([]string{}, *s.Origins...)
	}
	if s.Signup != nil {
		body["signup"] = *s.Signup
	}
	if s.JSMemory != nil {
		body["jsMemory"] = *s.JSMemory
	}
	if len(body) == 0 {
		return errs.New(errs.Invalid, "no setting to change")
	}
	return c.do(ctx, http.MethodPut, p+"/settings", nil, body, nil)
}

// SetPublic opens app to anonymous readers of its public channels, or
// closes it.
func (c *Client) SetPublic(ctx context.Context, app string, public bool) error {
	return c.SetSettings(ctx, app, Settings{Public: &public})
}

// Invite makes a single-use invite code for sign-up to app, whose policy
// is "invite".
func (c *Client) Invite(ctx context.Context, app string) (string, error) {
	p, err := appPath(app)
	if err != nil {
		return "", err
	}
	var out struct {
		Code string `json:"code"`
	}
	err = c.do(ctx, http.MethodPost, p+"/invites", nil, nil, &out)
	return out.Code, err
}

// MoveApp moves app to database to, on a server that spreads apps over
// several, and returns the database it was in.
func (c *Client) MoveApp(ctx context.Context, app string, to int) (from int, err error) {
	p, err := appPath(app)
	if err != nil {
		return -1, err
	}
	var out struct {
		From int `json:"from"`
	}
	if err := c.do(ctx, http.MethodPost, p+"/move", nil, map[string]any{"to": to}, &out); err != nil {
		return -1, err
	}
	return out.From, nil
}
