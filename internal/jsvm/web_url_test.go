package jsvm

import "testing"

func TestURL(t *testing.T) {
	runWebCases(t, []webCase{
		{`new URL("https://user:pa ss@EXAMPLE.com:443/a/../b/./c?x=1 2#frag ment").href`, `"https://user:pa%20ss@example.com/b/c?x=1%202#frag%20ment"`},
		{`(() => { const u = new URL("HTTP://[::FFFF:192.168.0.1]:8080/p?q#h"); return [u.href, u.origin, u.protocol, u.username, u.password, u.host, u.hostname, u.port, u.pathname, u.search, u.hash] })()`, `["http://[::ffff:c0a8:1]:8080/p?q#h","http://[::ffff:c0a8:1]:8080","http:","","","[::ffff:c0a8:1]:8080","[::ffff:c0a8:1]","8080","/p","?q","#h"]`},
		{`new URL("../x?y#z", "http://a.com/b/c/d").href`, `"http://a.com/b/x?y#z"`},
		{`new URL("//other.org/p", "https://a.com/").href`, `"https://other.org/p"`},
		{`new URL("?q=1", "http://a.com/b/c#h").href`, `"http://a.com/b/c?q=1"`},
		{`new URL("https://münchen.de/straße").href`, `"https://xn--mnchen-3ya.de/stra%C3%9Fe"`},
		{`new URL("https://xn--mnchen-3ya.de/").hostname`, `"xn--mnchen-3ya.de"`},
		{`new URL("http://0x7f.1/").host`, `"127.0.0.1"`},
		{`err(() => new URL("http://[::1/"))`, `"throws Error TypeError: Invalid URL [ERR_INVALID_URL]"`},
		{`err(() => new URL("nope"))`, `"throws Error TypeError: Invalid URL [ERR_INVALID_URL]"`},
		{`err(() => new URL("/p", "nope"))`, `"throws Error TypeError: Invalid URL [ERR_INVALID_URL]"`},
		{`err(() => new URL())`, `"throws Error TypeError: The \"url\" argument must be specified [ERR_MISSING_ARGS]"`},
		{`[URL.canParse("http://x"), URL.canParse("x"), URL.canParse("x", "http://a/")]`, `[true,false,true]`},
		{`[URL.parse("x"), URL.parse("x", "http://a/b").href]`, `[null,"http://a/x"]`},
		{`new URL("mailto:someone@example.com").pathname`, `"someone@example.com"`},
		{`(() => { const u = new URL("file:///C:/x/../y"); return [u.href, u.origin, u.host] })()`, `["file:///C:/y","null",""]`},
		{`new URL("blob:https://a.com:8443/uuid").origin`, `"https://a.com:8443"`},
		{`new URL("data:text/plain,hi").origin`, `"null"`},
		{`JSON.stringify({u: new URL("http://a/b")})`, `"{\"u\":\"http://a/b\"}"`},
		{`String(new URL("http://a/b"))`, `"http://a/b"`},
		{`Object.prototype.toString.call(new URL("http://a/"))`, `"[object URL]"`},
		{`(() => { const u = new URL("http://a.com/p?x=1#h"); u.protocol = "https"; u.username = "me@x"; u.password = "p:w"; u.port = "8443"; u.pathname = "/q r"; u.search = "?a=b c"; u.hash = "top"; return u.href })()`, `"https://me%40x:p%3Aw@a.com:8443/q%20r?a=b%20c#top"`},
		{`(() => { const u = new URL("http://a.com:8080/"); u.port = "80"; const a = u.href; u.port = "x"; const b = u.href; u.port = ""; return [a, b, u.href] })()`, `["http://a.com/","http://a.com/","http://a.com/"]`},
		{`(() => { const u = new URL("http://a.com/"); u.protocol = "mailto"; const a = u.href; u.host = "b.com:81"; const b = u.href; u.hostname = "c.com"; return [a, b, u.href] })()`, `["http://a.com/","http://b.com:81/","http://c.com:81/"]`},
		{`(() => { const u = new URL("http://a.com/"); u.host = "[::1"; u.hostname = ""; return u.href })()`, `"http://a.com/"`},
		{`(() => { const u = new URL("http://a.com/?x=1"); u.href = "https://b.org/y?z=2"; return [u.href, u.searchParams.get("z")] })()`, `["https://b.org/y?z=2","2"]`},
		{`err(() => { new URL("http://a.com/").href = "nope" })`, `"throws Error TypeError: Invalid URL [ERR_INVALID_URL]"`},
		{`(() => { const u = new URL("http://a/?a=1&b=2"); const p = u.searchParams; p.append("c", "x y+z"); p.delete("a"); const s1 = u.search; u.search = "?q=%2B+1"; return [s1, p.get("q"), u.searchParams === p, [...p.keys()]] })()`, `["?b=2&c=x+y%2Bz","+ 1",true,["q"]]`},
		{`(() => { const u = new URL("http://a/?x=1"); u.searchParams.delete("x"); return [u.href, u.search] })()`, `["http://a/",""]`},
		{`(() => { const u = new URL("http://a/#h"); u.searchParams.set("é", "☃"); return u.href })()`, `"http://a/?%C3%A9=%E2%98%83#h"`},
		{`(() => { const u = new URL("http://a/p"); u.search = ""; u.hash = ""; return u.href })()`, `"http://a/p"`},
		{`new URL("http://a/?").href + "|" + new URL("http://a/?").search`, `"http://a/?|"`},
		{`new URL("http://a/%zz%41 <>\"\x60{}").pathname`, `"/%zz%41%20%3C%3E%22%60%7B%7D"`},
		{`new URL("http://a/?q='<>\"").search`, `"?q=%27%3C%3E%22"`},
		{`new URL("ws://a/#\x60<>\"").hash`, `"#%60%3C%3E%22"`},
		{`new URL(" \t http://a/b\n c \u0000").href`, `"http://a/b%20c"`},
		{`err(() => new URL("http://1.2.3.4.5/").hostname)`, `"throws Error TypeError: Invalid URL [ERR_INVALID_URL]"`},
		{`err(() => new URL("http://1.2.3.256/"))`, `"throws Error TypeError: Invalid URL [ERR_INVALID_URL]"`},
		{`new URL("HTTPS://a.COM:443").href`, `"https://a.com/"`},
		{`new URL("http://a/\ud800").pathname`, `"/%EF%BF%BD"`},
		{`Object.keys(new URL("http://a/"))`, `[]`},
	})
}

