package engine

import (
	"strconv"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
)

func TestValidStaticPath(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"index.html", "css/site.css", "a/b/c.d.e", ".well-known/x", "é/ü.txt", "a..b", "...x"} {
		if err := ValidStaticPath(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for p, why := range map[string]string{
		"":                              "empty",
		"/etc/passwd":                   "absolute",
		"../x":                          "'..'",
		"a/../../x":                     "'..'",
		"a/..":                          "'..'",
		"./a":                           "'.'",
		"a//b":                          "empty name",
		"a/":                            "empty name",
		"a\\b":                          "backslash",
		"..\\..\\x":                     "backslash",
		"c:/windows":                    "colon",
		"a\x00b":                        "control",
		"a\nb":                          "control",
		"\xff":                          "UTF-8",
		strings.Repeat("a", 256):        "255",
		strings.Repeat("a/", 600) + "a": "limit",
	} {
		err := ValidStaticPath(p)
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want invalid mentioning %q", p, err, why)
		}
	}
}

func TestCheckStaticFilesLimits(t *testing.T) {
	t.Parallel()
	if err := checkStaticFiles(map[string][]byte{"a": make([]byte, MaxStaticFileBytes)}); err != nil {
		t.Fatalf("a file at the limit: %v", err)
	}
	if err := checkStaticFiles(map[string][]byte{"a": make([]byte, MaxStaticFileBytes+1)}); !errs.Is(err, errs.TooLarge) {
		t.Fatalf("a file over the limit: %v", err)
	}
	many := map[string][]byte{}
	for i := range MaxStaticFiles + 1 {
		many["f"+strconv.Itoa(i)] = nil
	}
	if err := checkStaticFiles(many); !errs.Is(err, errs.TooLarge) {
		t.Fatalf("too many files: %v", err)
	}
	big := map[string][]byte{}
	for i := range MaxStaticTotalBytes/MaxStaticFileBytes + 1 {
		big[string(rune('a'+i))] = make([]byte, MaxStaticFileBytes)
	}
	if err := checkStaticFiles(big); !errs.Is(err, errs.TooLarge) {
		t.Fatalf("too many bytes: %v", err)
	}
}
