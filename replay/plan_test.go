package replay

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func intp(n int) *int { return &n }

func att(seq int, role, phase, status string, min int) Attempt {
	return Attempt{Seq: seq, File: fmt.Sprintf("%d-%s.md", seq, role), Role: role, Phase: phase, Status: status, Time: at(min)}
}

// buildRun is a build pipeline that crashed in wave 2 of phase 3 with one
// dispatch in flight.
func buildRun() ([]Attempt, []Checkpoint) {
	attempts := []Attempt{
		att(1, "plan-writer", "2", "completed", 10),
		att(2, "plan-reviewer", "2", "completed", 20),
		att(3, "implementer", "3", "completed", 30),
		att(4, "implementer", "3", "completed", 31),
		att(5, "implementer", "3", "completed", 50),
		att(6, "implementer", "3", "dispatched", 51),
	}
	cps := []Checkpoint{
		{ID: "c1", Reason: "pre-design-gate", Time: at(5)},
		{ID: "c2", Reason: "pre-plan-gate", Time: at(15)},
		{ID: "c3", Reason: "pre-wave-1", Time: at(25)},
		{ID: "c4", Reason: "pre-wave-2", Time: at(45)},
		{ID: "s1", Reason: "pre-restore-safety", Time: at(52)},
	}
	return attempts, cps
}

func seqs(ds []Dispatch) []int {
	out := []int{}
	for _, d := range ds {
		out = append(out, d.Seq())
	}
	return out
}

func allOK(d Dispatch, a Attempt) Finding {
	return Finding{Seq: a.Seq, Role: a.Role, Kind: Output, OK: true, Detail: "checked"}
}

func failing(bad ...int) Verifier {
	return func(d Dispatch, a Attempt) Finding {
		for _, b := range bad {
			if a.Seq == b {
				return Finding{Seq: a.Seq, Role: a.Role, Kind: Output, Detail: "missing"}
			}
		}
		return allOK(d, a)
	}
}

