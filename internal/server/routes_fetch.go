package server

import "net/http"

// fetchRoutes answers the paths where app sites used to be,
// /apps/{owner}/{name}/..., with a redirect to the site's own origin
// (site.go), which serves its fetch lane and static files.
func (s *Server) fetchRoutes() {
	const pattern = "/apps/{owner}/{name}/{path...}"
	s.patterns[pattern] = true // labels the metrics
	s.patterns[sitePattern] = true
	s.mux.Handle(pattern, http.HandlerFunc(s.oldSitePath))
}
