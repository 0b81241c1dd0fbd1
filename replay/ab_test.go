package replay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/manifest"
)

// Execute runs a run's dispatches in order: once a gate round passes, the
// loop's later fixes and rounds are skipped; a dispatch after the loop runs;
// after a failure nothing more is sent.
func TestExecuteGateLoopAndStopRule(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	armDispatch := filepath.Join(dir, "arm")
	orig := filepath.Join(dir, "orig")
	for _, d := range []string{work, armDispatch, orig} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	roles := []string{"red-team", "fixer", "red-team", "fixer", "red-team", "implementer", "reviewer", "implementer"}
	var jobs []Job
	for i, role := range roles {
		seq := i + 10
		name := filepath.Join(armDispatch, strconv.Itoa(seq)+"-"+role+".md")
		h := Header{Template: role, Pipeline: "build", Phase: "4", Task: "-", Timestamp: "2026-03-01T10:00:00Z", DispatchDir: orig + "/"}
		for _, p := range []string{name, filepath.Join(orig, filepath.Base(name))} {
			if err := os.WriteFile(p, []byte(h.Render()+"\n"+role+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		phase, session := "4", "e-mutated-1"
		if _, err := manifest.Before(orig, manifest.Dispatched{Seq: int64(seq), File: filepath.Base(name), Role: role, Phase: &phase, ReplaySession: &session}, false, nil); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, Job{Seq: seq, ReplayOf: i + 1, From: Attempt{Role: role, Phase: "4"}, DispatchFile: name})
	}
	// Round 1 fails, round 2 passes; the reviewer fails.
	agent := `case $REWIND_SEQ in 10) echo "SUMMARY: round 1: FAIL";; 12) echo "SUMMARY: round 2: PASS";; 16) echo "SUMMARY: review FAIL"; exit 1;; *) echo "SUMMARY: $REWIND_ROLE done";; esac`
	s := &ABSetup{DispatchDir: orig}
	run := &ABRun{Arm: ArmMutated, Repeat: 1, Session: "e-mutated-1", WorkTree: work, DispatchDir: armDispatch, Jobs: jobs}
	var got []string
	err := s.Execute(context.Background(), run, agent, func() time.Time { return time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC) },
		func(_ *ABRun, j Job, status, summary string) { got = append(got, strconv.Itoa(j.Seq)+" "+status) })
	if err != nil {
		t.Fatal(err)
	}
	want := "10 completed,11 completed,12 completed,13 skipped,14 skipped,15 completed,16 failed,17 error"
	if strings.Join(got, ",") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, ","), want)
	}
	if !run.Failed || run.Completed != 4 {
		t.Errorf("failed %v completed %d", run.Failed, run.Completed)
	}
	data, _ := os.ReadFile(filepath.Join(orig, "manifest.jsonl"))
	if !strings.Contains(string(data), `"seq":13,"file":"13-fixer.md","role":"fixer","phase":"4","task":null,"status":"skipped","duration_s":null,"summary":"not needed: the quality gate passed at seq 12"`) {
		t.Errorf("manifest:\n%s", data)
	}
	if _, err := os.Stat(filepath.Join(orig, "12-red-team-result.md")); err != nil {
		t.Errorf("the result is not kept beside the pipeline's dispatch files: %v", err)
	}
}

func TestIsGateRoleLeavesOutTheLoopsFixes(t *testing.T) {
	for role, want := range map[string]bool{
		"red-team": true, "quality-gate": true, "crucible-red-team": true, "crucible-qg-judge": true, "crucible-qg-review": true,
		"crucible-qg-fix": false, "qg-fix": false, "fixer": false, "implementer": false,
	} {
		if got := IsGateRole(role); got != want {
			t.Errorf("IsGateRole(%q) = %v, want %v", role, got, want)
		}
	}
}

func TestCheckArmsDirThroughASymlinkToTheWorkTree(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "proj")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(work, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(root, "link", "arms"), filepath.Join(root, "link", "a", "b")} {
		if err := CheckArmsDir(dir, work, nil); !errors.Is(err, ErrArmsDir) {
			t.Errorf("CheckArmsDir(%s) = %v, want ErrArmsDir", dir, err)
		}
	}
	if err := CheckArmsDir(filepath.Join(root, "arms"), work, nil); err != nil {
		t.Errorf("an arms directory beside the project: %v", err)
	}
}
