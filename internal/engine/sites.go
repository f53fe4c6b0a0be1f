package engine

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/identity"
	"github.com/handoff-run/handoff/store"
)

// Each app's site (its static files and fetch lane) is served on an
// origin of its own, so that no app's page shares the console's storage
// or another app's. The host's first label names the app as
// "<name>--<owner>": one DNS label, so a wildcard certificate for the
// site domain covers every app.

// maxSiteLabel is the DNS limit on one label; longer labels are refused
// by resolvers and some browsers.
const maxSiteLabel = 63

// maxOrigins bounds an app's extra origins: the list is checked on every
// cross-origin request.
const maxOrigins = 20

// SiteLabel is the first label of owner/name's site host.
func SiteLabel(owner, name string) string { return name + "--" + owner }

// siteLabelRefs lists the apps a site label may name: both parts may
// contain "--", so each split is a candidate, left to right.
func siteLabelRefs(label string) []string {
	var refs []string
	for i := 0; ; {
		j := strings.Index(label[i:], "--")
		if j < 0 {
			return refs
		}
		name, owner := label[:i+j], label[i+j+2:]
		if identity.IsName(name) && identity.IsName(owner) {
			refs = append(refs, owner+"/"+name)
		}
		i += j + 1
	}
}

// SiteApp resolves a site host's first label to the app it serves.
func (e *Engine) SiteApp(ctx context.Context, label string) (string, error) {
	for _, ref := range siteLabelRefs(label) {
		_, err := e.app(ctx, ref)
		if err == nil {
			return ref, nil
		}
		if !errs.Is(err, errs.NotFound) {
			return "", err
		}
	}
	return "", errs.New(errs.NotFound, "no app is served at %q; an app's site is at <name>--<owner> (for alice/jobs: jobs--alice), see `handoff app list`", label)
}

// checkSiteLabel refuses an app whose site host would be too long or the
// same as an existing app's (the label "a--b--c" is both c/a--b and
// b--c/a).
func (e *Engine) checkSiteLabel(ctx context.Context, owner, name string) error {
	label := SiteLabel(owner, name)
	if len(label) > maxSiteLabel {
		return errs.New(errs.Invalid, "app %s/%s would have the site address %q, longer than the %d characters a host name label may have; pick a shorter name", owner, name, label, maxSiteLabel)
	}
	if strings.HasPrefix(label, "xn--") {
		return errs.New(errs.Invalid, "app %s/%s would have the site address %q, which browsers read as an internationalised name; pick another name", owner, name, label)
	}
	for _, ref := range siteLabelRefs(label) {
		o, n, _ := strings.Cut(ref, "/")
		if o == owner && n == name {
			continue
		}
		if _, err := e.st.App(ctx, o, n); err == nil {
			return errs.New(errs.Exists, "app %s/%s would have the same site address (%s) as app %s; pick a name without \"--\"", owner, name, label, ref)
		} else if !errors.Is(err, store.ErrNotFound) {
			return internal(err)
		}
	}
	return nil
}

// Origins are the web origins, besides its own site, whose pages may
// call the API for the app (a dev server, say).
func (e *Engine) Origins(ctx context.Context, appRef string) ([]string, error) {
	app, err := e.app(ctx, appRef)
	if err != nil {
		return nil, err
	}
	return app.Origins, nil
}

// SetOrigins replaces the app's extra origins. Only its owner or the
// admin may, as the list decides which pages can act with its visitors'
// tokens.
func (e *Engine) SetOrigins(ctx context.Context, a Actor, appRef string, origins []string) ([]string, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return nil, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return nil, err
	}
	if len(origins) > maxOrigins {
		return nil, errs.New(errs.Invalid, "%d origins is more than the %d an app may list; keep the ones in use", len(origins), maxOrigins)
	}
	clean := make([]string, 0, len(origins))
	for _, o := range origins {
		c, err := ParseOrigin(o)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(clean, c) {
			clean = append(clean, c)
		}
	}
	if err := e.st.SetOrigins(ctx, app.ID, clean); err != nil {
		return nil, internal(err)
	}
	e.forgetApp(appRef)
	return clean, nil
}

// ParseOrigin checks a web origin, scheme://host[:port], and returns it
// in the form browsers send in the Origin header.
func ParseOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	bad := func(why string) (string, error) {
		return "", errs.New(errs.Invalid, "origin %q %s; give scheme://host[:port], e.g. http://localhost:5173", o, why)
	}
	switch {
	case err != nil:
		return bad("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("must start with http:// or https://")
	case u.Host == "" || u.Hostname() == "":
		return bad("has no host")
	case u.User != nil:
		return bad("may not hold a user name or password")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return bad("may not have a path, query or fragment")
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		host = strings.ToLower(u.Hostname())
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return u.Scheme + "://" + host, nil
}
