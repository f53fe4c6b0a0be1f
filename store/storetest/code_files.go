package storetest

import (
	"bytes"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// testStoreCodeFiles: a code version keeps its static files, byte for
// byte (empty and binary files too), apart from other versions and other
// apps, across a rollback and a reopen.
func testStoreCodeFiles(t *testing.T, e *env) {
	app := e.app("alice", "site")
	other := e.app("bob", "site")
	v1files := map[string][]byte{"index.html": []byte("<h1>one</h1>"), "css/a.css": {}, "bin/x": {0, 1, 2, 255}}
	v1, err := e.st.SaveCode(e.ctx, app, store.CodeVersion{Files: v1files, Author: "alice", Created: e.tick()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SaveCode(e.ctx, other, store.CodeVersion{Files: map[string][]byte{"index.html": []byte("bob")}, Author: "bob", Created: e.tick()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SaveCode(e.ctx, app, store.CodeVersion{Access: "export default () => ({})", Author: "alice", Created: e.tick()}); err != nil {
		t.Fatal(err)
	}
	files := func(want map[string][]byte) {
		t.Helper()
		c, err := e.st.ActiveCode(e.ctx, app)
		if err != nil || c == nil {
			t.Fatalf("ActiveCode = %+v, %v", c, err)
		}
		if len(c.Files) != len(want) {
			t.Fatalf("files of version %d = %v, want %v", c.Version, c.Files, want)
		}
		for p, b := range want {
			got, ok := c.Files[p]
			if !ok || !bytes.Equal(got, b) || got == nil {
				t.Fatalf("file %q = %q (present %v), want %q", p, got, ok, b)
			}
		}
	}
	files(nil) // version 2 has none
	if err := e.st.ActivateCode(e.ctx, app, v1); err != nil {
		t.Fatal(err)
	}
	files(v1files)
	e.reopen()
	files(v1files)
	if vs, err := e.st.CodeVersions(e.ctx, app); err != nil || len(vs) != 2 || vs[0].Files != nil {
		t.Fatalf("CodeVersions = %+v, %v; want two versions without files", vs, err)
	}
}
