package replay

import (
	"testing"
	"time"
)

func TestRenderDryRun(t *testing.T) {
	attempts, cps := buildRun()
	attempts[0].Summary = "Plan written: 4 tasks | 2 waves"
	attempts[1].Summary = "Plan approved"
	p, err := Build(attempts, cps[:2], failing(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := RenderDryRun(Report{Source: "/tmp/crucible-dispatch-1/manifest.jsonl", Skill: "build", Session: "1", Started: at(10), Plan: p,
		Writes: []string{"client.go"}, Removes: []string{"retry.go"}})
	want := `# Replay Plan (dry-run)

**Source:** /tmp/crucible-dispatch-1/manifest.jsonl
**Original pipeline:** build | Session: 1 | Started: 2026-03-01T10:10:00Z
**Crashed at:** Phase 3, seq 6 (implementer) in flight
**Resume point:** Phase 2 boundary (pre-plan-gate)
**Work preserved:** 5m (part of phase 2)

Desired checkpoint pre-wave-1 not found. Falling back to pre-plan-gate. Replaying from Phase 2 instead of Phase 3.

## Dispatches to skip (verified complete)
| Seq | Role | Phase | Summary |
|-----|------|-------|---------|
| 1 | plan-writer | 2 | Plan written: 4 tasks \| 2 waves |

## Dispatches to re-execute
| Seq | Role | Phase | Original Status | Template |
|-----|------|-------|-----------------|----------|
| 2 | plan-reviewer | 2 | completed | plan-reviewer |
| 3 | implementer | 3 | completed | implementer |
| 4 | implementer | 3 | completed | implementer |
| 5 | implementer | 3 | completed | implementer |
| 6 | implementer | 3 | dispatched | implementer |

## Checkpoint to restore
c2 pre-plan-gate (taken 2026-03-01T10:15:00Z)

Would write (1):
- client.go
Would remove (1):
- retry.go

## Verification
| Seq | Role | Kind | Result |
|-----|------|------|--------|
| 1 | plan-writer | output | ok: checked |
| 2 | plan-reviewer | output | ok: checked |
| 3 | implementer | output | ok: checked |
| 4 | implementer | output | ok: checked |
| 5 | implementer | output | ok: checked |
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	for d, want := range map[int]string{59: "59s", 60: "1m", 3599: "59m", 3600: "1h 0m", 5400: "1h 30m"} {
		if got := Elapsed(time.Duration(d) * time.Second); got != want {
			t.Errorf("Elapsed(%ds) = %q, want %q", d, got, want)
		}
	}
}
