package replay

import (
	"strconv"
	"strings"
)

// buildBoundaries is the build pipeline's phase-boundary table (reference §5):
// the checkpoint reason taken at each boundary and the phase it starts or sits in.
// Reasons match by prefix at a word boundary, the newest match winning.
var buildBoundaries = []struct {
	reason string
	phase  string
	start  bool // the boundary at the start of its phase
}{
	{"pre-design-gate", "2", true},
	{"pre-plan-gate", "2", false},
	{"pre-wave-1", "3", true},
	{"pre-wave-", "3", false}, // pre-wave-N, N > 1
	{"pre-temper", "4", true},
	{"pre-code-review", "4", true}, // the older name of pre-temper
	{"pre-inquisitor", "4", false},
	{"pre-impl-gate", "4", false},
}

// otherBoundaryPrefixes are the checkpoint reasons crucible's other skills
// take (read from their SKILL.md files): build's cleanup tasks, quality-gate's
// and siege's fix rounds (code artifacts only), debugging's fix cycles, its
// "where else?" scan and its quality gate; and rewind's own pre-phase-<P>.
var otherBoundaryPrefixes = []string{
	"pre-cleanup-task-", "pre-qg-fix-round-", "pre-siege-fix-round-",
	"pre-debug-fix-cycle-", "pre-where-else", "pre-debug-gate",
	"pre-phase-", // rewind's own, taken by replay --exec at a phase start no skill names
}

// IsBoundaryReason reports whether a checkpoint reason marks a pipeline boundary
// replay may resume from. Safety checkpoints (pre-restore-safety*) never do: they
// hold the state a restore discarded, not a verified boundary.
func IsBoundaryReason(reason string) bool {
	if strings.HasPrefix(reason, "pre-restore-safety") {
		return false
	}
	for _, b := range buildBoundaries {
		if matchesReason(reason, b.reason) {
			return true
		}
	}
	for _, p := range otherBoundaryPrefixes {
		if matchesReason(reason, p) {
			return true
		}
	}
	return false
}

// matchesReason reports whether reason equals prefix or extends it at a word
// boundary: "pre-wave" matches "pre-wave-3", "pre-wave-1" does not match
// "pre-wave-12". A prefix ending in "-" wants a number after it.
func matchesReason(reason, prefix string) bool {
	if strings.HasSuffix(prefix, "-") {
		rest, ok := strings.CutPrefix(reason, prefix)
		if !ok {
			return false
		}
		digits := rest
		if i := strings.IndexAny(rest, "-_ ."); i >= 0 {
			digits = rest[:i]
		}
		_, err := strconv.Atoi(digits)
		return err == nil
	}
	if !strings.HasPrefix(reason, prefix) {
		return false
	}
	if len(reason) == len(prefix) {
		return true
	}
	// "pre-temper-retry" extends pre-temper; "pre-wave-12" does not extend
	// "pre-wave-1".
	return strings.ContainsRune("-_ .:", rune(reason[len(prefix)]))
}

// desiredBoundary is the build checkpoint reason at the start of phase, or "".
func desiredBoundary(phase string) string {
	for _, b := range buildBoundaries {
		if b.phase == phase && b.start {
			return b.reason
		}
	}
	return ""
}
