package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const statusFile = `# Pipeline Status
**Updated:** 2026-03-01T10:52:00
**Skill:** build
**Phase:** 3 — Execute (Autonomous)
**Health:** YELLOW

## Recent Events
- [10:50] wave 2 started

## Compression State
Goal: Add retry logic to the HTTP client
Key Decisions:
- [DEC-1] exponential backoff: simpler than a token bucket
Active Constraints:
- keep the public API
Next Steps:
1. finish wave 2
2. code review
`

const handoff = `# Phase Handoff: 2 → 3
**Timestamp:** 2026-03-01T10:24:00Z
**Goal:** Add retry logic to the HTTP client (from the handoff)
**Mode:** refactor

## Inputs for Phase 3
- **Plan:** docs/plans/retry.md

## Decisions Carried Forward
- [DEC-1] exponential backoff: simpler than a token bucket
- [DEC-2] cap at 5 retries: the upstream SLA

## Active Constraints
- no new dependencies

## Shed Receipt
- design discussion → docs/design/retry.md
`

func TestLoadStatePriority(t *testing.T) {
	scratch := t.TempDir()
	mode := filepath.Join(t.TempDir(), "crucible-build-mode.md")

	// Nothing at all: feature mode, two warnings.
	st, warnings := LoadState(scratch, nil, mode)
	if st.Mode != "feature" || len(warnings) != 2 {
		t.Errorf("empty: %+v %q", st, warnings)
	}

	write(t, filepath.Join(scratch, "pipeline-status.md"), statusFile)
	write(t, mode, "mode: feature\nbaseline: 0123456789abcdef0123456789abcdef01234567\n")
	st, warnings = LoadState(scratch, nil, mode)
	if st.Goal != "Add retry logic to the HTTP client" || st.Mode != "feature" || len(st.Decisions) != 1 ||
		strings.Join(st.NextSteps, "|") != "finish wave 2|code review" || st.Baseline != "0123456789abcdef0123456789abcdef01234567" || len(warnings) != 0 {
		t.Errorf("status file: %+v %q", st, warnings)
	}

	// The newest handoff wins over the status file and the mode file.
	write(t, filepath.Join(scratch, "handoff-1-to-2.md"), "**Goal:** old goal\n")
	write(t, filepath.Join(scratch, "handoff-2-to-3.md"), handoff)
	st, _ = LoadState(scratch, nil, mode)
	if st.Goal != "Add retry logic to the HTTP client (from the handoff)" || st.Mode != "refactor" || len(st.Decisions) != 2 ||
		strings.Join(st.Constraints, "|") != "no new dependencies" || strings.Join(st.NextSteps, "|") != "Use Plan: docs/plans/retry.md" {
		t.Errorf("handoff: %+v", st)
	}
	if len(st.Sources) != 3 || filepath.Base(st.Sources[0]) != "handoff-2-to-3.md" {
		t.Errorf("sources %q", st.Sources)
	}
}

