package replay

import (
	"strings"
	"testing"
	"time"
)

func TestAcceptance(t *testing.T) {
	for _, c := range []struct {
		summaries []string
		want      string
	}{
		{nil, "unknown"},
		{[]string{"Task 3 done"}, "unknown"},
		{[]string{"acceptance tests: PASS"}, "PASS"},
		{[]string{"4 tests added, all pass"}, "PASS"},
		{[]string{"acceptance tests: PASS", "Tests FAIL on CI"}, "FAIL"},
		{[]string{"test: failures in parser"}, "FAIL"},
		{[]string{"red-team round 1: PASS"}, "unknown"}, // a gate verdict, not a test run
	} {
		if got := acceptance(c.summaries); got != c.want {
			t.Errorf("%q: got %s, want %s", c.summaries, got, c.want)
		}
	}
}

func TestGatePassed(t *testing.T) {
	for s, want := range map[string]bool{"round 3: PASS": true, "PASSED": true, "round 1: FAIL, 2 findings": false,
		"PASS with FAIL items": false, "passport": false, "": false} {
		if GatePassed(s) != want {
			t.Errorf("%q: want %v", s, want)
		}
	}
}

func TestSplitRunSession(t *testing.T) {
	base, arm, n, ok := SplitRunSession("ab-1-2-mutated-12")
	if !ok || base != "ab-1-2" || arm != "mutated" || n != 12 {
		t.Errorf("got %q %q %d %v", base, arm, n, ok)
	}
	for _, s := range []string{"r1", "r1-control", "r1-control-x", "-control-1", "r1-other-1"} {
		if _, _, _, ok := SplitRunSession(s); ok {
			t.Errorf("%q split", s)
		}
	}
	if RunSession("r1", ArmControl, 3) != "r1-control-3" {
		t.Error("RunSession")
	}
}

func FuzzSplitRunSession(f *testing.F) {
	f.Add("r1-control-1")
	f.Add("x-mutated-99999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		base, arm, n, ok := SplitRunSession(s)
		if ok && RunSession(base, arm, n) != s && !strings.HasPrefix(strings.TrimPrefix(s, base+"-"+arm+"-"), "0") {
			t.Fatalf("%q splits into %q %q %d", s, base, arm, n)
		}
	})
}

func abAtt(seq int, role, status, summary, session, arm string, replayOf int, at time.Time, dur int) Attempt {
	a := Attempt{Seq: seq, Role: role, Status: status, Summary: summary, ReplaySession: session, Arm: arm, Time: at, TimeFrom: "header"}
	if replayOf > 0 {
		a.ReplayOf = &replayOf
	}
	if dur >= 0 {
		a.Duration = &dur
	}
	if _, _, n, ok := SplitRunSession(session); ok {
		a.Repeat = n
	}
	return a
}

