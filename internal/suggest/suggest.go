// Package suggest finds the closest valid spelling for a mistyped name, so
// errors can say "did you mean ...".
package suggest

import "strings"

// Closest returns the candidate nearest to word by edit distance, or "" when
// none is close enough to be a plausible typo.
func Closest(word string, candidates []string) string {
	best, bestDist := "", -1
	w := strings.ToLower(word)
	for _, c := range candidates {
		if len(w) > len(c)+4 {
			// Far longer than the candidate: at least that many edits away,
			// and not contained in it, so never suggested; skipping keeps a
			// 2 MB key from costing a quadratic distance.
			continue
		}
		d := distance(w, strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	// A typo changes a few characters; beyond that the suggestion is noise.
	limit := len(word)/2 + 1
	if limit > 4 {
		limit = 4
	}
	if bestDist > limit && !strings.Contains(strings.ToLower(best), w) {
		return ""
	}
	return best
}

// distance is the Damerau-Levenshtein (optimal string alignment) distance.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
