package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/examples"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/enginehook"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store"
)

// jobsAdmin is who sets a run up and reads its outbox.
var jobsAdmin = engine.Actor{User: engine.AdminUser, Admin: true, Path: "cli"}

// startJobs starts the engine of a run on st, with the job app live and
// its owner a user: examples/jobs deployed as JavaScript, or the same app
// in Go (gojobs.go) opened as a program embedding handoff would. stop
// stops the engine and leaves st open.
func startJobs(ctx context.Context, st store.Store, o JobsOptions, onDelivery func(time.Duration)) (e *engine.Engine, stop func(), err error) {
	if o.Handlers == HandlersGo {
		var apps []handoff.App
		for k := range o.Apps {
			apps = append(apps, goJobsApp(appName(k)))
		}
		h, err := handoff.New(ctx, st, handoff.Options{Apps: apps, Logger: o.Logger, OnDelivery: onDelivery})
		if err != nil {
			return nil, nil, fmt.Errorf("opening the Go job app: %w", err)
		}
		return enginehook.Engine(h), func() { h.Close() }, nil
	}
	accessJS, err := examples.Jobs.ReadFile("jobs/access.js")
	if err != nil {
		return nil, nil, err
	}
	backendJS, err := examples.Jobs.ReadFile("jobs/backend.js")
	if err != nil {
		return nil, nil, err
	}
	e = engine.New(st, engine.Options{
		Logger:     o.Logger,
		Code:       jsapp.New(jsapp.Options{Backend: backend.Options{Logger: o.Logger}}),
		OnDelivery: onDelivery,
	})
	if _, err := e.Bootstrap(ctx, ""); err != nil {
		return nil, nil, err
	}
	if _, err := e.AddUser(ctx, jobsAdmin, jobsOwner); err != nil {
		return nil, nil, err
	}
	for k := range o.Apps {
		if _, err := e.CreateApp(ctx, jobsAdmin, appName(k), false); err != nil {
			return nil, nil, err
		}
		if _, err := e.Deploy(ctx, jobsAdmin, appName(k), string(accessJS), string(backendJS)); err != nil {
			return nil, nil, fmt.Errorf("deploying examples/jobs: %w", err)
		}
	}
	if err := e.Start(ctx); err != nil {
		return nil, nil, err
	}
	return e, e.Close, nil
}
