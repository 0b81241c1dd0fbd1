package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The jobs Write returns keep the original dispatches' times, so Waves still
// splits a redo that spans a wave boundary at that boundary's checkpoint.
func TestWriteKeepsOriginalTimesForWaves(t *testing.T) {
	dir := t.TempDir()
	attempts, cps := buildRun()
	var lines []string
	for _, a := range attempts {
		lines = append(lines, fmt.Sprintf(`{"seq":%d,"file":%q,"role":%q,"phase":%q,"task":null,"status":%q}`, a.Seq, a.File, a.Role, a.Phase, a.Status))
		write(t, filepath.Join(dir, a.File), Header{Template: a.Role, Pipeline: "build", Phase: a.Phase, Timestamp: a.Time.Format(time.RFC3339), DispatchDir: dir}.Render()+"\nbody\n")
	}
	write(t, filepath.Join(dir, "manifest.jsonl"), strings.Join(lines, "\n")+"\n")
	ds := GroupAttempts(attempts)
	r := Redispatcher{DispatchDir: dir, Lookup: []string{dir}, Skill: "build", Session: "s1", Now: at(100)}
	jobs, err := r.Write(ds[2:]) // seqs 3 to 6: wave 1 and wave 2 of phase 3
	if err != nil {
		t.Fatal(err)
	}
	got, reasons := waveShape(Waves(jobs, cps), func(j Job) int { return j.Seq })
	if !reflect.DeepEqual(got, [][]int{{7, 8}, {9, 10}}) || !reflect.DeepEqual(reasons, []string{"", "pre-wave-2"}) {
		t.Errorf("waves %v reasons %q, want [[7 8] [9 10]] [\"\" \"pre-wave-2\"]", got, reasons)
	}
	data, err := os.ReadFile(filepath.Join(dir, "7-implementer.md"))
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := ParseDispatchFile(string(data)); h.Timestamp != at(100).UTC().Format(time.RFC3339) {
		t.Errorf("new dispatch file timestamp %q, want the replay's time", h.Timestamp)
	}
}

// A second replay re-dispatches attempts that a first replay sent all at one
// time; their waves still follow the original run's boundaries.
func TestWavesOfASecondReplayFollowTheOriginalRun(t *testing.T) {
	dir := t.TempDir()
	attempts, cps := buildRun()
	var lines []string
	add := func(a Attempt, replayOf int) {
		extra := ""
		if replayOf > 0 {
			extra = fmt.Sprintf(`,"replay_of":%d,"replay_session":"r1"`, replayOf)
		}
		lines = append(lines, fmt.Sprintf(`{"seq":%d,"file":%q,"role":%q,"phase":%q,"task":null,"status":%q%s}`, a.Seq, a.File, a.Role, a.Phase, a.Status, extra))
		write(t, filepath.Join(dir, a.File), Header{Template: a.Role, Pipeline: "build", Phase: a.Phase, Timestamp: a.Time.Format(time.RFC3339), DispatchDir: dir}.Render()+"\nbody\n")
	}
	for _, a := range attempts {
		add(a, 0)
	}
	// The first replay redid seqs 3 to 6 as 7 to 10, all stamped at minute 60.
	for i, orig := range []int{3, 4, 5, 6} {
		a := att(7+i, "implementer", "3", "failed", 60)
		a.ReplayOf = intp(orig)
		attempts = append(attempts, a)
		add(a, orig)
	}
	write(t, filepath.Join(dir, "manifest.jsonl"), strings.Join(lines, "\n")+"\n")
	ds := GroupAttempts(attempts)
	r := Redispatcher{DispatchDir: dir, Lookup: []string{dir}, Skill: "build", Session: "s2", Now: at(100)}
	jobs, err := r.Write(ds[2:])
	if err != nil {
		t.Fatal(err)
	}
	got, _ := waveShape(Waves(jobs, cps), func(j Job) int { return j.ReplayOf })
	if !reflect.DeepEqual(got, [][]int{{3, 4}, {5, 6}}) {
		t.Errorf("waves %v, want [[3 4] [5 6]]", got)
	}
}

func TestFindTemplate(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "fixer.md"), "fixer")
	write(t, filepath.Join(dir, "skills", "build", "build-implementer-prompt.md"), "build implementer")
	write(t, filepath.Join(dir, "skills", "build", "test-gap-writer-prompt.md"), "build test gaps")
	write(t, filepath.Join(dir, "skills", "debugging", "test-gap-writer-prompt.md"), "debugging test gaps")
	write(t, filepath.Join(dir, "skills", "debugging", "investigator-prompt.md"), "investigator")
	for _, tc := range []struct{ skill, name, want string }{
		{"build", "fixer", "fixer.md"},
		{"build", "build-implementer", "skills/build/build-implementer-prompt.md"},
		{"build", "investigator", "skills/debugging/investigator-prompt.md"},
		{"debugging", "test-gap-writer", "skills/debugging/test-gap-writer-prompt.md"},
		{"build", "test-gap-writer", "skills/build/test-gap-writer-prompt.md"},
		{"", "test-gap-writer", "skills/build/test-gap-writer-prompt.md"},
		{"build", "plan-writer", ""},
		{"build", "../fixer", ""},
	} {
		got := FindTemplate(dir, tc.skill, tc.name)
		want := ""
		if tc.want != "" {
			want = filepath.Join(dir, tc.want)
		}
		if got != want {
			t.Errorf("FindTemplate(%q, %q) = %q, want %q", tc.skill, tc.name, got, want)
		}
	}
	if FindTemplate("", "build", "fixer") != "" {
		t.Errorf("a template without --templates")
	}
}
