package jstest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/jsvm"
)

// stubTransport carries the handlers' outbound fetch in a test: to the
// handler that the running test set with t.stubFetch, run on the test's
// own runtime, and never to the network. config.fetch.allow has already
// passed the URL, so a test sees the same refusals as a server.
type stubTransport struct{ f *fileRun }

type stubAnswer struct {
	resp *http.Response
	err  error
}

func (s stubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		body = b
	}
	tr := s.f.cur.Load()
	if tr == nil {
		return nil, fmt.Errorf("no test is running to answer %s %s", req.Method, req.URL)
	}
	tr.mu.Lock()
	stub, vm := tr.stub, tr.vm
	tr.mu.Unlock()
	if stub == nil {
		return nil, fmt.Errorf("handoff test sends nothing off the machine: answer %s %s with t.stubFetch((req) => ({status: 200, body: {...}}))", req.Method, req.URL)
	}
	answer := make(chan stubAnswer, 1)
	ok := vm.Post(func(vm *jsvm.VM) error {
		callStub(vm, stub, req, body, answer)
		return nil
	})
	if !ok {
		return nil, fmt.Errorf("the test that stubbed fetch has ended; %s %s was not answered", req.Method, req.URL)
	}
	select {
	case a := <-answer:
		if a.resp != nil {
			a.resp.Request = req
		}
		return a.resp, a.err
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// callStub runs the stub on the test's runtime. Its answer may be a
// promise; the callbacks that settle it send the answer.
func callStub(vm *jsvm.VM, stub goja.Callable, req *http.Request, body []byte, answer chan<- stubAnswer) {
	headers := vm.NewObject()
	for k, v := range req.Header {
		_ = headers.Set(strings.ToLower(k), strings.Join(v, ", "))
	}
	r := vm.NewObject()
	_ = r.Set("method", req.Method)
	_ = r.Set("url", req.URL.String())
	_ = r.Set("headers", headers)
	_ = r.Set("body", string(body))
	_ = r.Set("json", func(goja.FunctionCall) goja.Value {
		v, err := vm.ParseJSON(body)
		if err != nil {
			panic(vm.NewTypeError("the request body is not JSON: %v", err))
		}
		return v
	})
	fail := func(err error) { answer <- stubAnswer{err: fmt.Errorf("t.stubFetch's handler failed: %v", err)} }
	v, err := stub(goja.Undefined(), r)
	if err != nil {
		fail(err)
		return
	}
	then := func(c goja.FunctionCall) goja.Value {
		resp, err := stubResponse(vm, c.Argument(0))
		if err != nil {
			fail(err)
		} else {
			answer <- stubAnswer{resp: resp}
		}
		return goja.Undefined()
	}
	reject := func(c goja.FunctionCall) goja.Value {
		fail(fmt.Errorf("%s", c.Argument(0).String()))
		return goja.Undefined()
	}
	if obj, ok := v.(*goja.Object); ok {
		if p, ok := promiseOf(obj); ok {
			switch p.State() {
			case goja.PromiseStateFulfilled:
				v = p.Result()
			case goja.PromiseStateRejected:
				reject(goja.FunctionCall{Arguments: []goja.Value{p.Result()}})
				return
			default:
				thenFn, _ := goja.AssertFunction(obj.Get("then"))
				if _, err := thenFn(obj, vm.ToValue(then), vm.ToValue(reject)); err != nil {
					fail(err)
				}
				return
			}
		}
	}
	then(goja.FunctionCall{Arguments: []goja.Value{v}})
}

// stubResponse reads a stub's answer: a string (200, that body) or
// {status, headers, body}, where a body that is not a string is sent as
// JSON.
func stubResponse(vm *jsvm.VM, v goja.Value) (*http.Response, error) {
	resp := &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}}
	var body []byte
	if s, ok := str(v); ok {
		body = []byte(s)
	} else if obj, ok := v.(*goja.Object); ok {
		for _, k := range obj.Keys() {
			switch k {
			case "status", "headers", "body":
			default:
				return nil, fmt.Errorf("the answer has an unknown field %q; answer {status, headers, body}", k)
			}
		}
		if st := obj.Get("status"); st != nil && !goja.IsUndefined(st) {
			resp.StatusCode = int(st.ToInteger())
		}
		if h, ok := obj.Get("headers").(*goja.Object); ok {
			for _, k := range h.Keys() {
				resp.Header.Set(k, h.Get(k).String())
			}
		}
		if b := obj.Get("body"); b != nil && !goja.IsUndefined(b) && !goja.IsNull(b) {
			if s, ok := str(b); ok {
				body = []byte(s)
			} else {
				var err error
				if body, err = vm.ToJSON(b); err != nil {
					return nil, fmt.Errorf("the answer's body cannot be written as JSON: %v", err)
				}
				if resp.Header.Get("Content-Type") == "" {
					resp.Header.Set("Content-Type", "application/json")
				}
			}
		}
	} else {
		return nil, fmt.Errorf("answer a string or {status, headers, body}, not %s", jsvm.TypeOf(v))
	}
	resp.Status = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// promiseOf is obj's promise, if it is one. Anything else is not
// exported: exporting a user's array can ask for any amount of memory.
func promiseOf(obj *goja.Object) (*goja.Promise, bool) {
	if obj.ExportType() != promiseType {
		return nil, false
	}
	p, ok := obj.Export().(*goja.Promise)
	return p, ok
}

var promiseType = reflect.TypeFor[*goja.Promise]()
