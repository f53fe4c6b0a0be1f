package server

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// fetchLane hands the request to the app's fetch handler. The caller is
// anonymous unless it sends a credential, which must then be valid (a bad
// one is refused with 401, never downgraded), and the credential itself
// never reaches the app's code.
func (s *Server) fetchLane(w http.ResponseWriter, r *http.Request, ref, sub string) {
	// The body is read first: a signed device request covers it.
	body, err := readBody(w, r, appcode.MaxFetchRequestBytes, "the request body")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	a, err := s.actor(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	header := r.Header.Clone()
	header.Del("Authorization")
	header.Del(pathHeader)
	if sub == "" {
		sub = "/"
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	req := appcode.FetchRequest{Method: r.Method, URL: scheme + "://" + r.Host + r.URL.RequestURI(), Path: sub, Header: header}
	if len(body) > 0 {
		req.Body = body
	}
	resp, err := s.e.Fetch(r.Context(), a, ref, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	for k, vs := range resp.Header {
		if droppedHeaders[http.CanonicalHeaderKey(k)] {
			continue
		}
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if resp.Status != http.StatusNoContent && resp.Status != http.StatusNotModified {
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	}
	w.WriteHeader(resp.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(resp.Body)
	}
}

// droppedHeaders are response headers a fetch handler may not set: the
// connection's own (the server manages it), and cookies: a site's cookie
// may name the parent domain (Domain=localhost, or the site domain) and
// so reach the console and every other app.
var droppedHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Content-Length": true, "Set-Cookie": true,
}

// staticFile serves one of the app's static files. Static files are
// public, like any web site: no credential is needed or checked.
func (s *Server) staticFile(w http.ResponseWriter, r *http.Request, ref, p string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.writeErrorStatus(w, http.StatusMethodNotAllowed, &errs.Error{Code: errs.Invalid,
			Message: r.Method + " is not allowed on an app's static files; use GET, or send requests for the app's backend to /api/ on this site"})
		return
	}
	f, err := s.e.Static(r.Context(), ref, p)
	if errors.Is(err, engine.ErrStaticFolder) {
		http.Redirect(w, r, r.URL.EscapedPath()+"/", http.StatusMovedPermanently)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", staticType(f))
	h.Set("ETag", f.ETag)
	// Revalidate every time: a deploy must show at once, and the ETag
	// makes the check a 304.
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", f.Time, bytes.NewReader(f.Body))
}

// staticType is the file's type by extension, else by its first bytes.
func staticType(f engine.StaticFile) string {
	switch ext := strings.ToLower(path.Ext(f.Path)); ext {
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".html", ".htm":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".json", ".map":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	case ".wasm":
		return "application/wasm"
	case ".txt", ".md":
		return "text/plain; charset=utf-8"
	default:
		if t := mime.TypeByExtension(ext); ext != "" && t != "" {
			return t
		}
	}
	return http.DetectContentType(f.Body)
}
