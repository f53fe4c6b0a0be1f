package client_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/server"
	"github.com/handoff-run/handoff/store/sqlite"
)

// TestQueryRangeAndPrefix pages through range and prefix queries on the
// real server: by value then id, each page's cursor resuming the next.
func TestQueryRangeAndPrefix(t *testing.T) {
	ctx := context.Background()
	c := client.New(realServer(t), "hnd_admin")
	if _, err := c.CreateApp(ctx, "admin/shop", false); err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{
		"a": `{"price":30,"sku":"tea-green"}`, "b": `{"price":5,"sku":"tea-black"}`,
		"c": `{"price":12.5,"sku":"coffee"}`, "d": `{"price":12.5,"sku":"tea"}`, "e": `{"price":"n/a","sku":"teapot"}`,
	}
	for id, body := range docs {
		if _, err := c.Put(ctx, "admin/shop", "items", id, json.RawMessage(body), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	all := func(page func(after string) (client.Page, error)) []string {
		var ids []string
		for after := ""; ; {
			p, err := page(after)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range p.Docs {
				var h struct {
					ID string `json:"_id"`
				}
				json.Unmarshal(d, &h)
				ids = append(ids, h.ID)
			}
			if after = p.Next; after == "" {
				return ids
			}
		}
	}
	cases := []struct {
		name string
		page func(after string) (client.Page, error)
		want []string
	}{
		{"price in [5, 30)", func(after string) (client.Page, error) {
			return c.QueryRange(ctx, "admin/shop", "items", "price", json.RawMessage(`5`), json.RawMessage(`30`), 1, after)
		}, []string{"b", "c", "d"}},
		{"price from 12.5", func(after string) (client.Page, error) {
			return c.QueryRange(ctx, "admin/shop", "items", "price", json.RawMessage(`12.5`), nil, 2, after)
		}, []string{"c", "d", "a", "e"}},
		{"price to 12.5", func(after string) (client.Page, error) {
			return c.QueryRange(ctx, "admin/shop", "items", "price", nil, json.RawMessage(`12.5`), 2, after)
		}, []string{"b"}},
		{"sku prefix tea", func(after string) (client.Page, error) {
			return c.QueryPrefix(ctx, "admin/shop", "items", "sku", "tea", 1, after)
		}, []string{"d", "b", "a", "e"}},
	}
	for _, tc := range cases {
		if got := all(tc.page); !slices.Equal(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	_, err := c.QueryRange(ctx, "admin/shop", "items", "price", json.RawMessage(`true`), nil, 0, "")
	if errs.CodeOf(err) != errs.Invalid {
		t.Errorf("range from true: %v, want invalid", err)
	}
}

// realServer starts the HTTP API on a fresh SQLite store, with admin
// token hnd_admin, and returns its URL.
func realServer(t *testing.T) string {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng := engine.New(st, engine.Options{})
	if _, err := eng.Bootstrap(context.Background(), "hnd_admin"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(eng, server.Options{}))
	t.Cleanup(srv.Close)
	return srv.URL
}
