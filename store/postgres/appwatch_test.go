package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// heardLog records what a node's watchers were told, in order.
type heardLog struct {
	mu  sync.Mutex
	log []string
}

func (h *heardLog) add(s string) {
	h.mu.Lock()
	h.log = append(h.log, s)
	h.mu.Unlock()
}

func (h *heardLog) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

func (h *heardLog) count(s string) int {
	n := 0
	for _, l := range h.get() {
		if l == s {
			n++
		}
	}
	return n
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// watchAll logs every callback of st: "c <app>" for a settings change,
// "g <app>" for a grant change, "s <app> <seq>" for a commit.
func watchAll(st *Store) *heardLog {
	h := &heardLog{}
	st.WatchApps(func(app int64) { h.add(fmt.Sprint("c ", app)) })
	st.WatchGrants(func(app int64) { h.add(fmt.Sprint("g ", app)) })
	st.Watch(func(app, seq int64) { h.add(fmt.Sprint("s ", app, " ", seq)) })
	return h
}

// TestAppChangesAcrossNodes: every change of an app's settings on A is
// told to B's and A's WatchApps, through NOTIFY or, when the notification
// is lost, the poll; commits and other apps' changes are not.
func TestAppChangesAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	app := newApp(t, a, "jobs")
	other := newApp(t, a, "other")
	if err := a.CreateUser(ctx, store.User{Name: "bob", Created: t0}); err != nil {
		t.Fatal(err)
	}
	ha, hb := watchAll(a), watchAll(b)
	changed := fmt.Sprint("c ", app)
	heard := b.watch.heard.Load()
	for _, c := range []struct {
		what string
		do   func() error
	}{
		{"add a member", func() error { return a.AddMember(ctx, app, "bob", "editor") }},
		{"give a second role", func() error { return a.AddMember(ctx, app, "bob", "reader") }},
		{"make it public", func() error { return a.SetPublic(ctx, app, true) }},
		{"set the access timeout", func() error { return a.SetAccessTimeout(ctx, app, 300*time.Millisecond) }},
		{"set a secret", func() error { return a.PutSecret(ctx, app, "KEY", []byte("v1"), t0) }},
		{"change the secret", func() error { return a.PutSecret(ctx, app, "KEY", []byte("v2"), t0) }},
		{"deploy", func() error {
			_, err := a.SaveCode(ctx, app, store.CodeVersion{Backend: "export function onChange() {}", Author: "alice", Created: t0})
			return err
		}},
		{"deploy again", func() error {
			_, err := a.SaveCode(ctx, app, store.CodeVersion{Backend: "// v2", Author: "alice", Created: t0})
			return err
		}},
		{"roll back", func() error { return a.ActivateCode(ctx, app, 1) }},
		{"remove the secret", func() error { return a.DeleteSecret(ctx, app, "KEY") }},
		{"remove a role", func() error { return a.RemoveMember(ctx, app, "bob", "editor") }},
		{"remove the member", func() error { return a.RemoveMember(ctx, app, "bob", "") }},
		{"make it private", func() error { return a.SetPublic(ctx, app, false) }},
	} {
		na, nb := ha.count(changed), hb.count(changed)
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		waitUntil(t, 10*time.Second, "B did not hear that A did this: "+c.what, func() bool { return hb.count(changed) > nb })
		waitUntil(t, 10*time.Second, "A's own watcher did not hear of this: "+c.what, func() bool { return ha.count(changed) > na })
	}
	if b.watch.heard.Load() == heard {
		t.Fatal("B heard of the changes only through the poll, not through NOTIFY")
	}

	// A commit is not a change of settings. Its announcement follows any
	// that its transaction made, so once B heard of it, B heard all.
	nb := hb.count(changed)
	seq, err := a.Commit(ctx, &store.Write{AppID: app, DB: "d", ID: "x", Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "B did not hear of the commit", func() bool { return hb.count(fmt.Sprint("s ", app, " ", seq)) == 1 })
	if n := hb.count(changed); n != nb {
		t.Fatalf("a commit was told to B as %d settings changes", n-nb)
	}
	// Setting what is already set changes nothing.
	if err := a.SetPublic(ctx, app, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, &store.Write{AppID: app, DB: "d", ID: "y", Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: t0}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "B did not hear of the commit", func() bool { return hb.count(fmt.Sprint("s ", app, " ", seq+1)) == 1 })
	if n := hb.count(changed); n != nb {
		t.Fatalf("setting public to what it was was told to B as %d changes", n-nb)
	}
	if n := hb.count(fmt.Sprint("c ", other)); n != 0 {
		t.Fatalf("B was told %d times that the untouched app changed", n)
	}

	// A change whose notification is lost: the poll finds it.
	if _, err := a.pool.Exec(ctx, `UPDATE apps SET conf = conf + 1 WHERE id = $1`, other); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*pollEvery, "B's poll did not find the unannounced change", func() bool { return hb.count(fmt.Sprint("c ", other)) == 1 })
}