// An experiment of two repeats: the mutated arm passes the gate sooner; the
// ranges of the gate rounds do not overlap, those of the dispatches do.
func TestExperimentSpreadsAndRecords(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var as []Attempt
	as = append(as, abAtt(1, "red-team", "completed", "round 1: FAIL", "", "", 0, t0, 60),
		abAtt(2, "red-team", "completed", "round 2: PASS", "", "", 0, t0.Add(2*time.Minute), 60),
		abAtt(3, "fix-verifier", "completed", "acceptance tests: PASS", "", "", 0, t0.Add(4*time.Minute), 60))
	seq := 10
	add := func(session, arm string, statuses ...string) {
		for k, st := range statuses {
			role := "red-team"
			if k == 2 {
				role = "fix-verifier"
			}
			as = append(as, abAtt(seq, role, st, "", session, arm, k+1, t0.Add(time.Hour), 0))
			seq++
		}
	}
	add("e-control-1", ArmControl, "completed", "completed", "completed")
	add("e-mutated-1", ArmMutated, "completed", "skipped", "completed")
	add("e-control-2", ArmControl, "completed", "completed", "completed")
	add("e-mutated-2", ArmMutated, "completed", "skipped", "failed")
	if got := Experiments(as); len(got) != 1 || got[0] != "e" {
		t.Fatalf("experiments %q", got)
	}
	ex := BuildExperiment(as, "100", "e")
	if ex.Orig.Dispatches != 3 || ex.Orig.GateRounds != 2 || ex.Orig.Wall == nil || *ex.Orig.Wall != 5*time.Minute || ex.Orig.Acceptance != "PASS" {
		t.Errorf("original %+v", ex.Orig)
	}
	gc, gm := ex.ArmSpread(ArmControl, "gate_rounds"), ex.ArmSpread(ArmMutated, "gate_rounds")
	if gc.Min != 2 || gm.Max != 1 || Overlap(gc, gm) {
		t.Errorf("gate rounds %+v %+v", gc, gm)
	}
	if ex.ArmRuns(ArmMutated)[1].Status != "failed" {
		t.Errorf("status %s", ex.ArmRuns(ArmMutated)[1].Status)
	}
	report := RenderDiff(ex, nil)
	for _, want := range []string{
		"# Replay Diff: 100 vs e (2 runs per arm)",
		"| Quality gate rounds | 2 | mean 2 (min 2, max 2) | mean 1 (min 1, max 1) | -1 |",
		"- Quality gate rounds: the ranges do not overlap (control 2, mutated 1): a difference at 2 runs per arm.",
		"- Total dispatches: the ranges do not overlap (control 3, mutated 2): a difference at 2 runs per arm.",
		"| 2 | red-team | completed | completed (seq 11) | skipped (seq 14) |",
		"- no checkpoints of the runs' trees to compare",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	recs := DiffRecords(ex, func(RunStats) *ArtifactStat { return nil })
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	line, err := recs[1].Line()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"replay-diff","original_session":"100","replay_session":"e-mutated-2","mutations":[],"metrics":{"original_dispatches":3,"replayed_dispatches":2,"original_gate_rounds":2,"replayed_gate_rounds":1,"original_duration_m":5,"replayed_duration_m":0,"control_dispatches":3,"control_gate_rounds":2,"control_duration_m":0},"outcome":{"original":"PASS","replayed":"unknown","control":"unknown"},"artifact_diff":null,"control_session":"e-control-2","arm":"mutated","repeat":2}`
	if string(line) != want {
		t.Errorf("record\n%s\nwant\n%s", line, want)
	}
	if got := WorkTreeTimeline(as); len(got) != 3 {
		t.Errorf("the work tree's timeline keeps %d attempts, want the 3 original", len(got))
	}
}

// Gate rounds in two phases get a row each, after their total.
func TestGateRoundsPerPhase(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a1 := abAtt(1, "red-team", "completed", "FAIL", "", "", 0, t0, 0)
	a1.Phase = "2"
	a2 := abAtt(2, "quality-gate", "completed", "PASS", "", "", 0, t0, 0)
	a2.Phase = "4"
	m1 := abAtt(3, "red-team", "completed", "PASS", "x-mutated-1", ArmMutated, 1, t0, 0)
	m1.Phase = "2"
	m2 := abAtt(4, "quality-gate", "skipped", "", "x-mutated-1", ArmMutated, 2, t0, 0)
	m2.Phase = "4"
	ex := BuildExperiment([]Attempt{a1, a2, m1, m2}, "100", "x")
	report := RenderDiff(ex, nil)
	for _, want := range []string{
		"| Quality gate rounds | 2 | 1 | -1 |\n| Quality gate rounds, phase 2 | 1 | 1 | +0 |\n| Quality gate rounds, phase 4 | 1 | 0 | -1 |\n| Wall clock time |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// A run's wall clock ends with its last dispatch's end: when that dispatch
// has no duration_s (a skill recorded it without one), there is no wall
// clock, not a zero one; an earlier dispatch without one does not matter.
func TestWallClockNeedsTheLastEnd(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		atts []Attempt
		want *time.Duration
	}{
		{"all ended", []Attempt{abAtt(1, "r", "completed", "", "", "", 0, t0, 60), abAtt(2, "r", "completed", "", "", "", 0, t0.Add(time.Minute), 30)}, ptrDur(90 * time.Second)},
		{"last has no duration", []Attempt{abAtt(1, "r", "completed", "", "", "", 0, t0, 60), abAtt(2, "r", "completed", "", "", "", 0, t0.Add(time.Minute), -1)}, nil},
		{"only first has none", []Attempt{abAtt(1, "r", "completed", "", "", "", 0, t0, -1), abAtt(2, "r", "completed", "", "", "", 0, t0.Add(time.Minute), 30)}, ptrDur(90 * time.Second)},
		{"one without", []Attempt{abAtt(1, "r", "completed", "", "", "", 0, t0, -1)}, nil},
		{"no times", []Attempt{{Seq: 1, Role: "r", Status: "completed"}}, nil},
	} {
		got := statsOf(tc.atts).Wall
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: wall %v, want %v", tc.name, got, tc.want)
		}
	}
}

func ptrDur(d time.Duration) *time.Duration { return &d }

// A record of an original run that names no session says null, never "".
func TestRecordOriginalSessionNull(t *testing.T) {
	line, err := DiffRecord{ReplaySession: "e-mutated-1", Mutations: []string{}, Arm: ArmMutated, Repeat: 1}.Line()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"replay-diff","original_session":null,"replay_session":"e-mutated-1",`; !strings.HasPrefix(string(line), want) {
		t.Errorf("record %s, want it to start with %s", line, want)
	}
}
