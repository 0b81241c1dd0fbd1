package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseLog(t *testing.T) {
	out := "aaaa1111 1772359200\nTask 3: add the parser\n\nBody line\n\x00bbbb2222 1772359260\nfix typo\n\x00"
	got := ParseLog([]byte(out))
	if len(got) != 2 || got[0].ID != "aaaa1111" || !got[0].Time.Equal(time.Unix(1772359200, 0)) ||
		got[0].Message != "Task 3: add the parser\n\nBody line\n" || got[1].Message != "fix typo\n" {
		t.Errorf("%+v", got)
	}
}

func TestNamesTask(t *testing.T) {
	for msg, want := range map[string]bool{
		"task 3: parser": true, "Task 3: parser": true, "feat(task-3): parser": true, "TASK #3 done": true,
		"task 31: other": false, "subtask 3": false, "tasks 3": false, "task3 parser": true,
	} {
		if got := namesTask(msg, 3); got != want {
			t.Errorf("namesTask(%q) = %v", msg, got)
		}
	}
}

func TestSummaryMatch(t *testing.T) {
	words := significantWords("Added retry logic to the HTTP client with exponential backoff")
	if strings.Join(words, ",") != "retry,logic,http,client,exponential,backoff" {
		t.Fatalf("words %v", words)
	}
	if !sharesHalf("http client: retry with backoff", words) {
		t.Errorf("4 of 6 words did not match")
	}
	if sharesHalf("http client cleanup", words) {
		t.Errorf("2 of 6 words matched")
	}
}

func TestVerifyByKind(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "2-code-reviewer-result.md"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	v := &Verification{
		Kinds:      DefaultRoleKinds(),
		ResultDirs: []string{"", filepath.Join(dir, "missing"), dir},
		Commits: []Commit{
			{ID: "1111111111", Time: at(12), Message: "task 4: wire the parser"},
			{ID: "2222222222", Time: at(40), Message: "unrelated"},
		},
		Checkpoints: []time.Time{at(20)},
		Warn:        func(s string) { warnings = append(warnings, s) },
	}
	dur := 120
	impl := Attempt{Seq: 1, File: "1-implementer.md", Role: "implementer", Status: "completed", Task: intp(4), Duration: &dur, Time: at(10)}
	if f := v.Verify(Dispatch{}, impl); !f.OK || f.Kind != Mutating || f.Detail != "commit 11111111 names task 4" {
		t.Errorf("implementer: %+v", f)
	}
	late := impl
	late.Time = at(5) // the commit lands after the window (5 + 2 + 1 minutes)
	if f := v.Verify(Dispatch{}, late); f.OK {
		t.Errorf("commit outside the window accepted: %+v", f)
	}
	noDuration := impl
	noDuration.Duration = nil
	noDuration.Time = at(5) // window: up to the next boundary checkpoint (minute 20)
	if f := v.Verify(Dispatch{}, noDuration); !f.OK {
		t.Errorf("no duration: %+v", f)
	}
	rev := Attempt{Seq: 2, File: "2-code-reviewer.md", Role: "code-reviewer", Status: "completed"}
	if f := v.Verify(Dispatch{}, rev); !f.OK || f.Detail != "result file 2-code-reviewer-result.md present" {
		t.Errorf("reviewer: %+v", f)
	}
	rev.Seq, rev.File = 3, "3-code-reviewer.md"
	if f := v.Verify(Dispatch{}, rev); f.OK || f.Detail != "no result file 3-code-reviewer-result.md, no receipt-ledger entry 3-code-reviewer, no output file named by the dispatch file" {
		t.Errorf("reviewer without result: %+v", f)
	}
	// After the cleanup of a finished pipeline, a missing result file is
	// expected: taken as completed, and listed.
	v.CleanedUp = true
	if f := v.Verify(Dispatch{}, rev); !f.OK || len(v.Unkept) != 1 || v.Unkept[0] != 3 {
		t.Errorf("reviewer after the cleanup: %+v, unkept %v", f, v.Unkept)
	}
	v.CleanedUp = false
	// A dispatch whose time is unknown (its file is gone) is checked against
	// the whole history read.
	unknown := impl
	unknown.Time = time.Time{}
	if f := v.Verify(Dispatch{}, unknown); !f.OK {
		t.Errorf("unknown time: %+v", f)
	}
	unknown.Task = intp(9)
	unknown.Summary = "something else entirely"
	if f := v.Verify(Dispatch{}, unknown); f.OK || !strings.Contains(f.Detail, "time is unknown") {
		t.Errorf("unknown time, no commit: %+v", f)
	}
	gate := Attempt{Seq: 4, Role: "quality-gate", Status: "completed"}
	if f := v.Verify(Dispatch{}, gate); !f.OK || f.Kind != NoCheck {
		t.Errorf("quality gate: %+v", f)
	}
	odd := Attempt{Seq: 5, File: "5-bard.md", Role: "bard", Status: "completed"}
	v.Verify(Dispatch{}, odd)
	v.Verify(Dispatch{}, odd)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "--role-kind bard=mutating|output|none") {
		t.Errorf("warnings %q", warnings)
	}
}

func TestRoleKindsSet(t *testing.T) {
	k := DefaultRoleKinds()
	if err := k.Set("bard=mutating"); err != nil || k["bard"] != Mutating {
		t.Errorf("set: %v", err)
	}
	for _, bad := range []string{"bard", "=output", "bard=sometimes"} {
		if err := k.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseLog(f *testing.F) {
	f.Add([]byte("aaaa 1772359200\nmsg\n\x00bbbb 12\n\x00"))
	f.Add([]byte("\x00\x00 \n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, c := range ParseLog(out) {
			if c.ID == "" || strings.ContainsRune(c.Message, 0) {
				t.Fatalf("bad commit %+v", c)
			}
		}
	})
}

func TestAnotherTasksCommitIsNotEvidence(t *testing.T) {
	v := &Verification{Kinds: DefaultRoleKinds(), Commits: []Commit{
		{ID: "2222222222", Time: at(11), Message: "task 2: redone"},
	}}
	a := Attempt{Seq: 7, Role: "implementer", Status: "completed", Task: intp(1), Summary: "task 1 redone", Time: at(10)}
	if f := v.Verify(Dispatch{}, a); f.OK {
		t.Errorf("a commit naming task 2 verified task 1: %+v", f)
	}
}

// An amended or rebased commit keeps its author date: its work counts in the
// window where it was authored, though it was committed again later.
func TestAmendedCommitStillVerifies(t *testing.T) {
	v := &Verification{
		Kinds:   DefaultRoleKinds(),
		Commits: []Commit{{ID: "3333333333", Time: at(19), Authored: at(11), Message: "task 2: the lexer"}},
	}
	dur := 120
	impl := Attempt{Seq: 4, File: "4-implementer.md", Role: "implementer", Status: "completed", Task: intp(2), Duration: &dur, Time: at(10)}
	if f := v.Verify(Dispatch{}, impl); !f.OK {
		t.Errorf("amended commit not accepted: %+v", f)
	}
	v.Commits[0].Authored = at(19)
	if f := v.Verify(Dispatch{}, impl); f.OK {
		t.Errorf("a commit made and authored after the window accepted: %+v", f)
	}
}
