package server

import (
	"fmt"
	"os"
	"testing"
)

// waitResult waits until the last result pushed to window[name] is want
// (JSON), so a test follows a live result through its batches.
func (b *browser) waitResult(name, want string) {
	b.t.Helper()
	b.waitJS(name+" = "+want, fmt.Sprintf(`JSON.stringify((window[%s] || []).at(-1)) === %s`, jsString(name), jsString(want)))
}

// TestClientModuleLiveRangeAndPrefix: liveQuery over a range, a prefix,
// a key (both call shapes) and every document stays current as
// documents enter, move within and leave each result, sorted by value.
func TestClientModuleLiveRangeAndPrefix(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	const shop = "alice/shop"
	if _, err := s.e.CreateApp(s.ctx, consoleAdmin, shop, false); err != nil {
		t.Fatal(err)
	}
	s.put(shop, "items", "a", `{"price":50,"sku":"tea-green"}`)
	s.put(shop, "items", "b", `{"price":20,"sku":"teapot"}`)
	s.put(shop, "items", "c", `{"price":5,"sku":"coffee"}`)
	s.put(shop, "items", "d", `{"price":"n/a","sku":"tea"}`)

	b := newBrowser(t)
	b.open(s.ts.URL + "/client/handoff.js")
	b.eval(fmt.Sprintf(`(async () => {
		const { connect } = await import("/client/handoff.js");
		const app = connect({ server: location.origin, token: %s }).app("alice/shop");
		const db = app.db("items");
		const ids = (name) => { window[name] = []; return (docs) => window[name].push(docs.map((d) => d._id)); };
		window.stops = [
			db.liveQuery({ field: "price", from: 10, to: 100 }, ids("range")),
			db.liveQuery({ field: "price", to: 30 }, ids("below")),
			db.liveQuery({ field: "sku", prefix: "tea" }, ids("prefix")),
			db.liveQuery({}, ids("all")),
			db.liveQuery({ field: "sku", key: "coffee" }, ids("key")),
			app.liveQuery("items", "sku", "coffee", ids("oldKey")),
			app.liveQuery("items", { field: "sku", prefix: "co" }, ids("oldShape")),
		];
		return true;
	})()`, jsString(s.token)), nil)
	b.waitResult("range", `["b","a"]`)
	b.waitResult("below", `["c","b"]`)
	b.waitResult("prefix", `["d","a","b"]`)
	b.waitResult("all", `["a","b","c","d"]`)
	b.waitResult("key", `["c"]`)
	b.waitResult("oldKey", `["c"]`)
	b.waitResult("oldShape", `["c"]`)

	s.put(shop, "items", "c", `{"price":15,"sku":"coffee"}`)
	b.waitResult("range", `["c","b","a"]`)
	s.put(shop, "items", "a", `{"price":150,"sku":"tea-green"}`)
	b.waitResult("range", `["c","b"]`)
	s.put(shop, "items", "e", `{"price":12,"sku":"tea-white"}`)
	b.waitResult("range", `["e","c","b"]`)
	b.waitResult("below", `["e","c","b"]`)
	b.waitResult("prefix", `["d","a","e","b"]`)
	if _, err := s.e.Delete(s.ctx, aliceCLI, shop, "items", "b", ""); err != nil {
		t.Fatal(err)
	}
	b.waitResult("range", `["e","c"]`)
	b.waitResult("prefix", `["d","a","e"]`)
	b.waitResult("all", `["a","c","d","e"]`)
	// Strings sort by code point, as on the server: U+1F600 after U+FF61.
	s.put(shop, "items", "f", `{"price":1,"sku":"tea😀"}`)
	s.put(shop, "items", "g", `{"price":1,"sku":"tea｡"}`)
	b.waitResult("prefix", `["d","a","e","g","f"]`)

	b.eval(`(() => { window.stops.forEach((stop) => stop()); return true; })()`, nil)
	s.until("no feed connection once nobody listens", func() bool { return s.feeds.Load() == 0 })
}

