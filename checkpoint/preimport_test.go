package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

// TestPreimportWritesOnePack checks that a checkpoint of a few changed files
// writes their blobs and trees as one pack (no loose object but its commit),
// that the packs one per checkpoint are merged past packsMax, and that every
// checkpoint stays whole: fsck clean, and each one restored exactly.
func TestPreimportWritesOnePack(t *testing.T) {
	if !gitexec.AtLeast(geometricVersion) {
		t.Skip("git before " + geometricVersion + ": no preimport")
	}
	ctx := context.Background()
	s, wt := newStore(t)
	defer func(n int) { packsMax = n }(packsMax)
	packsMax = 4
	for i := 0; i < 40; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/e%d/f%d.txt", i%4, i%3, i)), fmt.Sprintf("file %d\n", i))
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "start", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	loose := func() []string {
		var out []string
		filepath.WalkDir(filepath.Join(s.gitDir(), "objects"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.Contains(p, "/pack/") && !strings.Contains(p, "/info/") {
				out = append(out, p)
			}
			return nil
		})
		return out
	}
	trees := map[string]string{}
	imported := 0
	for step := 0; step < 12; step++ {
		time.Sleep(10 * time.Millisecond)
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/e%d/f%d.txt", step%4, step%3, step)), fmt.Sprintf("step %d\n", step))
		os.Remove(filepath.Join(wt, fmt.Sprintf("d%d/e%d/f%d.txt", (step+1)%4, (step+1)%3, step+20)))
		before := len(loose())
		var trace strings.Builder
		gitexec.Trace = &trace
		made, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("step ", step), Source: "test"})
		gitexec.Trace = nil
		if err != nil {
			t.Fatal(err)
		}
		trees[made.Checkpoint.ID] = freshTree(t, wt)
		if made.Checkpoint.Tree != trees[made.Checkpoint.ID] {
			t.Fatalf("step %d: tree %s, a fresh store's %s", step, made.Checkpoint.Tree, trees[made.Checkpoint.ID])
		}
		if strings.Contains(trace.String(), "written as one pack") {
			imported++
			// only the commit (and the index's own files) are new and loose
			if got := len(loose()) - before; got > 1 {
				t.Errorf("step %d: %d new loose objects beside the pack", step, got)
			}
		}
		packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.idx"))
		if len(packs) > packsMax+1 {
			t.Fatalf("step %d: %d packs, more than %d", step, len(packs), packsMax+1)
		}
	}
	if imported < 10 {
		t.Errorf("%d of 12 checkpoints wrote their objects as one pack", imported)
	}
	if out, err := s.git().Run(ctx, "fsck", "--no-dangling", "--connectivity-only"); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	for id, tree := range trees {
		if _, err := s.Restore(ctx, id, RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := freshTree(t, wt); got != tree {
			t.Fatalf("restored %s: tree %s, want %s", id, got, tree)
		}
	}
}

// TestPreimportFileChangedMeanwhile: a file whose content changed between
// the import's read and update-index's hash (which then writes no object)
// leaves write-tree a blob it cannot find; the capture hashes the files
// again, writing them, and the checkpoint holds what the file holds.
func TestPreimportFileChangedMeanwhile(t *testing.T) {
	if !gitexec.AtLeast(geometricVersion) {
		t.Skip("git before " + geometricVersion + ": no preimport")
	}
	ctx := context.Background()
	s, wt := newStore(t)
	for i := 0; i < 10; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%d.txt", i%3, i)), fmt.Sprintf("file %d\n", i))
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "start", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	defer func(read func(string, []byte) []byte) { importRead = read }(importRead)
	importRead = func(p string, data []byte) []byte {
		if p == "d1/f4.txt" {
			return []byte("what the file held a moment before\n")
		}
		return data
	}
	time.Sleep(10 * time.Millisecond)
	mustWrite(t, filepath.Join(wt, "d1/f4.txt"), "changed\n")
	mustWrite(t, filepath.Join(wt, "d2/f5.txt"), "changed too\n")
	var trace strings.Builder
	gitexec.Trace = &trace
	made, err := s.Create(ctx, CreateOptions{Reason: "changed", Source: "test"})
	gitexec.Trace = nil
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trace.String(), "written as one pack") || !strings.Contains(trace.String(), "write-tree after the import") {
		t.Fatalf("want the import, then write-tree failing on the changed file; trace:\n%s", trace.String())
	}
	if want := freshTree(t, wt); made.Checkpoint.Tree != want {
		t.Fatalf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
	}
	if out, err := s.git().Run(ctx, "fsck", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	if got, err := s.git().Run(ctx, "cat-file", "-p", made.Checkpoint.Tree+":d1/f4.txt"); err != nil || string(got) != "changed\n" {
		t.Fatalf("d1/f4.txt in the checkpoint: %q, %v", got, err)
	}
}
