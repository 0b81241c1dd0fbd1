package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const samplePhase = `{"workflow_id":"wf-1","started_at":"2026-01-02T01:00:00Z","last_updated":"2026-01-02T02:00:00.5+01:00","current_phase":"ARCHITECTURE","phase_status":"in_progress","completed_phases":[{"phase":"REQUIREMENTS","completed_at":"2026-01-02T01:10:00Z","output":"memory/reports/demand.json","size":3}],"user_checkpoints":[{"phase":"REQUIREMENTS","approved_at":"2026-01-02T01:15:00Z"}],"interruption_safe":true,"z":{"b":1},"a":null}`

func TestParsePhaseRoundTrip(t *testing.T) {
	s, err := ParsePhase("p.json", []byte(samplePhase))
	if err != nil {
		t.Fatal(err)
	}
	if s.WorkflowID != "wf-1" || s.CurrentPhase != "ARCHITECTURE" || len(s.CompletedPhases) != 1 || s.CompletedPhases[0].Output != "memory/reports/demand.json" {
		t.Errorf("parsed %+v", s)
	}
	out := string(s.Bytes())
	for _, want := range []string{`"size": 3`, `"a": null`, "\"z\": {\n    \"b\": 1\n  }"} {
		if !strings.Contains(out, want) {
			t.Errorf("a key the schema does not name was lost (%s):\n%s", want, out)
		}
	}
	if strings.Index(out, `"a": null`) < strings.Index(out, `"interruption_safe"`) {
		t.Errorf("other keys come after the schema's:\n%s", out)
	}
	again, err := ParsePhase("p.json", []byte(out))
	if err != nil || string(again.Bytes()) != out {
		t.Errorf("rendering is not stable: %v", err)
	}
}

func TestParsePhaseProblems(t *testing.T) {
	_, err := ParsePhase("p.json", []byte(`{"workflow_id":7,"started_at":"2026-01-02T01:00:00Z","current_phase":"REQUIREMENTS","phase_status":"in_progress","completed_phases":[3],"user_checkpoints":null,"interruption_safe":true}`))
	var se *SchemaError
	if !errors.As(err, &se) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v", err)
	}
	want := []string{"workflow_id: must be a string, not a number", "last_updated: required", "completed_phases[0]: must be an object, not a number", "user_checkpoints: must not be null"}
	if strings.Join(se.Problems, "|") != strings.Join(want, "|") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(se.Problems, "\n"), strings.Join(want, "\n"))
	}
	for _, in := range []string{``, `[]`, `null`, `{} {}`, `{"a":1}x`, "\xff"} {
		if _, err := ParsePhase("p.json", []byte(in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParsePhase(%q) = %v, want a corrupt state error", in, err)
		}
	}
}

func TestProgression(t *testing.T) {
	done := func(phases ...string) []CompletedPhase {
		var out []CompletedPhase
		for _, p := range phases {
			out = append(out, CompletedPhase{Phase: p})
		}
		return out
	}
	for _, tc := range []struct {
		current, status string
		completed       []CompletedPhase
		ok              bool
	}{
		{"REQUIREMENTS", "in_progress", nil, true},
		{"ARCHITECTURE", "pending", done("REQUIREMENTS"), true},
		{"REQUIREMENTS", "complete", done("REQUIREMENTS"), true},
		{"REFLECTION", "complete", done(Phases...), true},
		{"REQUIREMENTS", "in_progress", done("REQUIREMENTS"), false},
		{"IMPLEMENTATION", "in_progress", done("REQUIREMENTS"), false},
		{"ARCHITECTURE", "in_progress", done("ARCHITECTURE"), false},
		{"VERIFICATION", "in_progress", done("REQUIREMENTS", "REQUIREMENTS"), false},
	} {
		s := &PhaseState{CurrentPhase: tc.current, PhaseStatus: tc.status, CompletedPhases: tc.completed}
		if got := s.progression(); (len(got) == 0) != tc.ok {
			t.Errorf("%s/%s after %v: %v", tc.current, tc.status, tc.completed, got)
		}
	}
}

func writeState(t *testing.T, root, phase, exec string) {
	t.Helper()
	sd := StateDirOf(root)
	os.MkdirAll(sd, 0o755)
	if phase != "" {
		os.WriteFile(filepath.Join(sd, PhaseFile), []byte(phase), 0o644)
	}
	if exec != "" {
		os.WriteFile(filepath.Join(sd, ExecutionFile), []byte(exec), 0o644)
	}
}

func TestDecidePhaseExecutionAloneIsBlocked(t *testing.T) {
	root := t.TempDir()
	writeState(t, root, "", `{"tasks":[]}`)
	d, err := DecidePhase(root, CheckOptions{Now: testNow})
	if err != nil || d.Decision != DecisionBlocked || d.Blocking[0].Kind != "phase_missing" {
		t.Fatalf("%v %+v", err, d)
	}
}

func TestRecoverWithoutState(t *testing.T) {
	if _, err := Recover(t.TempDir(), testNow); !errors.Is(err, ErrNoState) {
		t.Errorf("got %v", err)
	}
}

