package sim

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
)

// Run is one call of a backend handler as the engine made it: which
// event or tick, when it started and ended in virtual time, and how it
// ended. A run that has not ended yet has a zero End.
type Run struct {
	Handler appcode.Handler // OnChange or Scheduled

	// onChange
	Seq     int64
	DB      string
	DocID   string
	Attempt int
	Doc     json.RawMessage // the event's doc, as committed

	// scheduled
	Planned time.Time

	Start, End time.Time
	Err        error
}

// Ended reports whether the run has returned.
func (r Run) Ended() bool { return !r.End.IsZero() }

// NextFunc runs the real backend.js handler.
type NextFunc func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error

// recorder records every handler call the engine makes, and optionally
// intercepts it (compiler.CompileBackend wraps each backend with it).
type recorder struct {
	clk      *clock.Virtual
	onChange func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext, next NextFunc) error

	mu   sync.Mutex
	runs []Run
}

func (r *recorder) begin(run Run) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	run.Start = r.clk.Now()
	r.runs = append(r.runs, run)
	return len(r.runs) - 1
}

func (r *recorder) end(i int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs[i].End, r.runs[i].Err = r.clk.Now(), err
}

func (r *recorder) all() []Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Run(nil), r.runs...)
}

type recBackend struct {
	appcode.Backend
	r *recorder
}

func (b *recBackend) OnChange(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
	i := b.r.begin(Run{Handler: appcode.OnChange, Seq: ev.Seq, DB: ev.DB, DocID: ev.DocID, Attempt: ev.Attempt,
		Doc: append(json.RawMessage(nil), ev.Doc...)})
	var err error
	if b.r.onChange != nil {
		err = b.r.onChange(ctx, ev, hc, b.Backend.OnChange)
	} else {
		err = b.Backend.OnChange(ctx, ev, hc)
	}
	b.r.end(i, err)
	return err
}

func (b *recBackend) Scheduled(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error {
	i := b.r.begin(Run{Handler: appcode.Scheduled, Planned: time.UnixMilli(ev.ScheduledTime).UTC()})
	err := b.Backend.Scheduled(ctx, ev, hc)
	b.r.end(i, err)
	return err
}
