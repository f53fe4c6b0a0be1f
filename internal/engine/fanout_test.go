package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
)

// TestFanOutBudget: an onChange that writes 6 documents per event turns
// one client write into a chain that the loop guard alone would let grow
// to 9,330 writes. Every write that follows from the client write, at any
// depth, spends one budget: past config.onChange.fanOut (100 by default)
// the handler's writes are refused with fan_out, counted and logged once.
// The next client write starts a chain with a budget of its own.
func TestFanOutBudget(t *testing.T) {
	t.Parallel()
	var refused atomic.Int64
	var msg atomic.Value
	env := newDeliveryEnv(t, &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		for i := range 6 {
			_, err := hc.Put(ctx, "fan", fmt.Sprintf("%s-%d", ev.DocID, i), []byte(`{}`), appcode.PutOptions{})
			if errs.Is(err, errs.FanOut) {
				refused.Add(1)
				msg.Store(err.Error())
				return nil
			}
			if err != nil {
				return err
			}
		}
		return nil
	}})
	ctx := context.Background()
	st := env.e.Store()
	a, err := st.App(ctx, "alice", "app")
	if err != nil {
		t.Fatal(err)
	}
	chain := func(id string, want int64) {
		t.Helper()
		if _, err := env.e.Put(ctx, env.owner, "alice/app", "in", id, []byte(`{}`), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the chain to come to rest", func() error {
			evs, err := env.e.Events(ctx, env.owner, "alice/app", false, 0, 10)
			if err == nil && len(evs) > 0 {
				err = fmt.Errorf("%d events waiting", len(evs))
			}
			return err
		})
		if seq, err := st.LastSeq(ctx, a.ID); err != nil || seq != want {
			t.Fatalf("last seq %d, %v; want %d: the client write and %d onChange writes", seq, err, want, appcode.DefaultFanOut)
		}
	}
	chain("a", 1+appcode.DefaultFanOut)
	if n := refused.Load(); n == 0 {
		t.Fatal("no write was refused")
	}
	if m, _ := msg.Load().(string); !strings.Contains(m, "fan-out budget") || !strings.Contains(m, "config.onChange.fanOut") {
		t.Fatalf("refusal: %q", m)
	}
	info, err := env.e.Schedule(ctx, env.owner, "alice/app")
	if err != nil || info.FanOutStopped != refused.Load() {
		t.Fatalf("FanOutStopped = %d, %v; want the %d refused writes", info.FanOutStopped, err, refused.Load())
	}
	chain("b", 2*(1+appcode.DefaultFanOut))
	eventually(t, "one log line per chain", func() error {
		lines, err := env.e.Logs(ctx, env.owner, "alice/app", 0, 1000)
		n := 0
		for _, l := range lines {
			if l.Source == "server" && strings.Contains(l.Message, "fan-out budget") {
				n++
			}
		}
		if err == nil && n != 2 {
			err = fmt.Errorf("%d lines", n)
		}
		return err
	})
}
