package replay

import (
	"fmt"
	"sort"
	"strings"
)

// RoleKind says how a completed dispatch of a role is verified.
type RoleKind string

const (
	Mutating RoleKind = "mutating" // changes the project: a matching commit must exist
	Output   RoleKind = "output"   // produces a result file: it must exist
	NoCheck  RoleKind = "none"     // conversation output only: nothing to check
)

// RoleKinds maps role names to kinds. It is data: --role-kind ROLE=KIND extends
// or overrides it.
type RoleKinds map[string]RoleKind

// DefaultRoleKinds is the table for crucible's build, quality-gate and debugging
// skills.
func DefaultRoleKinds() RoleKinds {
	k := RoleKinds{}
	for _, r := range []string{"implementer", "build-implementer", "fixer", "fix", "cleanup", "refactor",
		"refactor-implementer", "test-writer", "test-gap-writer", "acceptance-test-writer", "contract-test-writer"} {
		k[r] = Mutating
	}
	for _, r := range []string{"reviewer", "plan-reviewer", "build-reviewer", "code-reviewer",
		"architecture-reviewer", "plan-writer", "red-team", "inquisitor", "auditor"} {
		k[r] = Output
	}
	k["quality-gate"] = NoCheck
	return k
}

// Set parses one ROLE=KIND assignment.
func (k RoleKinds) Set(assignment string) error {
	role, kind, ok := strings.Cut(assignment, "=")
	role = strings.TrimSpace(role)
	switch RoleKind(kind) {
	case Mutating, Output, NoCheck:
	default:
		ok = false
	}
	if !ok || role == "" {
		return fmt.Errorf("role kind %q: want ROLE=mutating, ROLE=output or ROLE=none", assignment)
	}
	k[role] = RoleKind(kind)
	return nil
}

// Kind returns the kind of role, and whether the role is known. Unknown roles
// are verified as Output: the safer of the two checks that can fail.
func (k RoleKinds) Kind(role string) (RoleKind, bool) {
	kind, ok := k[role]
	if !ok {
		return Output, false
	}
	return kind, true
}

// Names lists the roles of a kind, sorted.
func (k RoleKinds) Names(kind RoleKind) []string {
	var out []string
	for r, rk := range k {
		if rk == kind {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}