func TestMidWaveResume(t *testing.T) {
	attempts, cps := buildRun()
	p, err := Build(attempts, cps, allOK, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Restore == nil || p.Restore.Reason != "pre-wave-2" {
		t.Fatalf("restore %+v, want pre-wave-2", p.Restore)
	}
	if got := seqs(p.Redo); !reflect.DeepEqual(got, []int{5, 6}) {
		t.Errorf("redo %v, want [5 6]: a wave is redone whole", got)
	}
	if got := seqs(p.Skip); !reflect.DeepEqual(got, []int{1, 2, 3, 4}) {
		t.Errorf("skip %v", got)
	}
	if p.ResumePhase != "3" || p.Fallback || p.CrashPhase != "3" || p.CrashContext != "seq 6 (implementer) in flight" {
		t.Errorf("plan %+v", p)
	}
	if len(p.Findings) != 5 {
		t.Errorf("%d findings, want 5 (every completed dispatch before the problem)", len(p.Findings))
	}
	want := []PhaseState{{"2", "complete", []int{1, 2}}, {"3", "in flight", []int{3, 4, 5, 6}}}
	if !reflect.DeepEqual(p.Phases, want) {
		t.Errorf("phases %+v", p.Phases)
	}
}

func TestFailedVerificationMovesBack(t *testing.T) {
	attempts, cps := buildRun()
	p, err := Build(attempts, cps, failing(4), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Restore.Reason != "pre-wave-1" || !reflect.DeepEqual(seqs(p.Redo), []int{3, 4, 5, 6}) {
		t.Errorf("restore %s redo %v", p.Restore.Reason, seqs(p.Redo))
	}
	if last := p.Findings[len(p.Findings)-1]; last.Seq != 4 || last.OK {
		t.Errorf("last finding %+v", last)
	}
	// Failing earlier still: back to the plan gate.
	p, _ = Build(attempts, cps, failing(2, 4), Options{})
	if p.Restore.Reason != "pre-plan-gate" || p.ResumePhase != "2" {
		t.Errorf("restore %s phase %s", p.Restore.Reason, p.ResumePhase)
	}
}

func TestMissingCheckpointFallsBack(t *testing.T) {
	attempts, cps := buildRun()
	// Only the design and plan gates survive.
	p, err := Build(attempts, cps[:2], allOK, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Fallback || p.Desired != "pre-wave-1" || p.Restore.Reason != "pre-plan-gate" || p.ResumePhase != "2" || p.ProblemPhase != "3" {
		t.Errorf("plan: fallback %v desired %q restore %q resume %q problem %q", p.Fallback, p.Desired, p.Restore.Reason, p.ResumePhase, p.ProblemPhase)
	}
}

func TestNoCheckpoint(t *testing.T) {
	attempts, cps := buildRun()
	if _, err := Build(attempts, nil, allOK, Options{}); !errors.Is(err, ErrNoBoundary) {
		t.Errorf("err = %v, want ErrNoBoundary", err)
	}
	// Safety checkpoints are never boundaries.
	if _, err := Build(attempts, cps[4:], allOK, Options{}); !errors.Is(err, ErrNoBoundary) {
		t.Errorf("safety only: err = %v", err)
	}
	p, err := Build(attempts, nil, allOK, Options{NoRestore: true})
	if err != nil || p.Restore != nil || !reflect.DeepEqual(seqs(p.Redo), []int{6}) {
		t.Errorf("--no-restore: err %v redo %v", err, seqs(p.Redo))
	}
}

func TestFromPhaseAndSeq(t *testing.T) {
	attempts, cps := buildRun()
	p, err := Build(attempts, cps, allOK, Options{FromPhase: "2"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Restore.Reason != "pre-design-gate" || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "earlier than the automatic resume point") {
		t.Errorf("restore %s warnings %q", p.Restore.Reason, p.Warnings)
	}
	p, err = Build(attempts, cps, allOK, Options{FromSeq: 4})
	if err != nil {
		t.Fatal(err)
	}
	if p.Restore.Reason != "pre-wave-1" || !reflect.DeepEqual(seqs(p.Redo), []int{3, 4, 5, 6}) {
		t.Errorf("--from-seq 4: restore %s redo %v", p.Restore.Reason, seqs(p.Redo))
	}
	if _, err := Build(attempts, cps, allOK, Options{FromSeq: 99}); err == nil {
		t.Errorf("--from-seq 99 accepted")
	}
	if _, err := Build(attempts, cps, allOK, Options{FromPhase: "9"}); err == nil || !strings.Contains(err.Error(), "phases: 2, 3") {
		t.Errorf("--from-phase 9: %v", err)
	}
}

func TestReplayedDispatchCountsAsDone(t *testing.T) {
	attempts, cps := buildRun()
	// A first replay restored pre-wave-2 at minute 60 and redid 5 and 6 as 7 and 8.
	attempts = append(attempts,
		Attempt{Seq: 7, File: "7-implementer.md", Role: "implementer", Phase: "3", Status: "completed", ReplayOf: intp(5), Time: at(61)},
		Attempt{Seq: 8, File: "8-implementer.md", Role: "implementer", Phase: "3", Status: "completed", ReplayOf: intp(6), Time: at(62)},
		att(9, "code-reviewer", "4", "dispatched", 80),
	)
	cps = append(cps, Checkpoint{ID: "c5", Reason: "pre-temper", Time: at(75)})
	p, err := Build(attempts, cps, allOK, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Restore.Reason != "pre-temper" || !reflect.DeepEqual(seqs(p.Redo), []int{9}) {
		t.Errorf("restore %s redo %v", p.Restore.Reason, seqs(p.Redo))
	}
	if got := p.Phases[1].Status; got != "complete" {
		t.Errorf("phase 3 is %s after its replays completed", got)
	}
}

func TestAbandonedCheckpointIsSkipped(t *testing.T) {
	attempts, cps := buildRun()
	// The first run got as far as pre-temper (minute 55); a replay then restored
	// pre-wave-2 and redid 5 (as 7), which is now in flight.
	attempts[5].Status = "completed"
	cps = append(cps, Checkpoint{ID: "old", Reason: "pre-temper", Time: at(55)})
	attempts = append(attempts, Attempt{Seq: 7, File: "7-implementer.md", Role: "implementer", Phase: "3", Status: "dispatched", ReplayOf: intp(5), Time: at(70)})
	p, err := Build(attempts, cps, allOK, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Restore.Reason != "pre-wave-2" {
		t.Errorf("restore %s: the discarded timeline's pre-temper was used", p.Restore.Reason)
	}
}

func TestCompletePipeline(t *testing.T) {
	attempts, cps := buildRun()
	attempts[5].Status = "completed"
	p, err := Build(attempts, cps, allOK, Options{})
	if err != nil || !p.Complete || len(p.Redo) != 0 {
		t.Errorf("err %v complete %v redo %v", err, p.Complete, seqs(p.Redo))
	}
	if _, err := Build(nil, cps, allOK, Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v", err)
	}
}

func TestUnknownTimesAreInferred(t *testing.T) {
	attempts, cps := buildRun()
	attempts[4].Time = time.Time{} // seq 5's dispatch file is lost
	ds := GroupAttempts(attempts)
	for _, d := range ds {
		if d.Seq() == 5 && (!d.Latest().Time.Equal(at(31)) || d.Latest().TimeFrom != "inferred") {
			t.Errorf("seq 5 time %v from %q", d.Latest().Time, d.Latest().TimeFrom)
		}
	}
	// Seq 5 may have run after pre-wave-2 (it lies between seq 4 and seq 6): the
	// restore undoes it, so it is redone.
	p, _ := Build(attempts, cps, allOK, Options{})
	if p.Restore.Reason != "pre-wave-2" || !reflect.DeepEqual(seqs(p.Redo), []int{5, 6}) {
		t.Errorf("restore %s redo %v", p.Restore.Reason, seqs(p.Redo))
	}
}

func TestReasonMatching(t *testing.T) {
	for _, tc := range []struct {
		reason, prefix string
		want           bool
	}{
		{"pre-wave-3", "pre-wave-", true},
		{"pre-wave-12", "pre-wave-1", false},
		{"pre-wave-1", "pre-wave-1", true},
		{"pre-wave-1-retry", "pre-wave-1", true},
		{"pre-temper", "pre-temper", true},
		{"pre-temperature", "pre-temper", false},
		{"pre-wave-x", "pre-wave-", false},
	} {
		if got := matchesReason(tc.reason, tc.prefix); got != tc.want {
			t.Errorf("matchesReason(%q, %q) = %v", tc.reason, tc.prefix, got)
		}
	}
	for reason, want := range map[string]bool{
		"pre-wave-2": true, "pre-code-review": true, "pre-qg-fix-round-2": true, "pre-debug-gate": true,
		"pre-restore-safety": false, "pre-restore-safety-file": false, "manual": false, "pre-cleanup-task-4": true,
		"pre-siege-fix-round-3": true, "pre-siege-fix-round-N": false, "pre-where-else": true, "pre-debug-fix-cycle-1": true,
	} {
		if IsBoundaryReason(reason) != want {
			t.Errorf("IsBoundaryReason(%q) != %v", reason, want)
		}
	}
}

// Asking for the phase the automatic resume point starts redoes no verified
// work: no "earlier than" warning, though the phase's first dispatch precedes
// the one that failed.
func TestFromPhaseOfTheAutomaticBoundaryDoesNotWarn(t *testing.T) {
	attempts, cps := buildRun()
	attempts[5].Status = "completed"
	attempts = append(attempts, att(7, "code-reviewer", "4", "completed", 60), att(8, "fixer", "4", "dispatched", 62))
	cps = append(cps, Checkpoint{ID: "c5", Reason: "pre-temper", Time: at(55)})
	for _, opt := range []Options{{FromSeq: 8}, {FromPhase: "4"}} {
		p, err := Build(attempts, cps, allOK, opt)
		if err != nil {
			t.Fatal(err)
		}
		if p.Restore.Reason != "pre-temper" || len(p.Warnings) != 0 || !reflect.DeepEqual(seqs(p.Redo), []int{7, 8}) {
			t.Errorf("%+v: restore %s warnings %q redo %v", opt, p.Restore.Reason, p.Warnings, seqs(p.Redo))
		}
	}
	p, err := Build(attempts, cps, allOK, Options{FromPhase: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "phase 3 is earlier than the automatic resume point (phase 4)") {
		t.Errorf("--from-phase 3: warnings %q", p.Warnings)
	}
}
