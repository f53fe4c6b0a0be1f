// Package client is a small Go client of the handoff HTTP API (v1). The
// CLI is built on it, and tests use it to drive a real server. Every
// failure comes back as an *errs.Error, so callers match on the same codes
// the server speaks: errors decoded from the server's JSON body keep its
// code, message and reason; a server that cannot be reached is
// errs.Unavailable with a message that says how to start one.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
)

// DefaultServer is where the CLI looks for a server when neither a flag
// nor HANDOFF_SERVER names one.
const DefaultServer = "http://127.0.0.1:8080"

// PathHeader carries the client's label for the ledger ("cli", "import");
// the server keeps only the labels it knows.
const PathHeader = "X-Handoff-Path"

// Client talks to one handoff server with one credential. It is safe for
// concurrent use as long as SetPath is not called concurrently.
type Client struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string
	path  string
	ua    string
	hc    *http.Client
	// device, when set, signs every request instead of sending token.
	device *auth.DeviceKey
	// credErr, when set, fails every request: the credential given could
	// not be used (a damaged HANDOFF_DEVICE, say).
	credErr error
	now     func() time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithPath sets the X-Handoff-Path label sent with every request.
func WithPath(p string) Option { return func(c *Client) { c.path = p } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// WithDevice makes the client sign every request with the device key
// (Authorization: Device ...) instead of sending a token. Each signature
// covers that one request (method, path and query, body) and is fresh
// for auth.TokenLifetime, so the key itself never travels.
func WithDevice(k auth.DeviceKey) Option {
	return func(c *Client) { c.device = &k }
}

// WithCredentialError makes every request fail with err before anything
// is sent: for a caller whose credential could not be read, so that it
// never falls back to anonymous requests.
func WithCredentialError(err error) Option {
	return func(c *Client) {
		var e *errs.Error
		if !errors.As(err, &e) {
			e = errs.New(errs.Unauthorized, "%v", err)
		}
		c.credErr = e
	}
}

// WithClock replaces the time device signatures are dated with (tests).
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// New returns a client of the server at baseURL ("http://host:port"; a
// missing scheme means http). An empty token makes anonymous requests.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: NormalizeURL(baseURL), token: token, ua: "handoff-go-client", hc: http.DefaultClient, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c
}

// NormalizeURL adds http:// to a bare host:port and drops trailing slashes.
func NormalizeURL(u string) string {
	u = strings.TrimSpace(u)
	if u == "" {
		u = DefaultServer
	}
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	return strings.TrimRight(u, "/")
}

// SetPath changes the X-Handoff-Path label of later requests.
func (c *Client) SetPath(p string) { c.path = p }

// Path is the current X-Handoff-Path label.
func (c *Client) Path() string { return c.path }

// WithPathLabel returns a copy of c that sends path as X-Handoff-Path.
func (c *Client) WithPathLabel(path string) *Client {
	cp := *c
	cp.path = path
	return &cp
}

// Device is the device the client signs with, if any.
func (c *Client) Device() (auth.DeviceKey, bool) {
	if c.device == nil {
		return auth.DeviceKey{}, false
	}
	return *c.device, true
}

// authorize sets the request's credential: a device signature over its
// method, target and body, or the bearer token.
func (c *Client) authorize(req *http.Request, body []byte) error {
	if c.credErr != nil {
		return c.credErr
	}
	switch {
	case c.device != nil:
		req.Header.Set("Authorization", c.device.Sign(req.Method, req.URL.RequestURI(), body, c.now()))
	case c.token != "":
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return nil
}

// appPath turns "owner/name" into "/v1/apps/owner/name". A ref without a
// slash is refused here: it could only ever reach a wrong route.
func appPath(app string) (string, error) {
	owner, name, ok := strings.Cut(app, "/")
	if !ok || owner == "" || name == "" {
		return "", errs.New(errs.Invalid, "app %q is not of the form owner/name; pass --app owner/name", app)
	}
	return "/v1/apps/" + url.PathEscape(owner) + "/" + url.PathEscape(name), nil
}

func dbPath(app, db string) (string, error) {
	p, err := appPath(app)
	if err != nil {
		return "", err
	}
	if db == "" {
		return "", errs.New(errs.Invalid, "no database given; pass --db NAME")
	}
	return p + "/dbs/" + url.PathEscape(db), nil
}

func docPath(app, db, id string) (string, error) {
	p, err := dbPath(app, db)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", errs.New(errs.Invalid, "document id is empty; pass the id of the document")
	}
	// PathEscape turns '/' into %2F, so an id with slashes stays one
	// segment that the server's {id} wildcard unescapes. It leaves "." and
	// "..", which path cleaning would drop, so those are escaped by hand.
	seg := url.PathEscape(id)
	switch id {
	case ".":
		seg = "%2E"
	case "..":
		seg = "%2E%2E"
	}
	return p + "/docs/" + seg, nil
}

// do sends one request and decodes a 2xx JSON answer into out (when not
// nil). body, when not nil, is sent as JSON: []byte and json.RawMessage
// as they are, anything else marshalled.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return errs.New(errs.Internal, "the server at %s sent an answer to %s %s that is not the expected JSON: %v", c.base, method, path, err)
	}
	return nil
}

// send performs a request and returns the response when its status is
// 2xx; any other status becomes the *errs.Error of its body.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, body any) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	var b []byte
	if body != nil {
		switch v := body.(type) {
		case []byte:
			b = v
		case json.RawMessage:
			b = v
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				return nil, errs.New(errs.Invalid, "cannot encode the request: %v", err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, errs.New(errs.Invalid, "bad server address %q: %v; set --server or HANDOFF_SERVER to http://HOST:PORT", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if err := c.authorize(req, b); err != nil {
		return nil, err
	}
	if c.path != "" {
		req.Header.Set(PathHeader, c.path)
	}
	if c.ua != "" {
		req.Header.Set("User-Agent", c.ua)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errs.New(errs.Unavailable, "the request to %s was cancelled: %v", c.base, ctx.Err())
		}
		return nil, unreachable(c.base, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, decodeError(resp)
}

func unreachable(base string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return errs.New(errs.Unavailable,
		"the handoff server at %s is unreachable (%v); start one with `handoff serve`, or point --server or HANDOFF_SERVER at a running one", base, err)
}

// decodeError reads the API's error body {"error":{code,message,reason}}.
// A body of another shape (a proxy's HTML page, say) still gives a code,
// derived from the status.
func decodeError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var env struct {
		Error *errs.Error `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error != nil && env.Error.Code != "" {
		return env.Error
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &errs.Error{Code: codeOfStatus(resp.StatusCode),
		Message: fmt.Sprintf("the server answered %s %s with status %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, msg)}
}

func codeOfStatus(status int) errs.Code {
	switch status {
	case http.StatusBadRequest:
		return errs.Invalid
	case http.StatusUnauthorized:
		return errs.Unauthorized
	case http.StatusForbidden:
		return errs.Forbidden
	case http.StatusNotFound:
		return errs.NotFound
	case http.StatusConflict:
		return errs.Conflict
	case http.StatusRequestEntityTooLarge:
		return errs.TooLarge
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return errs.Unavailable
	case http.StatusTooManyRequests:
		return errs.RateLimited
	}
	return errs.Internal
}
