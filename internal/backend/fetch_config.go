package backend

import (
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"
	"github.com/handoff-run/handoff/internal/appcode"
)

// config.fetch limits the global fetch of the app's handlers:
//
//	export const config = {
//	  fetch: { allow: ["api.example.com", "127.0.0.1:8080"], timeout: "10s", maxBytes: 1048576 },
//	};
//
// allow names hosts, not URLs: "host" allows every port of it and
// "host:port" one port (the scheme's default port is 80 or 443). A
// handler may call nothing else, and a redirect to a host not listed is
// refused like a direct call, so the list is the whole of what the app's
// code can reach.

// Bounds of the fetch settings.
const (
	minFetchTimeout  = 100 * time.Millisecond
	maxFetchTimeout  = 5 * time.Minute
	maxFetchMaxBytes = 32 << 20
	maxFetchAllow    = 100
)

// hostnameRE is a DNS name: dot-separated labels of letters, digits and
// '-', not starting or ending with '-'.
var hostnameRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

func (r configReader) fetch(v goja.Value, cfg *appcode.BackendConfig) error {
	if goja.IsUndefined(v) {
		return nil
	}
	o, err := r.object(v, ".fetch", `fetch: {allow: ["api.example.com"], timeout: "10s", maxBytes: 1048576}`)
	if err != nil {
		return err
	}
	for _, key := range o.Keys() {
		val := o.Get(key)
		if goja.IsUndefined(val) {
			continue
		}
		field := ".fetch." + key
		switch key {
		case "allow":
			arr, ok := val.(*goja.Object)
			if !ok || arr.ClassName() != "Array" {
				return r.fail(field, `is %s; write an array of host names, e.g. allow: ["api.example.com", "127.0.0.1:8080"]`, describe(val))
			}
			n := arr.Get("length").ToInteger()
			if n > maxFetchAllow {
				return r.fail(field, "lists %d hosts; the limit is %d", n, maxFetchAllow)
			}
			allow := make([]string, 0, n)
			for i := range n {
				item := arr.Get(strconv.FormatInt(i, 10))
				if !goja.IsString(item) {
					return r.fail(field+"["+strconv.FormatInt(i, 10)+"]", `is %s; write a host name such as "api.example.com" or "127.0.0.1:8080"`, describe(item))
				}
				h, why := normalizeAllow(item.String())
				if why != "" {
					return r.fail(field+"["+strconv.FormatInt(i, 10)+"]", "is %s: %s", describe(item), why)
				}
				allow = append(allow, h)
			}
			cfg.Fetch.Allow = allow
		case "timeout":
			d, ok := durationOrMillis(val, maxFetchTimeout)
			if !ok || d < minFetchTimeout || d > maxFetchTimeout {
				return r.fail(field, `is %s; write a duration from 1s to 5m such as "10s", or a number of milliseconds from 100 to 300000`, describe(val))
			}
			cfg.Fetch.Timeout = d
		case "maxBytes":
			n, ok := integer(val)
			if !ok || n < 1 || n > maxFetchMaxBytes {
				return r.fail(field, "is %s; write a whole number of bytes from 1 to %d, e.g. maxBytes: %d", describe(val), maxFetchMaxBytes, appcode.DefaultFetchMaxBytes)
			}
			cfg.Fetch.MaxBytes = int64(n)
		default:
			return r.fail(field, "is not a setting; fetch has allow, timeout and maxBytes")
		}
	}
	return nil
}

// normalizeAllow checks one allow entry and returns it lowercase, an IPv6
// address in brackets; why says what is wrong with a bad one.
func normalizeAllow(s string) (norm, why string) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case s == "":
		return "", "a host cannot be empty"
	case strings.Contains(s, "://"):
		return "", `write the host without the scheme, e.g. "api.example.com" rather than "https://api.example.com"`
	case strings.ContainsAny(s, "/?#@ \t"):
		return "", `write only the host and optionally the port, e.g. "api.example.com" or "127.0.0.1:8080"`
	case strings.Contains(s, "*"):
		return "", "wildcards are not supported; list each host"
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return "", "an IPv6 address needs its closing ']'"
		}
		host, port = s[1:end], s[end+1:]
		if port != "" {
			if !strings.HasPrefix(port, ":") {
				return "", `write an IPv6 host as "[::1]" or "[::1]:8080"`
			}
			port = port[1:]
		}
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return "", host + " is not an IPv6 address"
		}
	case strings.Count(s, ":") > 1:
		if ip := net.ParseIP(s); ip != nil {
			host = s
			break
		}
		return "", `write an IPv6 address in brackets, e.g. "[::1]:8080"`
	case strings.Contains(s, ":"):
		host, port, _ = strings.Cut(s, ":")
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return "", "the port must be a number from 1 to 65535"
		}
	}
	host = strings.TrimSuffix(host, ".")
	if net.ParseIP(host) == nil && (len(host) > 253 || !hostnameRE.MatchString(host)) {
		return "", host + " is not a host name"
	}
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		host = "[" + ip.String() + "]"
	} else if ip != nil {
		host = ip.String()
	}
	if port != "" {
		return host + ":" + port, ""
	}
	return host, ""
}

// allowed reports whether u's host (and port) is on the allow list.
func allowed(allow []string, u *url.URL) bool {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if ip := net.ParseIP(host); ip != nil {
		if ip.To4() != nil {
			host = ip.String()
		} else {
			host = "[" + ip.String() + "]"
		}
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	for _, a := range allow {
		if a == host || a == host+":"+port {
			return true
		}
	}
	return false
}
