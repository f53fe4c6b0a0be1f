package main

import (
	"context"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/placement"
	"github.com/handoff-run/handoff/internal/server"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// openPostgres opens the store on one PostgreSQL database, or a router
// placing apps over several (with a mover for `handoff app move`), and
// says where it is for the log.
func openPostgres(ctx context.Context, urls []string) (store.Store, server.Mover, string, error) {
	var names []string
	for _, u := range urls {
		names = append(names, postgres.Redact(u))
	}
	where := strings.Join(names, ", ")
	if len(urls) == 1 {
		n, err := placement.Spread(ctx, urls[0])
		if err != nil {
			return nil, nil, "", errs.New(errs.Unavailable, "cannot open the PostgreSQL store: %v", err)
		}
		if n > 1 {
			return nil, nil, "", errs.New(errs.Invalid, "the apps of %s are spread over %d databases: pass every --postgres URL, in the same order as the other nodes", where, n)
		}
		st, err := postgres.Open(ctx, urls[0])
		if err != nil {
			return nil, nil, "", errs.New(errs.Unavailable, "cannot open the PostgreSQL store: %v", err)
		}
		return st, nil, where, nil
	}
	r, err := placement.Open(ctx, urls)
	if err != nil {
		return nil, nil, "", errs.New(errs.Unavailable, "cannot open the PostgreSQL stores: %v", err)
	}
	return r, r, where, nil
}
