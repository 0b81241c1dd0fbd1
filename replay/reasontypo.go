package replay

import (
	"regexp"
	"strings"
	"sync"
)

// letterDigit is a letter followed by a digit with no separator: pre-wave1.
var letterDigit = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([a-z])([0-9])`) })

// BoundaryTypo reports whether a checkpoint reason that is not a boundary
// looks like a mistyped one (pre-wave1, Pre_Wave_2, pre-temepr), and the known
// form it was likely meant as. Such a reason is still a valid label; replay
// just never resumes from it, so it is worth a warning when it is taken.
func BoundaryTypo(reason string) (string, bool) {
	if reason == "" || IsBoundaryReason(reason) || strings.HasPrefix(reason, "pre-restore-safety") {
		return "", false
	}
	norm := strings.ToLower(strings.TrimSpace(reason))
	norm = strings.NewReplacer("_", "-", " ", "-", ".", "-").Replace(norm)
	norm = letterDigit().ReplaceAllString(norm, "$1-$2")
	norm = strings.ReplaceAll(norm, "--", "-")
	if !strings.HasPrefix(norm, "pre-") && strings.HasPrefix(norm, "pre") {
		norm = "pre-" + strings.TrimPrefix(norm, "pre")
	}
	if norm != reason && IsBoundaryReason(norm) {
		return norm, true
	}
	// A misspelt name: within two edits of a fixed boundary reason, or of a
	// numbered one with its number.
	for _, b := range buildBoundaries {
		known := b.reason
		if strings.HasSuffix(known, "-") {
			continue
		}
		if d := editDistance(norm, known); d > 0 && d <= 2 && len(norm) > 5 {
			return known, true
		}
	}
	for _, p := range append([]string{"pre-wave-"}, otherBoundaryPrefixes...) {
		if !strings.HasSuffix(p, "-") {
			if d := editDistance(norm, p); d > 0 && d <= 2 && len(norm) > 5 {
				return p, true
			}
			continue
		}
		// pre-wvae-3: compare the name part, keep the number.
		i := strings.LastIndexByte(norm, '-')
		if i < 0 {
			continue
		}
		name, num := norm[:i+1], norm[i+1:]
		if num == "" || strings.Trim(num, "0123456789") != "" {
			continue
		}
		if d := editDistance(name, p); d > 0 && d <= 2 {
			return p + num, true
		}
	}
	return "", false
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
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
