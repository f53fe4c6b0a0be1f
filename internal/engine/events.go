package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// EventInfo is an outbox event as the API shows it.
type EventInfo struct {
	Seq      int64     `json:"seq"`
	DB       string    `json:"db"`
	DocID    string    `json:"docId"`
	Rev      string    `json:"rev"`
	Deleted  bool      `json:"deleted,omitempty"`
	Depth    int       `json:"depth"`
	Attempts int       `json:"attempts"`
	NextAt   time.Time `json:"nextAt"`
	Dead     bool      `json:"dead"`
	// Running is set while a run of the event is in flight, on any node.
	Running   bool            `json:"running"`
	LastError string          `json:"lastError,omitempty"`
	Doc       json.RawMessage `json:"doc"`
}

// Events lists the app's waiting events, or its dead ones.
func (e *Engine) Events(ctx context.Context, a Actor, appRef string, dead bool, after int64, limit int) ([]EventInfo, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return nil, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return nil, err
	}
	if limit, err = pageLimit(limit); err != nil {
		return nil, err
	}
	evs, err := e.st.ListEvents(ctx, app.ID, dead, after, limit)
	if err != nil {
		return nil, internal(err)
	}
	out := make([]EventInfo, len(evs))
	for i, ev := range evs {
		r := ev.Rev
		out[i] = EventInfo{Seq: ev.Seq, DB: r.DB, DocID: r.ID, Rev: r.Rev, Deleted: r.Deleted, Depth: ev.Depth,
			Attempts: ev.Attempts, NextAt: ev.NextAt.UTC(), Dead: ev.Dead, Running: ev.Running, LastError: ev.LastError,
			Doc: appcode.DocJSON(r.ID, r.Rev, r.Deleted, r.Body)}
	}
	return out, nil
}

// ReplayEvent delivers a dead event again, with fresh attempts: the
// original event, as it was committed. Its onChange writes start a chain
// of their own, with a fresh fan-out budget.
func (e *Engine) ReplayEvent(ctx context.Context, a Actor, appRef string, seq int64) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	err = e.st.ReplayEvent(ctx, app.ID, seq, e.clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.NotFound, "app %s has no dead event with seq %d; list them with `handoff events --app %s --dead`", appRef, seq, appRef)
	}
	if err != nil {
		return internal(err)
	}
	e.forgetChain(app.ID, seq)
	e.runner.Poke(app.forRunner())
	return nil
}

// ScheduleInfo is the state of an app's scheduled handler.
type ScheduleInfo struct {
	Interval  string     `json:"interval,omitempty"`
	Running   bool       `json:"running"`
	LastRun   *time.Time `json:"lastRun,omitempty"`
	Planned   *time.Time `json:"planned,omitempty"`
	Duration  string     `json:"duration,omitempty"`
	LastError string     `json:"lastError,omitempty"`
	// LoopStopped counts the app's committed writes whose onChange the
	// loop guard held back, on this server since it started.
	LoopStopped int64 `json:"loopStopped"`
	// FanOutStopped counts the app's onChange writes that the fan-out
	// budget refused, on this server since it started.
	FanOutStopped int64 `json:"fanOutStopped"`
}

// Schedule reports the app's scheduled handler: its interval, last run
// and last error.
func (e *Engine) Schedule(ctx context.Context, a Actor, appRef string) (ScheduleInfo, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return ScheduleInfo{}, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return ScheduleInfo{}, err
	}
	e.loopMu.Lock()
	info := ScheduleInfo{LoopStopped: e.loopStopped[app.ID]}
	e.loopMu.Unlock()
	info.FanOutStopped = e.fanOutStopped(app.ID)
	if be := app.backend(); be != nil && be.Has(appcode.Scheduled) {
		info.Interval = be.Config().Scheduled.Interval.String()
	}
	t, err := e.st.LastTick(ctx, app.ID)
	if err != nil {
		return ScheduleInfo{}, internal(err)
	}
	info.Running = e.runner.TickRunning(app.ID)
	if t != nil {
		started, planned := t.Started.UTC(), t.Planned.UTC()
		info.LastRun, info.Planned = &started, &planned
		info.Duration = t.Duration.String()
		info.LastError = t.Error
	}
	return info, nil
}

// Transition is how often documents moved from one value of a field to
// another: the state machine as it was actually walked.
type Transition struct {
	From  json.RawMessage `json:"from"` // null for documents created so
	To    json.RawMessage `json:"to"`
	Count int64           `json:"count"`
}

// Transitions counts the moves of field across a database's ledger. Only
// the owner and the admin see them: they span every document.
func (e *Engine) Transitions(ctx context.Context, a Actor, appRef, db, field string) ([]Transition, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return nil, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return nil, err
	}
	if err := ValidDB(db); err != nil {
		return nil, err
	}
	if err := ValidField(field); err != nil {
		return nil, err
	}
	ts, err := e.st.Transitions(ctx, app.ID, db, field)
	if err != nil {
		return nil, internal(err)
	}
	out := make([]Transition, len(ts))
	for i, t := range ts {
		out[i] = Transition{From: json.RawMessage(t.From), To: json.RawMessage(t.To), Count: t.Count}
		if t.From == "" {
			out[i].From = json.RawMessage("null")
		}
	}
	return out, nil
}
