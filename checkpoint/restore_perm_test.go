package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A restore whose .gitignore ignores a whole directory leaves that
// directory's bits alone: once restored, the rule holds nothing in it, so the
// undo would not see the directory and could not set its bits back. (seed 22
// of the soak run of TestRuleProperty found it.)
func TestRestoreUndoDirIgnoredAfter(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	rgit(t, wt, "init", "-q")
	c := filepath.Join(wt, "c")
	mustWrite(t, filepath.Join(c, "f1"), "one\n")
	mustWrite(t, filepath.Join(wt, "f2"), "two\n")
	mustWrite(t, filepath.Join(wt, ".gitignore"), "c/\n")
	rgit(t, wt, "add", "-f", "c/f1")
	if err := os.Chmod(c, 0o750); err != nil {
		t.Fatal(err)
	}
	// The target: c/f1 tracked, so held although its .gitignore ignores c/.
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	rgit(t, wt, "rm", "-q", "--cached", "c/f1")
	mustWrite(t, filepath.Join(wt, ".gitignore"), "*.log\n")
	if err := os.Chmod(c, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "f2"), "changed\n")
	before := listing(t, wt, true)
	res, err := s.Restore(ctx, "target", RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(c); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the restore changed the bits of c, which its rules ignore (%v, %v); chmod %v", fi.Mode(), err, res.Chmod)
	}
	if _, err := s.Restore(ctx, res.Safety.Short(), RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffMaps(before, listing(t, wt, true)); d != "" {
		t.Errorf("the undo is not exact: %s", d)
	}
	if fi, err := os.Stat(c); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("after the undo c is %v (%v), want 0755", fi.Mode(), err)
	}
}