func TestRenderCSB(t *testing.T) {
	attempts, cps := buildRun()
	attempts[0].Summary = "Plan written: 4 tasks, 2 waves"
	p, err := Build(attempts, cps, allOK, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := State{Goal: "Add retry logic", Mode: "feature", Decisions: []string{"[DEC-1] backoff: simple"}, NextSteps: []string{"code review"}}
	got := RenderCSB(CSBInput{State: st, Plan: p, Skill: "build", Session: "replay-1", Scratch: "/scratch",
		Restored: []string{"client.go"}, Removed: []string{"scratch.txt"}, Redispatched: map[int]int{5: 7, 6: 8}})
	want := `===COMPRESSION_STATE===
Goal: Add retry logic
Skill: build
Phase: 3
Health: GREEN (reset on resume)
Mode: feature

Progress:
- Phase 2 completed in prior session
- Resuming from pre-wave-2 via replay
- seq 1 plan-writer (phase 2): Plan written: 4 tasks, 2 waves

Key Decisions (prior session):
- [DEC-1] backoff: simple

Active Constraints:
- Replay session replay-1 -- prior work verified through Phase 2

Files Modified:
- client.go: restored to the checkpoint
- scratch.txt: removed by the restore (not in the checkpoint)

Scratch State:
- Location: /scratch
- Recovery: pipeline-status.md, handoff manifests, manifest.jsonl

Next Steps:
1. Re-dispatch seq 5 (implementer, phase 3) as seq 7
2. Re-dispatch seq 6 (implementer, phase 3) as seq 8
3. code review
===END_COMPRESSION_STATE===
`
	if got != want {
		t.Errorf("CSB:\n%s\nwant:\n%s", got, want)
	}

	// With the state files known, Recovery names them in priority order.
	st.Sources = []string{"/scratch/handoff-2-to-3.md", "/scratch/pipeline-status.md"}
	got = RenderCSB(CSBInput{State: st, Plan: p, Skill: "build", Session: "replay-1", Scratch: "/scratch"})
	if !strings.Contains(got, "\n- Recovery: handoff-2-to-3.md, pipeline-status.md, manifest.jsonl\n") {
		t.Errorf("CSB with sources:\n%s", got)
	}
}

func FuzzStateParsers(f *testing.F) {
	f.Add(statusFile)
	f.Add(handoff)
	f.Add("mode: refactor\nabc1234\n")
	f.Fuzz(func(t *testing.T, text string) {
		var st State
		st.fromHandoff(text)
		st.fromCompressionState(text)
		parseModeFile(text)
	})
}

func TestNewestHandoffNames(t *testing.T) {
	scratch, debug := t.TempDir(), t.TempDir()
	at := func(path string, min int) {
		write(t, path, "**Goal:** "+filepath.Base(path)+"\n")
		ts := time.Date(2026, 3, 1, 10, min, 0, 0, time.UTC)
		if err := os.Chtimes(path, ts, ts); err != nil {
			t.Fatal(err)
		}
	}
	// Numbers, decimals included, order by phase whatever the file times.
	at(filepath.Join(scratch, "handoff-3.5-to-4.md"), 1)
	at(filepath.Join(scratch, "handoff-2-to-3.md"), 9)
	at(filepath.Join(scratch, "handoff-10-to-11.md"), 0)
	if got := filepath.Base(NewestHandoff([]string{scratch})); got != "handoff-10-to-11.md" {
		t.Errorf("numeric: %s", got)
	}
	// A token that is not a number (debugging's synthesis) orders them all by
	// file time; the debugging skill's own directory is read too.
	at(filepath.Join(debug, "handoff-0-to-1.md"), 2)
	at(filepath.Join(debug, "handoff-synthesis-to-3.md"), 5)
	if got := NewestHandoff([]string{scratch, debug}); got != filepath.Join(scratch, "handoff-2-to-3.md") {
		t.Errorf("by time: %s", got)
	}
	at(filepath.Join(debug, "handoff-4.5-to-5.md"), 20)
	if got := NewestHandoff([]string{"", scratch, filepath.Join(debug, "missing"), debug}); got != filepath.Join(debug, "handoff-4.5-to-5.md") {
		t.Errorf("newest: %s", got)
	}
	write(t, filepath.Join(debug, "handoff-to-5.md"), "not a handoff name")
	write(t, filepath.Join(debug, "handoff-1-to-2.txt"), "not a handoff name")
	if NewestHandoff([]string{t.TempDir()}) != "" {
		t.Errorf("a handoff in an empty directory")
	}
}

// A pipeline without a build mode (modeFile "") has no mode and no warning
// about the mode file.
func TestLoadStateWithoutModeFile(t *testing.T) {
	scratch := t.TempDir()
	write(t, filepath.Join(scratch, "handoff-0-to-1.md"), "**Goal:** fix the parser\n")
	st, warnings := LoadState(scratch, nil, "")
	if st.Mode != "" || st.Goal != "fix the parser" || len(warnings) != 0 {
		t.Errorf("%+v %q", st, warnings)
	}
}
