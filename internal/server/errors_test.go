package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// brokenGets is a store whose document reads fail the way a database
// does, with text the client must never see.
type brokenGets struct{ *sqlite.Store }

const sqlText = `ERROR: relation "docs" does not exist at SELECT rev, deleted, body_text FROM docs WHERE app_id = $1`

func (brokenGets) Get(context.Context, int64, string, string) (*store.Doc, error) {
	return nil, errors.New(sqlText)
}

// TestServerFailuresCarryAnIDNotTheirText: a 500 says only that the
// server failed, with an error id; the log has the same id and the
// storage error's text. So does a failed document of a bulk write.
func TestServerFailuresCarryAnIDNotTheirText(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(brokenGets{st}, engine.Options{})
	if _, err := e.Bootstrap(context.Background(), adminToken); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(context.Background(), engine.Actor{User: engine.AdminUser, Admin: true}, "admin/jobs", false); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	v := &env{t: t, e: e, tokens: map[string]string{"admin": adminToken}, logs: logs}
	v.srv = New(e, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	v.ts = httptest.NewServer(v.srv)
	t.Cleanup(v.ts.Close)

	idRE := regexp.MustCompile(`error id ([0-9a-f]{10})\b`)
	check := func(what string, msg, id string) {
		t.Helper()
		m := idRE.FindStringSubmatch(msg)
		switch {
		case strings.Contains(msg, "relation") || strings.Contains(msg, "SELECT"):
			t.Errorf("%s: the storage error reached the client: %s", what, msg)
		case m == nil || m[1] != id:
			t.Errorf("%s: message %q and id %q, want the same error id in both", what, msg, id)
		case !strings.Contains(logs.String(), "error_id="+id) || !strings.Contains(logs.String(), "relation"):
			t.Errorf("%s: the log has no line with error id %s and the storage error:\n%s", what, id, logs)
		}
	}
	var out struct {
		Error struct{ Code, Message, ID string }
	}
	v.mustJSON(v.do("GET", "/v1/apps/admin/jobs/dbs/jobs/docs/x", "admin", ""), 500, &out)
	check("get", out.Error.Message, out.Error.ID)

	var bulk struct {
		Results []struct {
			OK    bool
			Error struct{ Code, Message, ID string }
		}
	}
	v.mustJSON(v.do("POST", "/v1/apps/admin/jobs/dbs/jobs/bulk", "admin", `{"docs":[{"_id":"a"},{"_id":"b"}]}`), 200, &bulk)
	if len(bulk.Results) != 2 || bulk.Results[1].OK || bulk.Results[1].Error.Code != "internal" {
		t.Fatalf("bulk = %+v", bulk)
	}
	check("bulk", bulk.Results[1].Error.Message, bulk.Results[1].Error.ID)
}
