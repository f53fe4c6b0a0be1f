package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// TestDeployVetsEachFileFirst: each source file of a deploy goes to
// VetCode before it is compiled here, and a file it refuses fails the
// deploy with nothing saved.
func TestDeployVetsEachFileFirst(t *testing.T) {
	t.Parallel()
	var vetted []string
	en := newFeedEnv(t, engine.Options{VetCode: func(_ context.Context, file, source string) error {
		vetted = append(vetted, file)
		if source == "export const bomb = 1" {
			return errs.New(errs.Invalid, "%s nests too deeply to compile", file)
		}
		return nil
	}})
	en.app("admin/app", false)
	ctx, e := en.ctx, en.e
	access := `export default function () { return { channels: ["all"] } }`
	if _, err := e.Deploy(ctx, feedAdmin, "admin/app", access, "export const bomb = 1"); !errs.Is(err, errs.Invalid) {
		t.Fatalf("deploy of a refused backend.js: got %v, want invalid", err)
	}
	if want := []string{"access.js", "backend.js"}; !slices.Equal(vetted, want) {
		t.Fatalf("vetted %v, want %v", vetted, want)
	}
	if vs, err := e.CodeVersions(ctx, feedAdmin, "admin/app"); err != nil || len(vs) != 0 {
		t.Fatalf("versions after a refused deploy: %v, %v; want none", vs, err)
	}
	if _, err := e.Deploy(ctx, feedAdmin, "admin/app", access, ""); err != nil {
		t.Fatal(err)
	}
}
