package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// fetchConcurrency is the number of runtimes serving an app's HTTP lane:
// how many of its requests run at once. More wait for a free runtime, as
// long as the client waits.
const fetchConcurrency = 4

// Fetch runs fetch(request, ctx) for one request of the app's HTTP lane
// and reads the response it returns: a Response, a plain {status,
// headers, body}, a string (text), or nothing (204). A body that is a
// plain object or array is sent as JSON.
func (b *Backend) Fetch(ctx context.Context, req appcode.FetchRequest, hc appcode.HandlerContext) (appcode.FetchResponse, error) {
	if b.serve == nil {
		return appcode.FetchResponse{}, errs.New(errs.Invalid, "%s exports no fetch function", b.file)
	}
	c := &call{hc: hc, handler: appcode.Fetch}
	var rt *runtime
	var resp appcode.FetchResponse
	err := b.serve.Do(ctx, jsvm.Call{
		Export:    "fetch",
		Deadline:  appcode.FetchRunTimeout,
		HeapLimit: c.heapLimit(),
		Group:     c.group(),
		Args: func(vm *jsvm.VM) ([]goja.Value, error) {
			var err error
			if rt, err = stateOf(vm); err != nil {
				return nil, err
			}
			rt.cur.Store(c)
			r, err := requestValue(vm, req)
			if err != nil {
				return nil, err
			}
			return []goja.Value{r, rt.ctx}, nil
		},
		Result: func(vm *jsvm.VM, v goja.Value) error {
			var err error
			resp, err = b.response(vm, v)
			return err
		},
	})
	if rt != nil {
		rt.cur.CompareAndSwap(c, nil)
	}
	c.stopTimers()
	if errors.Is(err, jsvm.ErrDeadline) {
		err = &limitError{err: err, msg: fmt.Sprintf("%s: fetch was stopped at its run limit of %v; answer sooner, and move slow work to onChange (write a document, answer 202)", b.file, appcode.FetchRunTimeout)}
	}
	return resp, appFailure(b.runError(appcode.Fetch, appcode.FetchRunTimeout, err))
}

// appFailure marks the failures of the app's own code as app_error: an
// exception, a run limit, a response it cannot send. The message names
// the failure but keeps the exception's own words (which may hold data
// or secrets) for the Detail, as the caller may be anyone; any other
// error is the server's and stays as it is.
func appFailure(err error) error {
	var je *jsvm.JSError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &je):
		what := "a value that is not an Error"
		if je.Name != "" {
			what = je.Name
		}
		at := je.File
		if je.Line > 0 {
			at = fmt.Sprintf("%s:%d:%d", je.File, je.Line, je.Column)
		}
		return &errs.Error{Code: errs.AppError, Message: at + ": fetch threw " + what, Detail: je.String()}
	case errors.Is(err, jsvm.ErrDeadline), errors.Is(err, jsvm.ErrStackOverflow),
		errors.Is(err, jsvm.ErrHeapLimit), errors.Is(err, jsvm.ErrNeverSettles):
		return &errs.Error{Code: errs.AppError, Message: err.Error(), Detail: err.Error()}
	}
	return err
}

// requestValue builds the handler's Request.
func requestValue(vm *jsvm.VM, req appcode.FetchRequest) (goja.Value, error) {
	w, err := webOf(vm)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(req.Header))
	for k := range req.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	var hs [][2]string
	for _, k := range names {
		for _, v := range req.Header[k] {
			hs = append(hs, [2]string{strings.ToLower(k), v})
		}
	}
	body := goja.Null()
	if req.Body != nil {
		body = vm.ToValue(vm.NewArrayBuffer(bytes.Clone(req.Body)))
	}
	path := req.Path
	if path == "" {
		path = "/"
	}
	return w.makeRequest(goja.Undefined(), vm.ToValue(req.Method), vm.ToValue(req.URL), vm.ToValue(path),
		pairsValue(vm, queryPairs(req.URL)), pairsValue(vm, hs), body)
}

// queryPairs are the URL's query parameters in their order; pairs that
// do not decode are kept as they are.
func queryPairs(raw string) [][2]string {
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return nil
	}
	var out [][2]string
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		out = append(out, [2]string{k, v})
	}
	return out
}

// response reads what the handler returned, through web.js's toWire, and
// copies it out of the runtime.
func (b *Backend) response(vm *jsvm.VM, v goja.Value) (appcode.FetchResponse, error) {
	w, err := webOf(vm)
	if err != nil {
		return appcode.FetchResponse{}, err
	}
	wire, err := w.toWire(goja.Undefined(), v)
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			return appcode.FetchResponse{}, errs.New(errs.AppError, "%s: fetch returned no usable response: %s", b.file, ex.Value())
		}
		return appcode.FetchResponse{}, err
	}
	o := wire.ToObject(vm.Runtime)
	resp := appcode.FetchResponse{Status: int(o.Get("status").ToInteger()), Header: map[string][]string{}}
	hs, err := pairs(o.Get("headers"))
	if err != nil {
		return appcode.FetchResponse{}, fmt.Errorf("%s: fetch response headers: %w", b.file, err)
	}
	for _, h := range hs {
		k := http.CanonicalHeaderKey(h[0])
		resp.Header[k] = append(resp.Header[k], h[1])
	}
	if bv := o.Get("body"); bv != nil && !goja.IsNull(bv) && !goja.IsUndefined(bv) {
		body, ok := []byte(nil), bv.ExportType() == bytesType
		if ok {
			body = bv.Export().([]byte)
		}
		if !ok {
			return appcode.FetchResponse{}, fmt.Errorf("%s: fetch response body is not bytes", b.file)
		}
		if len(body) > appcode.MaxFetchResponseBytes {
			return appcode.FetchResponse{}, errs.New(errs.AppError, "%s: fetch returned a body of %d bytes; the limit is %d", b.file, len(body), appcode.MaxFetchResponseBytes)
		}
		resp.Body = bytes.Clone(body)
	}
	return resp, nil
}
