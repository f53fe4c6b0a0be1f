package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// Static files: an app folder's public/ is deployed with its code, kept
// in the code version (so a rollback brings its files back with its
// handlers) and served at the root of the app's site. They are looked up by
// exact path in the live version's own set, never on a file system, and
// every path is checked at deploy and at request time, so no request can
// reach past the app's folder: not another app's files, not the server's.

// Limits of one version's static files.
const (
	MaxStaticFiles      = 1000
	MaxStaticFileBytes  = 4 << 20
	MaxStaticTotalBytes = 16 << 20
	maxStaticPath       = 1024
	maxStaticSegment    = 255
)

// IndexFile is served for a folder's path ("" or ending in "/").
const IndexFile = "index.html"

// Code is one deploy: the sources and the static files.
type Code struct {
	Access  string
	Backend string
	// Files maps slash-separated paths inside public/ to their bytes.
	Files map[string][]byte
}

// ValidStaticPath checks a static file's path: relative, slash-separated,
// already clean. It refuses "..", ".", empty segments, absolute paths,
// backslashes, colons (drive letters), NUL and other control characters.
func ValidStaticPath(p string) error {
	bad := func(why string) error {
		return errs.New(errs.Invalid, "static file path %q %s; paths are relative to the app's %s/ folder, with '/' between names", p, why, appcode.StaticDir)
	}
	switch {
	case p == "":
		return bad("is empty")
	case len(p) > maxStaticPath:
		return errs.New(errs.Invalid, "a static file path is %d bytes; the limit is %d", len(p), maxStaticPath)
	case !utf8.ValidString(p):
		return bad("is not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return bad("is absolute")
	case strings.ContainsRune(p, '\\'):
		return bad("has a backslash")
	case strings.ContainsRune(p, ':'):
		return bad("has a colon")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return bad("has a control character")
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "":
			return bad("has an empty name (a doubled or trailing '/')")
		case seg == "." || seg == "..":
			return bad("has a '" + seg + "' name")
		case len(seg) > maxStaticSegment:
			return bad("has a name longer than 255 bytes")
		}
	}
	return nil
}

// checkStaticFiles applies the path rules and the size limits to a deploy.
func checkStaticFiles(files map[string][]byte) error {
	if len(files) > MaxStaticFiles {
		return errs.New(errs.TooLarge, "%s/ has %d files; the limit is %d", appcode.StaticDir, len(files), MaxStaticFiles)
	}
	total := 0
	for p, b := range files {
		if err := ValidStaticPath(p); err != nil {
			return err
		}
		if len(b) > MaxStaticFileBytes {
			return errs.New(errs.TooLarge, "%s/%s is %d bytes; the limit of one static file is %d", appcode.StaticDir, p, len(b), MaxStaticFileBytes)
		}
		total += len(b)
	}
	if total > MaxStaticTotalBytes {
		return errs.New(errs.TooLarge, "%s/ holds %d bytes; the limit is %d", appcode.StaticDir, total, MaxStaticTotalBytes)
	}
	return nil
}

// StaticFile is one static file ready to serve.
type StaticFile struct {
	Path string // its path inside public/
	Body []byte
	ETag string    // strong, from the content
	Time time.Time // when its version was deployed
}

// staticFiles is a version's files by path.
type staticFiles map[string]StaticFile

func newStaticFiles(files map[string][]byte, deployed time.Time) staticFiles {
	if len(files) == 0 {
		return nil
	}
	out := make(staticFiles, len(files))
	for p, b := range files {
		sum := sha256.Sum256(b)
		out[p] = StaticFile{Path: p, Body: b, ETag: `"` + hex.EncodeToString(sum[:12]) + `"`, Time: deployed}
	}
	return out
}

// ErrStaticFolder is returned by Static for the path of a folder that has
// an index file, asked for without its trailing slash: the caller
// redirects to the path with the slash, so relative links resolve.
var ErrStaticFolder = errs.New(errs.NotFound, "this path is a folder; add a trailing '/'")

// Static returns the live version's static file at p, the path after
// site's origin (unescaped). "" and paths ending in "/" mean the
// folder's index.html. Static files are public, like a web site: anyone
// may fetch them, whatever the app's read rules.
func (e *Engine) Static(ctx context.Context, appRef, p string) (StaticFile, error) {
	app, err := e.app(ctx, appRef)
	if err != nil {
		return StaticFile{}, err
	}
	name := p
	if name == "" || strings.HasSuffix(name, "/") {
		name += IndexFile
	}
	if err := ValidStaticPath(name); err != nil {
		return StaticFile{}, err
	}
	var files staticFiles
	if app.code != nil {
		files = app.code.static
	}
	if f, ok := files[name]; ok {
		return f, nil
	}
	if _, ok := files[name+"/"+IndexFile]; ok {
		return StaticFile{}, ErrStaticFolder
	}
	return StaticFile{}, errs.New(errs.NotFound, "app %s has no static file %q; static files come from the %s/ folder deployed with its code", appRef, name, appcode.StaticDir)
}

// LiveCode returns the sources and static files of the app's live
// version, and its number (0 when none was deployed). Only the owner and
// the admin.
func (e *Engine) LiveCode(ctx context.Context, a Actor, appRef string) (Code, int, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return Code{}, 0, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return Code{}, 0, err
	}
	cv, err := e.st.ActiveCode(ctx, app.ID)
	if err != nil {
		return Code{}, 0, internal(err)
	}
	if cv == nil {
		return Code{}, 0, nil
	}
	return Code{Access: cv.Access, Backend: cv.Backend, Files: cv.Files}, cv.Version, nil
}
