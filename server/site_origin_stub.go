package server

import (
	"net"
	"net/http"
)

// siteOrigin is scheme://host[:port] of the app's site.
func (s *Server) siteOrigin(r *http.Request, owner, name string) string {
	_, port, _ := net.SplitHostPort(r.Host)
	host := name + "--" + owner + ".localhost"
	if port != "" {
		host += ":" + port
	}
	return "http://" + host
}
