package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// The fetch lane (docs/architecture.md, "backend.js and delivery"): each app serves /api/* on its site
// with backend.js's fetch(request, ctx), for webhooks and small HTTP
// endpoints. The handler is the "fetch" backend actor: its writes pass
// ctx.requireBackend("fetch") in access.js, which no client can forge,
// and they act as the request's own user when it carried a valid
// credential, else anonymously. Like every handler it reads all of its
// own app and nothing of any other: its ctx is bound to the app whose
// URL was called.

// Fetch runs the app's fetch handler for req. a is whoever made the
// request: the anonymous actor, or the user (and device) of a valid
// credential. The handler gets that user with Handler "fetch" and none of
// a's other powers (an admin's request is not an admin's write).
func (e *Engine) Fetch(ctx context.Context, a Actor, appRef string, req appcode.FetchRequest) (appcode.FetchResponse, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return appcode.FetchResponse{}, err
	}
	be := app.backend()
	if be == nil || !be.Has(appcode.Fetch) {
		if app.code != nil && app.code.broken {
			return appcode.FetchResponse{}, errs.New(errs.Unavailable, "app %s: its backend.js does not load on this server; deploy a fixed version", appRef)
		}
		return appcode.FetchResponse{}, errs.New(errs.NotFound, "app %s has no fetch handler; export async function fetch(request, ctx) from its backend.js to serve /api/ on the site of %s", appRef, appRef)
	}
	hc := &handlerCtx{e: e, app: app, actor: Actor{User: a.User, Device: a.Device, App: a.App, Handler: appcode.Fetch}}
	defer clock.Busy(e.clock)() // a handler call (WaitIdle)
	resp, err := be.Fetch(ctx, req, hc)
	if err == nil && (resp.Status < 200 || resp.Status > 599) {
		// Only a response relayed from an outbound fetch can carry one.
		err = &errs.Error{Code: errs.AppError, Message: fmt.Sprintf("fetch answered status %d; a response's status is 200 to 599", resp.Status)}
	}
	if err == nil {
		return resp, nil
	}
	if ctx.Err() != nil {
		return appcode.FetchResponse{}, errs.New(errs.Unavailable, "the request ended before %s's fetch handler answered", appRef)
	}
	// The answer and the app's log line share an id, so that a caller's
	// report leads its owner to the whole error.
	id := errs.NewID()
	detail := err.Error()
	var ee *errs.Error
	if errors.As(err, &ee) && ee.Detail != "" {
		detail = ee.Detail
	}
	e.appLog(app, "fetch", "error", "fetch "+req.Method+" "+req.Path+" failed: "+detail,
		appcode.LogFields("method", req.Method, "path", req.Path, "errorId", id))
	switch {
	case ee != nil && ee.Code == errs.Unavailable:
		return appcode.FetchResponse{}, errs.New(errs.Unavailable, "app %s's fetch handler is being replaced or the server is stopping; retry", appRef)
	case ee != nil && ee.Code == errs.AppError:
		// The app's own failure, named without its own words: the caller
		// may be anyone on the internet.
		return appcode.FetchResponse{}, &errs.Error{Code: errs.AppError, ID: id, Detail: detail,
			Message: "the fetch handler of app " + appRef + " failed: " + ee.Message + "; its owner finds the whole error in `handoff logs --app " + appRef + "`"}
	}
	return appcode.FetchResponse{}, &errs.Error{Code: errs.Internal, ID: id, Detail: detail,
		Message: "the server failed to run the fetch handler of app " + appRef + "; retry, and if it persists give the error id to the server's operator"}
}
