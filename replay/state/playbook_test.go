package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const samplePlaybook = `# Pipeline State: 001-login

status: IN_PROGRESS
feature: 001-login
spec_hash: b59c39b9ae1f188e9bb73c99b5670f1949fc81f6aa966f9d4bab3fdf431367a3
current_stage: programmer
started_at: 2026-01-01T10:00:00Z

## Completed Stages

- [x] spec — feature.spec.md
- [X] clarify - feature.spec.md
- [ ] tdd: ` + "`tests/login_test.go`" + `

## Human Checkpoints

- [x] spec approval
- [ ] release approval

## Notes

Session 1 ran out of context.
`

func TestParsePlaybook(t *testing.T) {
	p, err := ParsePlaybook("s.md", []byte(samplePlaybook))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p.Bytes()); got != samplePlaybook {
		t.Errorf("Bytes does not give the file back:\n%s", got)
	}
	if p.Status() != StatusInProgress || p.CurrentStage() != "programmer" || p.Feature() != "001-login" {
		t.Errorf("header: %v", p.Header)
	}
	want := []StageEntry{{Stage: "spec", Artifact: "feature.spec.md", Done: true}, {Stage: "clarify", Artifact: "feature.spec.md", Done: true}, {Stage: "tdd", Artifact: "tests/login_test.go"}}
	if len(p.Completed) != len(want) {
		t.Fatalf("completed: %+v", p.Completed)
	}
	for i, w := range want {
		g := p.Completed[i]
		if g.Stage != w.Stage || g.Artifact != w.Artifact || g.Done != w.Done {
			t.Errorf("completed[%d] = %+v, want %+v", i, g, w)
		}
	}
	if p.PendingCheckpoint() != "release approval" || strings.Join(p.ClearedCheckpoints(), ",") != "spec approval" {
		t.Errorf("checkpoints: %+v", p.Checkpoints)
	}
	if p.Notes != "Session 1 ran out of context." || p.NotesLine != 20 {
		t.Errorf("notes %q at line %d", p.Notes, p.NotesLine)
	}
}

func TestParsePlaybookKeepsCRLF(t *testing.T) {
	in := strings.ReplaceAll(samplePlaybook, "\n", "\r\n")
	p, err := ParsePlaybook("s.md", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	p.addNote("x")
	if out := string(p.Bytes()); strings.Count(out, "\r\n") != strings.Count(out, "\n") {
		t.Errorf("a CRLF file was rewritten with mixed line ends:\n%q", out)
	}
}

func TestParsePlaybookErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"status: IN_PROGRESS\nsome prose\n", "s.md:2: not a `key: value` line in the header"},
		{"status: IN_PROGRESS\nstatus: FAILED\n", "s.md:2: status given twice (first on line 1)"},
		{"feature: x\n", "s.md: no status line in the header"},
		{"status: DONE\n", `s.md:1: unknown status "DONE"`},
		{"status: FAILED\ncurrent_stage: deploy\n", `s.md:2: unknown current_stage "deploy"`},
		{"status: FAILED\nstarted_at: monday\n", `s.md:2: started_at "monday" is not an ISO 8601 time`},
		{"status: FAILED\n## Completed Stages\n- [x] spec — a\n- [x] spec — b\n", "s.md:4: stage spec listed twice under Completed Stages (first on line 3)"},
		{"status: FAILED\n## Completed Stages\nspec done\n", "s.md:3: not a completed stage line"},
		{"status: FAILED\n## Human Checkpoints\n- [x]\n", "s.md:3: not a human checkpoint line"},
		{"status: FAILED\n## Notes\n## Notes\n", `s.md:3: section "Notes" given twice (first on line 2)`},
		{"status: FAILED\n\xff\n", "s.md: not valid UTF-8"},
	} {
		_, err := ParsePlaybook("s.md", []byte(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParsePlaybook(%q) = %v, want %q...", tc.in, err, tc.want)
		}
	}
}

