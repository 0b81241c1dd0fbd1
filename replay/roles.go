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
	Output   RoleKind = "output"   // produces output: a result file, a receipt-ledger entry or a named output file
	NoCheck  RoleKind = "none"     // conversation output only: nothing to check
)

// RoleKinds maps role names to kinds. It is data: --role-kind ROLE=KIND extends
// or overrides it.
type RoleKinds map[string]RoleKind

// mutatingRoles are the roles whose dispatches commit to the project: crucible's
// implementers and fixers (build, debugging, quality-gate's fix agent, siege's
// fix agent), its test writers, and adversarial-tester, which writes and commits
// the tests that break the code. A manifest's role is either the role name or
// the template name, so both are listed.
var mutatingRoles = []string{
	"implementer", "build-implementer", "refactor-implementer", "fixer", "fix", "cleanup", "refactor",
	"test-writer", "test-gap-writer", "acceptance-test-writer", "contract-test-writer",
	"adversarial-tester", "break-it", "crucible-qg-fix", "qg-fix", "fix-generated-defect", "where-else",
	"test-fix",
}

// outputRoles are the roles whose dispatches produce a report, a plan, a
// verdict or findings and change nothing in the project.
var outputRoles = []string{
	// build
	"reviewer", "plan-reviewer", "build-reviewer", "code-reviewer", "architecture-reviewer", "plan-writer", "prd-writer",
	// gates and reviews run as sub-skills
	"red-team", "crucible-red-team", "crucible-qg-judge", "crucible-qg-verifier", "qg-judge", "qg-verifier",
	"stagnation-judge", "fix-verifier", "persistence-checker", "scope-judge", "temper", "temper-reviewer",
	"inquisitor", "innovate", "auditor", "audit", "delve",
	// debugging
	"investigator", "pattern-analyst", "synthesis",
	// siege and its attackers
	"siege", "siege-boundary-attacker", "siege-insider-threat", "siege-infrastructure-prober",
	"siege-betrayed-consumer", "siege-fresh-attacker", "siege-chain-analyst", "siege-stagnation-judge",
}

// DefaultRoleKinds is the role table for crucible's skills (build,
// quality-gate, debugging, siege, temper and the sub-skills they dispatch).
func DefaultRoleKinds() RoleKinds {
	k := RoleKinds{}
	for _, r := range mutatingRoles {
		k[r] = Mutating
	}
	for _, r := range outputRoles {
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