func TestURLSearchParams(t *testing.T) {
	runWebCases(t, []webCase{
		{`new URLSearchParams("?a=1&b=2&a=3").getAll("a")`, `["1","3"]`},
		{`new URLSearchParams("a=b+c&d=%2B&e=%zz&f&=g&&h==").toString()`, `"a=b+c&d=%2B&e=%25zz&f=&=g&h=%3D"`},
		{`[...new URLSearchParams("a=b+c&d=%2B&e=%zz&f&=g&&h==")]`, `[["a","b c"],["d","+"],["e","%zz"],["f",""],["","g"],["h","="]]`},
		{`new URLSearchParams({a: 1, b: "x y", c: null, d: undefined, "é": "~!*()'"}).toString()`, `"a=1&b=x+y&c=null&d=undefined&%C3%A9=%7E%21*%28%29%27"`},
		{`new URLSearchParams([["a", "1"], ["a", 2], new Set(["b", "3"])]).toString()`, `"a=1&a=2&b=3"`},
		{`new URLSearchParams(new Map([["k", "v"]])).toString()`, `"k=v"`},
		{`new URLSearchParams(new URLSearchParams("x=1&y=2")).toString()`, `"x=1&y=2"`},
		{`err(() => new URLSearchParams([["a"]]))`, `"throws Error TypeError: Each query pair must be an iterable [name, value] tuple [ERR_INVALID_TUPLE]"`},
		{`err(() => new URLSearchParams([1]))`, `"throws Error TypeError: Each query pair must be an iterable [name, value] tuple [ERR_INVALID_TUPLE]"`},
		{`new URLSearchParams(null).toString() + "|" + new URLSearchParams(undefined).toString() + "|" + new URLSearchParams("").size`, `"||0"`},
		{`(() => { const p = new URLSearchParams("b=2&a=1&c=3&a=0"); p.sort(); return p.toString() })()`, `"a=1&a=0&b=2&c=3"`},
		{`(() => { const p = new URLSearchParams("z=1&é=2&e=3&Z=4&\u{1F600}=5&\uFFFD=6"); p.sort(); return [...p.keys()] })()`, `["Z","e","z","é","😀","�"]`},
		{`(() => { const p = new URLSearchParams("a=1&b=2&a=3"); p.set("a", "x"); return p.toString() })()`, `"a=x&b=2"`},
		{`(() => { const p = new URLSearchParams("a=1&b=2&a=3"); p.delete("a", "3"); return [p.toString(), p.has("a", "1"), p.has("a", "3"), p.has("b"), p.get("zz")] })()`, `["a=1&b=2",true,false,true,null]`},
		{`(() => { const out = []; new URLSearchParams("a=1&b=2").forEach(function (v, k, o) { out.push([k, v, o instanceof URLSearchParams, this.t]) }, {t: 7}); return out })()`, `[["a","1",true,7],["b","2",true,7]]`},
		{`(() => { const p = new URLSearchParams("a=1&b=2"); const it = p.entries(); const first = it.next().value; p.append("c", "3"); return [first, [...it], Object.prototype.toString.call(it)] })()`, `[["a","1"],[["b","2"],["c","3"]],"[object URLSearchParams Iterator]"]`},
		{`new URLSearchParams("a=1&a=2").size`, `2`},
		{`err(() => new URLSearchParams().append("x"))`, `"throws Error TypeError: The \"name\" and \"value\" arguments must be specified [ERR_MISSING_ARGS]"`},
		{`err(() => new URLSearchParams().get())`, `"throws Error TypeError: The \"name\" argument must be specified [ERR_MISSING_ARGS]"`},
		{`new URLSearchParams("a=%E2%82&b=%FF%FF&c=%F0%9F%98%80&d=%C3%A9").toString()`, `"a=%EF%BF%BD&b=%EF%BF%BD%EF%BF%BD&c=%F0%9F%98%80&d=%C3%A9"`},
		{`new URLSearchParams({q: "\ud800"}).get("q").length`, `1`},
		{`new URLSearchParams({" ": "+&=%#"}).toString()`, `"+=%2B%26%3D%25%23"`},
		{`Object.prototype.toString.call(new URLSearchParams())`, `"[object URLSearchParams]"`},
	})
}

// FuzzParseURL: no input makes the URL parser panic past parseURL, and
// what it parses serialises to a URL that parses to itself.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"http://a/b?c#d", "https://[::1]:8080/", "file:///C:/x", "blob:https://a/b", "http://münchen.de/", "a:/.//", "http://1.2.3.4.5/", "//x", "?q", "http://%zz/"} {
		f.Add(s, "http://base.example/dir/file")
	}
	f.Fuzz(func(t *testing.T, input, base string) {
		u, ok := parseURL(input, base, true)
		if !ok {
			return
		}
		for _, part := range []string{"protocol", "host", "pathname", "search", "hash", "port", "username"} {
			_, _ = setURLPart(u, part, input)
		}
		href := u.Href(false)
		again, ok := parseURL(href, "", false)
		if !ok {
			t.Fatalf("%q (from %q on %q) does not parse again", href, input, base)
		}
		if again.Href(false) != href {
			t.Fatalf("%q parses to %q", href, again.Href(false))
		}
	})
}