func TestSetCompletesAndAdvances(t *testing.T) {
	root := t.TempDir()
	if _, err := Set(root, SetOptions{WorkflowID: "wf", Now: testNow}); err != nil {
		t.Fatal(err)
	}
	if _, err := Set(root, SetOptions{Status: "complete", Now: testNow}); err != nil {
		t.Fatal(err)
	}
	// Advancing to ARCHITECTURE is fine now; jumping to VERIFICATION is not.
	if _, err := Set(root, SetOptions{Phase: "VERIFICATION", Status: "in_progress", Now: testNow}); err == nil {
		t.Fatal("a skipped phase was accepted")
	}
	p, err := Set(root, SetOptions{Phase: "ARCHITECTURE", Status: "in_progress", Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if p.CurrentPhase != "ARCHITECTURE" || len(p.CompletedPhases) != 1 || !p.InterruptionSafe {
		t.Errorf("%+v", p)
	}
}

func TestArchiveRotationOrder(t *testing.T) {
	root := t.TempDir()
	archives := filepath.Join(StateDirOf(root), ArchiveDir)
	// Names sort by their time, then their -N suffix, whatever the workflow id.
	for _, name := range []string{"zz_20260101T000000Z", "aa_20260103T000000Z", "mm_20260102T000000Z", "mm_20260102T000000Z-2", "mm_20260102T000000Z-10", "keep-me", ".tmp-x_20260109T000000Z"} {
		os.MkdirAll(filepath.Join(archives, name), 0o755)
	}
	// made names the archive just made, which counts among the kept ones;
	// with none, keep 4 keeps three.
	removed, err := rotateArchives(archives, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(removed, " "); got != "mm_20260102T000000Z-2 mm_20260102T000000Z zz_20260101T000000Z" {
		t.Errorf("removed %s", got)
	}
	for _, name := range []string{"aa_20260103T000000Z", "mm_20260102T000000Z-10", "keep-me"} {
		if !exists(filepath.Join(archives, name)) {
			t.Errorf("%s was removed", name)
		}
	}
}

func TestArchiveRotationBySequence(t *testing.T) {
	root := t.TempDir()
	archives := filepath.Join(StateDirOf(root), ArchiveDir)
	// Sequenced archives rank by their sequence, above every archive made
	// before sequences were recorded; the archive just made is never removed.
	for name, seq := range map[string]string{"w_20260105T000000Z": "", "w_20260101T000000Z": "1\n", "w_20270101T000000Z": "2\n", "w_20250101T000000Z": "3\n", "w_20200101T000000Z": "4\n"} {
		os.MkdirAll(filepath.Join(archives, name), 0o755)
		if seq != "" {
			os.WriteFile(filepath.Join(archives, name, ArchiveSeqFile), []byte(seq), 0o644)
		}
	}
	removed, err := rotateArchives(archives, "w_20200101T000000Z", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(removed, " "); got != "w_20270101T000000Z w_20260101T000000Z w_20260105T000000Z" {
		t.Errorf("removed %s", got)
	}
	if !exists(filepath.Join(archives, "w_20200101T000000Z")) || !exists(filepath.Join(archives, "w_20250101T000000Z")) {
		t.Error("a kept archive was removed")
	}
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{"wf-1": "wf-1", "../../etc": "_.._etc", "a b/c": "a_b_c", "..": "unknown", "": "unknown"} {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWriteDocumentUnknownFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "notes.json")
	if err := WriteDocument(f, []byte(`{}`), testNow); !errors.Is(err, ErrUnknownFile) || exists(f) {
		t.Errorf("got %v", err)
	}
}

// FuzzParsePhase: whatever parses renders to a document that parses to the
// same rendering.
func FuzzParsePhase(f *testing.F) {
	f.Add([]byte(samplePhase))
	f.Add([]byte(`{"workflow_id":"w","started_at":"2026-01-02T01:00:00","last_updated":"2026-01-02 01:00:00","current_phase":"REFLECTION","phase_status":"complete","completed_phases":[],"user_checkpoints":[],"interruption_safe":false}`))
	f.Add([]byte(`{"workflow_id":"w"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParsePhase("p.json", data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", err)
			}
			return
		}
		out := s.Bytes()
		again, err := ParsePhase("p.json", out)
		if err != nil {
			t.Fatalf("the rendering does not parse: %v\n%s", err, out)
		}
		if string(again.Bytes()) != string(out) {
			t.Fatalf("rendering is not stable:\n%s\n%s", out, again.Bytes())
		}
	})
}

// FuzzParseExecution: the same for execution.json.
func FuzzParseExecution(f *testing.F) {
	f.Add([]byte(`{"workflow_id":"w","tasks":[{"id":"t","status":"running","attempts":2,"started_at":"2026-01-02T01:00:00Z","completed_at":null,"output":"o.json","x":[1]}]}`))
	f.Add([]byte(`{"tasks":[]}`))
	f.Add([]byte(`{"tasks":[{"id":"a","status":"pending","attempts":1e3}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := ParseExecution("e.json", data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", err)
			}
			return
		}
		out := x.Bytes()
		again, err := ParseExecution("e.json", out)
		if err != nil {
			t.Fatalf("the rendering does not parse: %v\n%s", err, out)
		}
		if string(again.Bytes()) != string(out) {
			t.Fatalf("rendering is not stable:\n%s\n%s", out, again.Bytes())
		}
	})
}
