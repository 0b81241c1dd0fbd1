package checkpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A repository without rewind's record and without core.worktree (a
// procedure store whose config lost it, a bare init) is adopted only as the
// default store of the work tree its directory's name hashes, and refused
// anywhere else; once adopted it records the work tree.
func TestAdoptByDefaultDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	wt, _ := filepath.EvalSymlinks(t.TempDir())
	mustWrite(t, filepath.Join(wt, "a.txt"), "a")
	dir := DefaultDir(home, wt)
	other := filepath.Join(t.TempDir(), "store")
	for _, d := range []string{dir, other} {
		if out, err := exec.Command("git", "init", "-q", "--bare", d).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	if _, err := Open(wt, other); !errors.Is(err, ErrForeignStore) {
		t.Errorf("a repository without a record outside the default location: %v, want ErrForeignStore", err)
	}
	s, err := Open(wt, "")
	if err != nil {
		t.Fatalf("the default store, made by the procedure: %v", err)
	}
	if _, err := s.Create(context.Background(), CreateOptions{Reason: "c1", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(s.ownerFile()); err != nil || string(data) != wt+"\n" {
		t.Errorf("record after adoption: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "info", "attributes")); err != nil {
		t.Errorf("adoption wrote no attributes: %v", err)
	}
	other2, _ := filepath.EvalSymlinks(t.TempDir())
	if _, err := Open(other2, s.Dir); !errors.Is(err, ErrForeignStore) {
		t.Errorf("the adopted store for another work tree: %v", err)
	}
}
