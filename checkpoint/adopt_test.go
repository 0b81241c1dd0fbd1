package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A moved project: its old store is read-only for the new path, Adopt moves
// it to the new path's default location and records the new path, a crash
// between the record and the move is finished by adopting again, and an old
// path that still exists as another directory is refused.
func TestAdoptMovedProject(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("HOME", home)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	oldWT, newWT := filepath.Join(root, "old"), filepath.Join(root, "new")
	mustWrite(t, filepath.Join(oldWT, "a.txt"), "a")
	s, err := Open(oldWT, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "c1", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	oldDir := s.Dir
	if err := os.Rename(oldWT, newWT); err != nil {
		t.Fatal(err)
	}

	// Read-only: listed, never written.
	ro, err := OpenReadOnly(newWT, oldDir)
	if err != nil || ro.Foreign != oldWT {
		t.Fatalf("OpenReadOnly: %+v, %v", ro, err)
	}
	if cps, err := ro.List(ctx); err != nil || len(cps) != 1 {
		t.Fatalf("list: %d, %v", len(cps), err)
	}
	if _, err := ro.Create(ctx, CreateOptions{Reason: "c2", Source: "t"}); !errors.Is(err, ErrForeignStore) {
		t.Errorf("create on a read-only store: %v, want ErrForeignStore", err)
	}
	if _, _, _, _, err := ro.Diff(ctx, "c1", "", ""); !errors.Is(err, ErrForeignStore) {
		t.Errorf("diff with the work tree on a read-only store: %v, want ErrForeignStore", err)
	}
	if _, err := Open(newWT, oldDir); !errors.Is(err, ErrForeignStore) {
		t.Errorf("Open of the old store: %v, want ErrForeignStore", err)
	}

	// A crash after the record, before the move: adopting again moves it.
	newDir := DefaultDir(home, newWT)
	if err := writeAtomic(filepath.Join(oldDir, "rewind-worktree"), []byte(newWT+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Adopt(ctx, AdoptOptions{From: oldDir, To: newDir, WorkTree: newWT})
	if err != nil || !res.Moved || res.Checkpoints != 1 {
		t.Fatalf("adopt: %+v, %v", res, err)
	}
	if isDir(oldDir) {
		t.Error("the old store is still there")
	}
	s2, err := Open(newWT, "")
	if err != nil {
		t.Fatal(err)
	}
	if cps, err := s2.List(ctx); err != nil || len(cps) != 1 || cps[0].Reason != "c1" {
		t.Fatalf("list after adopt: %v, %v", cps, err)
	}

	// The old path exists again, as another project: refused.
	mustWrite(t, filepath.Join(oldWT, "b.txt"), "b")
	other, _ := filepath.EvalSymlinks(t.TempDir())
	_, err = Adopt(ctx, AdoptOptions{From: newDir, To: DefaultDir(home, other), WorkTree: other})
	if err == nil || !errors.Is(err, ErrAdoptRefused) {
		// newDir records newWT, which exists and is another directory than other
		t.Errorf("adopting a store whose work tree exists: %v, want ErrAdoptRefused", err)
	}
	if _, err := Open(newWT, ""); err != nil {
		t.Errorf("a refused adoption changed the store: %v", err)
	}
}
