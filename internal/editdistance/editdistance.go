// Package editdistance measures how far apart two short strings are, for
// "did you mean" suggestions and typo checks.
package editdistance

import "strings"

// Levenshtein is the number of single-byte insertions, deletions and
// substitutions that turn a into b.
func Levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Closest is the candidate nearest to s, compared ignoring case (edit
// distance at most 2, or a prefix either way of at least 3 letters), ""
// when none is close or s is one of them: the one "did you mean" rule of
// names the user types (roles, profiles, hostnames, boards).
func Closest(s string, candidates []string) string {
	best, bestD := "", 3
	ls := strings.ToLower(s)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if ls == lc {
			return ""
		}
		d := Levenshtein(ls, lc)
		if len(ls) >= 3 && (strings.HasPrefix(lc, ls) || strings.HasPrefix(ls, lc)) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
