// Package suggest finds the name a user probably meant, for the
// "did you mean" of an error.
package suggest

import (
	"slices"
	"strings"
)

// Closest returns the candidate nearest to s by edit distance, ignoring
// case, if it is near enough to be a typo of it: at most 2 edits, and
// at most half of s. "" when none is, or when s is a candidate itself.
func Closest(s string, candidates []string) string {
	if slices.Contains(candidates, s) {
		return ""
	}
	best, bestD := "", 3
	for _, c := range candidates {
		d := EditDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD && 2*d <= len(s) {
			best, bestD = c, d
		}
	}
	return best
}

// EditDistance is the number of byte insertions, deletions,
// substitutions and swaps of neighbours that turn a into b (optimal
// string alignment): a swap is one typo, "jbos" for "jobs".
func EditDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
