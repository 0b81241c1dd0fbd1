package replay

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMutation(t *testing.T) {
	dir := t.TempDir()
	repl := filepath.Join(dir, "new.md")
	os.WriteFile(repl, []byte("text"), 0o644)
	m, err := ParseMutation("red-team-prompt.md=" + repl)
	if err != nil || m.Orig != "red-team-prompt.md" || m.Text != "text" || m.Label() != "red-team-prompt.md -> new.md" {
		t.Fatalf("%+v %v", m, err)
	}
	if !m.Uses("red-team") || m.Uses("red") || !(MutationSpec{Orig: "red-team.md"}).Uses("red-team") {
		t.Error("Uses")
	}
	for _, bad := range []string{"", "x", "=y", "x=", "a/b.md=" + repl, "..=" + repl, "x.md=" + dir, "x.md=" + filepath.Join(dir, "missing")} {
		if _, err := ParseMutation(bad); !errors.Is(err, ErrMutation) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParseMutation(f *testing.F) {
	f.Add("a.md=/dev/null")
	f.Add("=")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMutation(s)
		if err == nil && (m.Orig == "" || strings.Contains(m.Orig, "/") || !strings.HasPrefix(s, m.Orig+"=")) {
			t.Fatalf("%q parsed as %+v", s, m)
		}
	})
}

func TestCheckArmsDir(t *testing.T) {
	wt := t.TempDir()
	wt, _ = filepath.EvalSymlinks(wt)
	if err := CheckArmsDir(filepath.Join(wt, "arms"), wt, nil); !errors.Is(err, ErrArmsDir) {
		t.Errorf("inside the work tree: %v", err)
	}
	out := t.TempDir()
	os.Mkdir(filepath.Join(out, "r1-control-1"), 0o755)
	if err := CheckArmsDir(out, wt, []string{"r1-control-1"}); !errors.Is(err, ErrArmsDir) {
		t.Errorf("a run there already: %v", err)
	}
	if err := CheckArmsDir(out, wt, []string{"r2-control-1"}); err != nil {
		t.Error(err)
	}
}

// Pinned templates are found as on disk, in a crucible checkout's layout, from
// a directory below the repository's top level too.
func TestTemplatesPinnedLayout(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x",
			"GIT_COMMITTER_DATE=2026-02-01T00:00:00Z", "GIT_AUTHOR_DATE=2026-02-01T00:00:00Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	write := func(rel, text string) {
		p := filepath.Join(repo, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(text), 0o644)
	}
	git("init", "-q")
	write("vendor/crucible/skills/build/build-reviewer-prompt.md", "old reviewer\n")
	write("vendor/crucible/skills/red-team/red-team-prompt.md", "old red team\n")
	git("add", "-A")
	git("commit", "-q", "-m", "one")
	write("vendor/crucible/skills/build/build-reviewer-prompt.md", "new reviewer\n")
	git("commit", "-q", "-am", "two")

	tm := &Templates{Dir: filepath.Join(repo, "vendor", "crucible"), Skill: "build"}
	if err := tm.Pin(context.Background(), "HEAD~1"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"build-reviewer": "old reviewer\n", "red-team": "old red team\n"} {
		tf, ok, err := tm.Find(context.Background(), name)
		if err != nil || !ok || tf.Text != want || tf.Name != name+"-prompt.md" || tf.Modified.Year() != 2026 || tf.Modified.Month() != 2 {
			t.Errorf("%s: %+v %v %v", name, tf, ok, err)
		}
	}
	if _, ok, _ := tm.Find(context.Background(), "nosuch"); ok {
		t.Error("found a template that is not there")
	}
	for _, bad := range []string{"-x", "", "nosuch"} {
		if err := (&Templates{Dir: repo}).Pin(context.Background(), bad); !errors.Is(err, ErrTemplateRef) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
