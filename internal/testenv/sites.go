package testenv

import (
	"context"
	"net"
	"net/http"
	"strings"
)

// SiteClient is an HTTP client that reaches app sites on this machine:
// browsers and curl resolve *.localhost to loopback, Go's resolver does
// not, so it dials 127.0.0.1 for those hosts itself.
func SiteClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: t}
}

// SiteURL is the address of owner/name's site on the server at base
// (http://127.0.0.1:PORT), with path appended.
func SiteURL(base, owner, name, path string) string {
	port := base[strings.LastIndex(base, ":"):]
	return "http://" + name + "--" + owner + ".localhost" + port + path
}
