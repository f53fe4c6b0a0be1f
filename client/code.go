package client

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// CodeVersion is one deployed version of an app's code.
type CodeVersion struct {
	Version int       `json:"version"`
	Author  string    `json:"author"`
	Created time.Time `json:"created"`
	Active  bool      `json:"active"`
	Access  bool      `json:"access,omitempty"`
	Backend bool      `json:"backend,omitempty"`
	Files   int       `json:"files,omitempty"` // static files deployed with it
}

// Deploy uploads access.js and backend.js sources as the app's next
// version. Code that does not compile is refused (code invalid, with the
// file, line and column) and the live version stays.
func (c *Client) Deploy(ctx context.Context, app, access, backend string) (CodeVersion, error) {
	var out CodeVersion
	p, err := appPath(app)
	if err != nil {
		return out, err
	}
	err = c.do(ctx, http.MethodPost, p+"/code", nil, map[string]string{"access": access, "backend": backend}, &out)
	return out, err
}

// DeployFiles is Deploy with static files: files maps paths inside the
// app folder's public/ ("index.html", "css/site.css") to their contents,
// served on the app's site once the version is live.
func (c *Client) DeployFiles(ctx context.Context, app, access, backend string, files map[string][]byte) (CodeVersion, error) {
	var out CodeVersion
	p, err := appPath(app)
	if err != nil {
		return out, err
	}
	body := struct {
		Access  string            `json:"access"`
		Backend string            `json:"backend"`
		Files   map[string][]byte `json:"files,omitempty"`
	}{access, backend, files}
	err = c.do(ctx, http.MethodPost, p+"/code", nil, body, &out)
	return out, err
}

// CodeVersions lists the app's deployed versions, oldest first.
func (c *Client) CodeVersions(ctx context.Context, app string) ([]CodeVersion, error) {
	p, err := appPath(app)
	if err != nil {
		return nil, err
	}
	var out struct {
		Versions []CodeVersion `json:"versions"`
	}
	err = c.do(ctx, http.MethodGet, p+"/code", nil, nil, &out)
	return nonNil(out.Versions), err
}

// Activate makes an earlier version live again (a rollback).
func (c *Client) Activate(ctx context.Context, app string, version int) error {
	p, err := appPath(app)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, p+"/code/"+strconv.Itoa(version)+"/activate", nil, nil, nil)
}

// SetAccessTimeout sets the deadline of the app's access function; 0
// restores the default.
func (c *Client) SetAccessTimeout(ctx context.Context, app string, d time.Duration) error {
	p, err := appPath(app)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPut, p+"/settings", nil, map[string]string{"accessTimeout": d.String()}, nil)
}
