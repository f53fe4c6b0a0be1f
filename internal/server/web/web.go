// Package web holds the browser side of handoff, embedded in the binary:
// the client module that any page can import (/client/handoff.js) and the
// operator console built on it (/ and /console/...). The files are plain
// ES modules and one stylesheet, so `go build` yields the whole console
// with no build step.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Patterns are the routes Handler answers. They are exact paths and two
// subtrees, never "GET /": a catch-all would swallow unknown API paths,
// which must keep getting the API's JSON 404.
var Patterns = []string{"GET /{$}", "GET /console/", "GET /client/"}

// file is one asset, read once: its bytes, type and a strong ETag, so a
// browser revalidates cheaply (embedded files have no modification time).
type file struct {
	body  []byte
	ctype string
	etag  string
}

var files = load()

func load() map[string]file {
	m := map[string]file{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m[strings.TrimPrefix(p, "assets")] = file{body: b, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("web: reading the embedded assets: " + err.Error())
	}
	return m
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// csp keeps the console to its own files: no inline script, no other
// origin. The API is same-origin, so connect-src 'self' covers the feed.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Register adds Handler under each of Patterns, with the server's own
// registration function (which keeps its metrics and 405 answers).
func Register(handle func(pattern string, h http.Handler)) {
	h := Handler()
	for _, p := range Patterns {
		handle(p, h)
	}
}

// Handler serves the console and the client module. Unknown files under
// the two subtrees are a plain 404: they are not API paths.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/" || p == "/console/" {
			p = "/console/index.html"
		}
		f, ok := files[p]
		if !ok {
			http.Error(w, "no such file: "+r.URL.Path, http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("ETag", f.etag)
		// Revalidate every time: a new binary must show its own console,
		// and the ETag makes the check a 304.
		h.Set("Cache-Control", "no-cache")
		if strings.HasPrefix(p, "/client/") {
			// Pages of other origins may import the module.
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Content-Security-Policy", csp)
			h.Set("Referrer-Policy", "no-referrer")
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
