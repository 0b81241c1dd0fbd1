package checkpoint

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// WriteTree puts a checkpoint's files into another directory without touching
// the work tree, CreateFrom records that directory in the store without
// touching the store's index of the work tree, and NumStat counts the lines
// between the two.
func TestArmWriteTreeCreateFromNumStat(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a.txt"), "one\ntwo\n")
	mustWrite(t, filepath.Join(wt, "bin/run.sh"), "#!/bin/sh\n")
	os.Chmod(filepath.Join(wt, "bin/run.sh"), 0o755)
	c, err := s.Create(ctx, CreateOptions{Reason: "pre-wave-1", Source: "build"})
	if err != nil {
		t.Fatal(err)
	}
	before := listing(t, wt, false)
	index, err := os.ReadFile(s.indexFile())
	if err != nil {
		t.Fatal(err)
	}

	arm := filepath.Join(t.TempDir(), "arm")
	if err := os.Mkdir(arm, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "init", "-q", arm).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if _, err := s.WriteTree(ctx, c.Checkpoint.ID, arm); err != nil {
		t.Fatal(err)
	}
	got := listing(t, arm, true)
	want := listing(t, wt, true)
	if d := diffMaps(want, got); d != "" {
		t.Fatalf("the arm differs from the checkpoint: %s", d)
	}
	if fi, err := os.Stat(filepath.Join(arm, "bin/run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("the executable bit is lost: %v %v", fi.Mode(), err)
	}

	mustWrite(t, filepath.Join(arm, "a.txt"), "one\nTWO\nthree\n")
	mustWrite(t, filepath.Join(arm, "new.txt"), "x\n")
	made, err := s.CreateFrom(ctx, arm, CreateOptions{Reason: "ab-r1-mutated-1", Source: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.NumStat(ctx, c.Checkpoint.ID, made.Checkpoint.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st != (DiffStat{FilesChanged: 2, Insertions: 3, Deletions: 1}) || st.String() != "2 files changed, +3/-1 lines" {
		t.Errorf("numstat %+v %q", st, st)
	}
	if d := diffMaps(before, listing(t, wt, false)); d != "" {
		t.Errorf("the work tree changed: %s", d)
	}
	if after, _ := os.ReadFile(s.indexFile()); string(after) != string(index) {
		t.Errorf("the store's index of the work tree changed")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(arm), ".rewind-arm-index-*")); len(leftovers) > 0 {
		t.Errorf("temporary index left: %v", leftovers)
	}
	// The work tree's own next checkpoint is still its tree.
	again, err := s.Create(ctx, CreateOptions{Reason: "after", Source: "build"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Checkpoint.Tree != c.Checkpoint.Tree {
		t.Errorf("the work tree's checkpoint took the arm's tree")
	}
}
