package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/jsvm"
)

// The global fetch of backend.js: outbound HTTP from handlers, limited to
// the hosts of config.fetch.allow, with a timeout and a size limit on the
// response. The limits run on the real clock: they guard the server's
// resources, not the app's protocol, and a virtual clock must not hold a
// real connection open forever. The work happens off the runtime
// (jsvm.VM.Async), so a handler may await several calls at once, and a
// call that outlives its handler is cancelled with it.

// maxRedirects bounds the redirects one fetch follows.
const maxRedirects = 10

// outbound is the transport of every handler's fetch. It connects
// directly (no proxy from the environment), so the allow list says
// exactly which hosts are reached, and it never connects to link-local,
// multicast or unspecified addresses (checked on the address dialled,
// after DNS): that is where cloud metadata services answer, and no app's
// allow list can open them, not even through a name that resolves there.
var outbound = &http.Transport{
	Proxy:                 nil,
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: dialGuard}).DialContext,
	ForceAttemptHTTP2:     true,
	MaxIdleConns:          100,
	MaxIdleConnsPerHost:   10,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
}

// dialGuard refuses to connect to addresses no handler may reach.
func dialGuard(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fetchErrorf("refused", "cannot check the address %s", address)
	}
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return fetchErrorf("refused", "%s is a link-local, multicast or unspecified address, which handlers may never call", ip)
	}
	return nil
}

// fetchError is how fetch rejects: a TypeError, as the standard's
// network errors are, with a .code a handler can branch on.
type fetchError struct {
	code string // "refused", "timeout", "too_large", "redirect", "network", "invalid"
	msg  string
}

func (e *fetchError) Error() string { return e.msg }

func (e *fetchError) JSValue(vm *jsvm.VM) goja.Value {
	o := vm.NewTypeError(e.msg)
	_ = o.Set("code", e.code)
	return o
}

func fetchErrorf(code, format string, args ...any) *fetchError {
	return &fetchError{code: code, msg: "fetch: " + fmt.Sprintf(format, args...)}
}

// fetchResult is a response read whole.
type fetchResult struct {
	status     int
	statusText string
	url        string
	redirected bool
	headers    [][2]string
	body       []byte
}

// hostFetch(url, method, headers, body, redirect) → a promise of the raw
// response, which web.js wraps in a Response.
func (rt *runtime) hostFetch(fc goja.FunctionCall) goja.Value {
	vm := rt.vm
	reject := func(err *fetchError) goja.Value {
		p, _, rej := vm.NewPromise()
		_ = rej(err.JSValue(vm))
		return vm.ToValue(p)
	}
	if rt.cur.Load() == nil {
		return reject(fetchErrorf("invalid", "fetch works only while a handler runs, not when the module loads"))
	}
	cfg := rt.b.cfg.Fetch
	raw := fc.Argument(0).String()
	method := fc.Argument(1).String()
	headers, err := pairs(fc.Argument(2))
	if err != nil {
		return reject(fetchErrorf("invalid", "%v", err))
	}
	var body []byte
	if v := fc.Argument(3); !goja.IsNull(v) && !goja.IsUndefined(v) {
		body = bytes.Clone(bytesArg(vm, v))
	}
	redirect := fc.Argument(4).String()
	u, ferr := checkURL(raw, cfg.Allow, rt.b.file)
	if ferr != nil {
		return reject(ferr)
	}
	return vm.Async(func(ctx context.Context) (any, error) {
		res, err := doFetch(ctx, fetchSpec{
			method: method, url: u, headers: headers, body: body, redirect: redirect,
			allow: cfg.Allow, timeout: cfg.Timeout, maxBytes: cfg.MaxBytes, file: rt.b.file,
			transport: rt.b.c.o.Transport,
		})
		if err != nil {
			return nil, err
		}
		return jsvm.Settler(func(vm *jsvm.VM) (goja.Value, error) {
			o := vm.NewObject()
			for k, v := range map[string]any{
				"status": res.status, "statusText": res.statusText, "url": res.url,
				"redirected": res.redirected, "headers": pairsValue(vm, res.headers),
				"body": vm.NewArrayBuffer(res.body),
			} {
				if err := o.Set(k, v); err != nil {
					return nil, err
				}
			}
			return o, nil
		}), nil
	})
}

