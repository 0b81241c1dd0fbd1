package replay

import (
	"errors"
	"os"
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
