package jsvm

import (
	"fmt"
	"strings"
	"testing"
)

// TestCompileIsSharedBySource: the same name and source compile once per
// process; another name or source is another program; the cache keeps a
// bounded number of them.
func TestCompileIsSharedBySource(t *testing.T) {
	src := `export function f() { return "shared" }`
	a, err := Compile("cache-a.js", src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Compile("cache-a.js", src)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same source compiled twice")
	}
	if c, _ := Compile("cache-b.js", src); c == a {
		t.Fatal("another file name shares a program: errors would name the wrong file")
	}
	for i := range compileCacheSize + 1 {
		if _, err := Compile("cache-a.js", fmt.Sprintf("%s // %d", src, i)); err != nil {
			t.Fatal(err)
		}
	}
	if d, _ := Compile("cache-a.js", src); d == a {
		t.Fatal("the cache kept more than compileCacheSize programs")
	}
	// Code is bounded too: a program of a quarter of the budget is not
	// kept at all.
	big := src + "\nexport const s = \"" + strings.Repeat("x", compileCacheBytes/4) + "\""
	e, err := Compile("cache-a.js", big)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := Compile("cache-a.js", big); f == e {
		t.Fatal("a program of a quarter of the cache's bytes was kept")
	}
	// A compile error is found again, not kept.
	for range 2 {
		if _, err := Compile("cache-a.js", "export function ("); err == nil {
			t.Fatal("a syntax error compiled")
		}
	}
}