// grantWrite is a write of doc id in app giving grants; deleted drops it.
func grantWrite(app int64, id, base, rev string, deleted bool, grants ...store.Grant) *store.Write {
	w := &store.Write{AppID: app, DB: "d", ID: id, BaseRev: base, Rev: rev, Deleted: deleted, Path: "http", Time: t0,
		Channels: []string{}, Grants: grants}
	if !deleted {
		w.Body = []byte(`{}`)
	}
	return w
}

// TestGrantChangesAcrossNodes: a commit that makes a grant appear or
// vanish is told to every node's WatchGrants before its Watch hears of
// the commit; a commit that leaves the grants in force as they were is
// not. A lost notification is covered by the poll, in the same order.
func TestGrantChangesAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	app := newApp(t, a, "jobs")
	ha, hb := watchAll(a), watchAll(b)
	g := store.Grant{Kind: "user", Principal: "bob", Channel: "c"}
	g2 := store.Grant{Kind: "role", Principal: "staff", Channel: "c"}
	steps := []struct {
		what    string
		w       *store.Write
		changed bool
	}{
		{"a document gives a grant", grantWrite(app, "g1", "", "1-a", false, g), true},
		{"it gives the same grant again", grantWrite(app, "g1", "1-a", "2-a", false, g), false},
		{"another document gives the same grant", grantWrite(app, "g2", "", "1-a", false, g), false},
		{"the first lets go of it, the second still gives it", grantWrite(app, "g1", "2-a", "3-a", false), false},
		{"a plain document", grantWrite(app, "p", "", "1-a", false), false},
		{"the second gives another grant as well", grantWrite(app, "g2", "1-a", "2-a", false, g, g2), true},
		{"the second is deleted", grantWrite(app, "g2", "2-a", "3-a", true), true},
	}
	var want []string
	for _, st := range steps {
		seq, err := a.Commit(ctx, st.w)
		if err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if st.w.GrantsChanged != st.changed {
			t.Fatalf("%s: GrantsChanged = %v, want %v", st.what, st.w.GrantsChanged, st.changed)
		}
		s := fmt.Sprint("s ", app, " ", seq)
		if st.changed {
			want = append(want, fmt.Sprint("g ", app))
		}
		want = append(want, s)
		waitUntil(t, 10*time.Second, "B did not hear of: "+st.what, func() bool { return hb.count(s) == 1 })
		if got := hb.get(); !slices.Equal(got, want) {
			t.Fatalf("after %q B heard\n%q\nwant\n%q", st.what, got, want)
		}
		// A told its own watchers as it committed.
		if got := ha.get(); !slices.Equal(got, want) {
			t.Fatalf("after %q A heard\n%q\nwant\n%q", st.what, got, want)
		}
	}

	// A grant change whose notifications are lost: the poll tells the
	// grant change first.
	seq := commitUnannounced(t, a, app)
	if _, err := a.pool.Exec(ctx, `UPDATE apps SET grants_seq = $2 WHERE id = $1`, app, seq); err != nil {
		t.Fatal(err)
	}
	want = append(want, fmt.Sprint("g ", app), fmt.Sprint("s ", app, " ", seq))
	waitUntil(t, 10*pollEvery, "B's poll did not find the unannounced commit", func() bool { return len(hb.get()) >= len(want) })
	if got := hb.get(); !slices.Equal(got, want) {
		t.Fatalf("after the poll B heard\n%q\nwant\n%q", got, want)
	}
}
