package server

import "net/http"

// fetchRoutes registers each app's own site: its HTTP lane (backend.js
// fetch) at /apps/{owner}/{name}/api/* and its static files (the app
// folder's public/) at every other path under /apps/{owner}/{name}/.
//
// It is one pattern without a method, split by path in appSite: a
// method-less api pattern beside a "GET" static one would make ServeMux
// refuse both as conflicting. It is registered on the mux directly,
// without the API's 405 fallbacks, which would conflict the same way;
// appSite answers wrong methods itself.
func (s *Server) fetchRoutes() {
	const pattern = "/apps/{owner}/{name}/{path...}"
	s.patterns[pattern] = true // labels the metrics
	s.mux.Handle(pattern, http.HandlerFunc(s.appSite))
}