func TestPlaybookRewriteAddsSections(t *testing.T) {
	p, err := ParsePlaybook("s.md", []byte("status: ABORTED\ncurrent_stage: tasks\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.setHeader("last_updated_at", "2026-01-02T03:04:05Z")
	p.setStageDone("tasks", "tasks.md", true)
	p.addNote("resumed")
	want := "status: ABORTED\ncurrent_stage: tasks\nlast_updated_at: 2026-01-02T03:04:05Z\n\n## Completed Stages\n\n- [x] tasks — tasks.md\n\n## Notes\n\n- resumed\n"
	if got := string(p.Bytes()); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if _, err := ParsePlaybook("s.md", p.Bytes()); err != nil {
		t.Errorf("the rewrite does not parse: %v", err)
	}
}

func TestConstitutionCheck(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		adr  string
		ok   bool
		why  string
		name string
	}{
		{"## Constitution Check\n\n| P | S |\n|---|---|\n| a | PASS |\n", true, "", "complete"},
		{"# ADR\n### Constitution Check (gates)\n| P | S |\n| :-- | --: |\n| a | yes |\n| b | no: see below |\n## Next\n| x | [ ] |\n", true, "", "a later table is not the check's"},
		{"## Constitution Check\n\n| P | S |\n|---|---|\n| a | [ ] |\n", false, "row 1 of the Constitution Check table is not filled in", "unchecked"},
		{"## Constitution Check\n\n| P | S |\n|---|---|\n| a |  |\n", false, "row 1 of the Constitution Check table is not filled in", "empty cell"},
		{"## Constitution Check\n\n| P | S |\n|---|---|\n", false, "the Constitution Check table has no rows", "no rows"},
		{"## Constitution Check\n\nTo do.\n", false, "no Constitution Check table", "no table"},
		{"## Decision\n\n| P | S |\n|---|---|\n| a | b |\n", false, "no Constitution Check section", "no section"},
	} {
		path := filepath.Join(dir, "adr.md")
		os.WriteFile(path, []byte(tc.adr), 0o644)
		ok, why := constitutionCheckComplete(path)
		if ok != tc.ok || why != tc.why {
			t.Errorf("%s: got %v %q, want %v %q", tc.name, ok, why, tc.ok, tc.why)
		}
	}
}

// writeFeature makes a feature folder with the spec the sample's hash names.
func writeFeature(t *testing.T, state string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "specs", "001-login")
	files["feature.spec.md"] = "A login feature.\n"
	files[PlaybookFile] = state
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDecidePlaybookEveryStageDone(t *testing.T) {
	dir := writeFeature(t, "status: IN_PROGRESS\nspec_hash: b59c39b9ae1f188e9bb73c99b5670f1949fc81f6aa966f9d4bab3fdf431367a3\ncurrent_stage: refactor\n\n## Completed Stages\n\n- [x] architect — adr.md\n- [ ] refactor — refactor.md\n",
		map[string]string{"adr.md": "## Constitution Check\n|a|b|\n|---|---|\n|x|PASS|\n", "refactor.md": "done\n"})
	d, err := DecidePlaybook(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision != DecisionResume || d.Stage != "" || d.Action != actionAllDone {
		t.Fatalf("decision %+v", d)
	}
	if err := Resume(d, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	p, _, err := LoadPlaybook(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status() != StatusComplete || !p.Completed[1].Done {
		t.Errorf("after resume: status %s, completed %+v", p.Status(), p.Completed)
	}
}

func TestDecidePlaybookArtifactFromProjectRoot(t *testing.T) {
	dir := writeFeature(t, "status: IN_PROGRESS\nspec_hash: b59c39b9ae1f188e9bb73c99b5670f1949fc81f6aa966f9d4bab3fdf431367a3\ncurrent_stage: clarify\n\n## Completed Stages\n\n- [x] spec — specs/001-login/feature.spec.md\n", map[string]string{})
	d, err := DecidePlaybook(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The spec path is from the project root and exists; clarify's artifact
	// (the spec, without markers) is complete, so the run advances.
	if d.Decision != DecisionResume || d.Stage != "architect" || len(d.Reopened) != 0 {
		t.Errorf("decision %+v", d)
	}
}

func TestResumeRefusesOtherDecisions(t *testing.T) {
	d := &PlaybookDecision{Decision: DecisionBlocked, File: "x"}
	if err := Resume(d, time.Now()); err == nil {
		t.Error("Resume of a blocked decision succeeded")
	}
}

// FuzzParsePlaybook: whatever parses renders back byte for byte, and every
// rewrite Resume makes of it parses again.
func FuzzParsePlaybook(f *testing.F) {
	f.Add([]byte(samplePlaybook))
	f.Add([]byte(strings.ReplaceAll(samplePlaybook, "\n", "\r\n")))
	f.Add([]byte("status: ABORTED\ncurrent_stage: tasks\n"))
	f.Add([]byte("# t\n<!-- c -->\nstatus: FAILED\n## Notes\n"))
	f.Add([]byte("status: IN_PROGRESS\n## Completed Stages\n\n## Human Checkpoints\n- [ ] a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlaybook("f.md", data)
		if err != nil {
			return
		}
		if out := p.Bytes(); len(data) > 0 && string(out) != string(data) && string(out) != string(data)+"\n" && string(out) != string(data)+"\r\n" {
			// Only a missing final line end may be added, and trailing
			// empty lines may not be dropped unnoticed.
			if strings.TrimRight(string(out), "\r\n") != strings.TrimRight(string(data), "\r\n") {
				t.Fatalf("render changed the file:\n%q\n%q", data, out)
			}
		}
		p.setHeader("last_updated_at", "2026-01-02T03:04:05Z")
		p.setHeader("status", StatusInProgress)
		p.setHeader("current_stage", "tdd")
		p.setStageDone("tdd", "t.go", true)
		p.setStageDone("spec", "", false)
		p.addNote("Resumed from checkpoint at 2026-01-02T03:04:05Z. Prior session ended at stage: tdd.")
		q, err := ParsePlaybook("f.md", p.Bytes())
		if err != nil {
			t.Fatalf("a rewrite does not parse: %v\n%q\n%q", err, data, p.Bytes())
		}
		if q.Status() != StatusInProgress || q.CurrentStage() != "tdd" || q.LastUpdatedAt() != "2026-01-02T03:04:05Z" {
			t.Fatalf("a rewrite lost its header: %v", q.Header)
		}
		if !strings.HasSuffix(q.Notes, "stage: tdd.") {
			t.Fatalf("a rewrite lost its note: %q", q.Notes)
		}
	})
}

// FuzzConstitutionCheck: any ADR is judged without a panic, and one judged
// complete has a Constitution Check heading and a table row.
func FuzzConstitutionCheck(f *testing.F) {
	f.Add("## Constitution Check\n\n| P | S |\n|---|---|\n| a | PASS |\n")
	f.Add("# ADR\n### constitution check\n|a|\n|-|\n|[ ]|\n## Next\n")
	f.Add("## Constitution Check\n| x |\n")
	path := filepath.Join(f.TempDir(), "adr.md")
	f.Fuzz(func(t *testing.T, adr string) {
		if err := os.WriteFile(path, []byte(adr), 0o644); err != nil {
			t.Fatal(err)
		}
		ok, why := constitutionCheckComplete(path)
		if ok && (why != "" || !strings.Contains(strings.ToLower(adr), "constitution check") || !strings.Contains(adr, "|")) {
			t.Fatalf("judged complete: %q", adr)
		}
		if !ok && why == "" {
			t.Fatalf("judged incomplete without a reason: %q", adr)
		}
	})
}