// checkURL parses an absolute http(s) URL and checks its host against the
// allow list.
func checkURL(raw string, allow []string, file string) (*url.URL, *fetchError) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fetchErrorf("invalid", "%q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fetchErrorf("invalid", "%q is not an absolute http or https URL; write the whole URL, e.g. https://api.example.com/v1/items", raw)
	}
	if u.User != nil {
		return nil, fetchErrorf("invalid", "the URL carries a user name or password; send credentials in a header instead")
	}
	if !allowed(allow, u) {
		return nil, refusedHost(u, allow, file)
	}
	return u, nil
}

func refusedHost(u *url.URL, allow []string, file string) *fetchError {
	list := "none"
	if len(allow) > 0 {
		list = strings.Join(allow, ", ")
	}
	return fetchErrorf("refused", "host %s is not allowed (config.fetch.allow of %s lists %s); add %q to config.fetch.allow to call it",
		u.Host, file, list, u.Host)
}

type fetchSpec struct {
	method   string
	url      *url.URL
	headers  [][2]string
	body     []byte
	redirect string // "follow", "error" or "manual"
	allow    []string
	timeout  time.Duration
	maxBytes int64
	file     string
	// transport replaces the network (Options.Transport); nil: outbound.
	transport http.RoundTripper
}

// doFetch makes the request and reads the whole response, within the
// timeout and the size limit.
func doFetch(ctx context.Context, s fetchSpec) (*fetchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var body io.Reader
	if s.body != nil {
		body = bytes.NewReader(s.body)
	}
	req, err := http.NewRequestWithContext(ctx, s.method, s.url.String(), body)
	if err != nil {
		return nil, fetchErrorf("invalid", "%v", err)
	}
	for _, h := range s.headers {
		req.Header.Add(h[0], h[1])
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "handoff")
	}
	var transport http.RoundTripper = outbound
	if s.transport != nil {
		transport = s.transport
	}
	client := &http.Client{Transport: transport, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		switch s.redirect {
		case "error":
			return fetchErrorf("redirect", "%s redirected to %s, and redirect is \"error\"", via[len(via)-1].URL, r.URL)
		case "manual":
			return http.ErrUseLastResponse
		}
		if len(via) > maxRedirects {
			return fetchErrorf("redirect", "more than %d redirects from %s", maxRedirects, s.url)
		}
		if r.URL.Scheme != "http" && r.URL.Scheme != "https" {
			return fetchErrorf("redirect", "%s redirected to %s, which is not http or https", via[len(via)-1].URL, r.URL)
		}
		if !allowed(s.allow, r.URL) {
			fe := refusedHost(r.URL, s.allow, s.file)
			fe.msg = fmt.Sprintf("fetch: %s redirected to %s; ", via[len(via)-1].URL, r.URL) + strings.TrimPrefix(fe.msg, "fetch: ")
			return fe
		}
		return nil
	}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, transportError(ctx, err, s)
	}
	defer resp.Body.Close()
	if resp.ContentLength > s.maxBytes {
		return nil, tooLarge(s, resp.ContentLength)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes+1))
	if err != nil {
		return nil, transportError(ctx, err, s)
	}
	if int64(len(b)) > s.maxBytes {
		return nil, tooLarge(s, -1)
	}
	res := &fetchResult{status: resp.StatusCode, statusText: http.StatusText(resp.StatusCode), url: resp.Request.URL.String(),
		redirected: resp.Request.URL.String() != s.url.String(), body: b}
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			res.headers = append(res.headers, [2]string{strings.ToLower(k), v})
		}
	}
	return res, nil
}

func tooLarge(s fetchSpec, n int64) *fetchError {
	size := "is larger than"
	if n >= 0 {
		size = fmt.Sprintf("is %d bytes, over", n)
	}
	return fetchErrorf("too_large", "the response of %s %s %s the limit of %d bytes; raise config.fetch.maxBytes in %s if it should be allowed",
		s.method, s.url, size, s.maxBytes, s.file)
}

// transportError words a failed request: our own refusal of a redirect,
// the timeout, or the network's error.
func transportError(ctx context.Context, err error, s fetchSpec) error {
	var fe *fetchError
	if errors.As(err, &fe) {
		return fe
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fetchErrorf("timeout", "%s %s did not finish within %v; raise config.fetch.timeout in %s if it needs longer", s.method, s.url, s.timeout, s.file)
	}
	if ctx.Err() != nil {
		return fetchErrorf("network", "%s %s was cancelled: the handler ended", s.method, s.url)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fetchErrorf("network", "%s %s failed: %v", s.method, s.url, err)
}