// TestClientReactHooks: useLiveQuery and useDocument re-render on a
// change, move to new arguments (ending the old subscription) and end
// their subscriptions on unmount. React itself is not downloaded: a
// stand-in (testdata/minireact.js) keeps React's contract for the hooks.
func TestClientReactHooks(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	const shop = "alice/shop"
	if _, err := s.e.CreateApp(s.ctx, consoleAdmin, shop, false); err != nil {
		t.Fatal(err)
	}
	s.put(shop, "items", "a", `{"price":50,"sku":"tea-green"}`)
	s.put(shop, "items", "c", `{"price":5,"sku":"coffee"}`)
	mini, err := os.ReadFile("testdata/minireact.js")
	if err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	b.open(s.ts.URL + "/client/react.js")
	b.eval(string(mini)+"; true", nil)
	b.eval(fmt.Sprintf(`(async () => {
		const { connect } = await import("/client/handoff.js");
		const { hooks } = await import("/client/react.js");
		const { useLiveQuery, useDocument } = hooks(MiniReact);
		const app = connect({ server: location.origin, token: %s }).app("alice/shop");
		window.app = app;
		window.db = app.db("items");
		function Board({ db, query, id }) {
			const q = useLiveQuery(db, query);
			const d = useDocument(db, id);
			return JSON.stringify({ loading: q.loading || d.loading, ids: q.docs.map((x) => x._id),
				doc: d.doc ? d.doc.sku : null, error: q.error ? q.error.code : null });
		}
		window.renders = [];
		window.root = MiniReact.mount(Board, (out) => window.renders.push(JSON.parse(out)));
		window.root.render({ db: window.db, query: { field: "price", from: 10 }, id: "c" });
		window.errs = [];
		window.bad = MiniReact.mount(Board, (out) => window.errs.push(JSON.parse(out)));
		window.bad.render({ db: window.db, query: { field: "price", from: true }, id: null });
		return true;
	})()`, jsString(s.token)), nil)
	b.waitResult("renders", `{"loading":false,"ids":["a"],"doc":"coffee","error":null}`)
	b.waitResult("errs", `{"loading":false,"ids":[],"doc":null,"error":"invalid"}`)

	s.put(shop, "items", "c", `{"price":12,"sku":"coffee-2"}`)
	b.waitResult("renders", `{"loading":false,"ids":["c","a"],"doc":"coffee-2","error":null}`)
	if _, err := s.e.Delete(s.ctx, aliceCLI, shop, "items", "c", ""); err != nil {
		t.Fatal(err)
	}
	b.waitResult("renders", `{"loading":false,"ids":["a"],"doc":null,"error":null}`)

	// New arguments: the old subscriptions end, new ones start.
	b.eval(`(() => { window.root.render({ db: window.db, query: { field: "sku", prefix: "tea" }, id: "a" }); return true; })()`, nil)
	b.waitResult("renders", `{"loading":false,"ids":["a"],"doc":"tea-green","error":null}`)
	b.waitJS("two subscribers after the change of arguments", `window.app.feed.subs.size === 2`)
	s.put(shop, "items", "t", `{"price":1,"sku":"tea-black"}`)
	b.waitResult("renders", `{"loading":false,"ids":["t","a"],"doc":"tea-green","error":null}`)

	// The same arguments in new objects keep the subscription.
	b.eval(`(() => { window.n = window.renders.length; window.root.render({ db: window.db, query: { field: "sku", prefix: "tea" }, id: "a" }); return true; })()`, nil)
	var subs int
	b.eval(`window.app.feed.subs.size`, &subs)
	if subs != 2 {
		t.Fatalf("%d subscribers after a render with equal arguments, want 2", subs)
	}

	b.eval(`(() => { window.root.unmount(); window.bad.unmount(); return true; })()`, nil)
	s.until("no feed connection after unmount", func() bool { return s.feeds.Load() == 0 })
}
