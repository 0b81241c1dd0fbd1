package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReview5ImportNewDirWithSpace: a file added in a new directory whose
// name holds a space is imported like any other. cat-file answers such a
// directory, missing from the base, "<base>:<name> missing", whose words
// are more than two: the import must not take that for a broken answer
// and give up (which costs every such checkpoint a loose object per file).
func TestReview5ImportNewDirWithSpace(t *testing.T) {
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	mustWrite(t, filepath.Join(wt, "new dir/f.txt"), "new\n")
	made, trace := traceCreate(t, s, "new dir")
	if !strings.Contains(trace, "written as one pack") || strings.Contains(trace, "ignored: import") {
		t.Errorf("the import gave up:\n%s", trace)
	}
	if want := freshTree(t, wt); made.Checkpoint.Tree != want {
		t.Fatalf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
	}
}

// TestReview5ImportBaseGone: the last tree a capture wrote (the import's
// base) is one no ref names when that capture belonged to no checkpoint
// and wrote its objects itself (a diff of a change too large to import);
// the procedure's gc --prune=now then deletes it, and the blobs only
// rewind's index named. The next checkpoint, of a small change, must
// still hold the whole work tree: not a tree of the changed file alone
// (cat-file answers the base "missing", which is no empty directory), as
// the capture takes the import's tree for the index's without write-tree.
func TestReview5ImportBaseGone(t *testing.T) {
	needPreimport(t)
	defer func(check bool) { checkImportTree = check }(checkImportTree)
	checkImportTree = false // as rewind runs: the import's tree trusted
	ctx := context.Background()
	s, wt := unimportedDiffThenGC(t)
	nextSecond()
	mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed after the gc\n")
	nextSecond()
	after, err := s.Create(ctx, CreateOptions{Reason: "after", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if want := freshTree(t, wt); after.Checkpoint.Tree != want {
		out, _ := s.git().Run(ctx, "ls-tree", "-r", "--name-only", after.Checkpoint.Tree)
		t.Fatalf("tree %s, a fresh store's %s; it holds:\n%s", after.Checkpoint.Tree, want, firstLines(string(out), 5))
	}
	if out, err := s.git().Run(ctx, "fsck", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
}

// firstLines is at most n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...\n")
	}
	return strings.Join(lines, "")
}

// TestReview5ImportOddTrees: changes whose trees are where rewind's tree
// writing may part from git's (a symlink where a directory was, a file
// where a directory of many files was, names of odd bytes and of 255, a
// directory of many entries, the root emptied) give checkpoints of git's
// trees (the package's tests check each imported tree against
// write-tree's), and packs git finds sound.
func TestReview5ImportOddTrees(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	long := strings.Repeat("l", 255)
	s, wt := settledStore(t, func(wt string) {
		for i := 0; i < 300; i++ {
			mustWrite(t, filepath.Join(wt, "many", fmt.Sprintf("f%03d", i)), fmt.Sprint(i))
		}
		mustWrite(t, filepath.Join(wt, "dir/a"), "a")
		mustWrite(t, filepath.Join(wt, "dir/sub/b"), "b")
		mustWrite(t, filepath.Join(wt, "odd\x01\x7f\\\"'/x"), "x")
		mustWrite(t, filepath.Join(wt, long, long), "long")
	})
	steps := []struct {
		what   string
		change func()
	}{
		{"a symlink where a directory was", func() {
			os.RemoveAll(filepath.Join(wt, "dir"))
			if err := os.Symlink("many", filepath.Join(wt, "dir")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a directory where the symlink was", func() {
			os.Remove(filepath.Join(wt, "dir"))
			mustWrite(t, filepath.Join(wt, "dir/sub/c"), "c")
		}},
		{"odd and long names", func() {
			mustWrite(t, filepath.Join(wt, "odd\x01\x7f\\\"'/x"), "x2")
			mustWrite(t, filepath.Join(wt, "odd\x01\x7f\\\"'/y\x02"), "y")
			os.Remove(filepath.Join(wt, long, long)) // a file made a directory
			mustWrite(t, filepath.Join(wt, long, long, long[:200]), "longer")
		}},
		{"a file where a directory of many was", func() {
			os.RemoveAll(filepath.Join(wt, "many"))
			mustWrite(t, filepath.Join(wt, "many"), "one file")
			mustWrite(t, filepath.Join(wt, "many.d/x"), "x")
			mustWrite(t, filepath.Join(wt, "many-d/x"), "x")
		}},
		{"the root emptied", func() {
			entries, _ := os.ReadDir(wt)
			for _, e := range entries {
				os.RemoveAll(filepath.Join(wt, e.Name()))
			}
		}},
		{"one file again", func() { mustWrite(t, filepath.Join(wt, "again"), "again") }},
	}
	for _, step := range steps {
		step.change()
		nextSecond()
		made, trace := traceCreate(t, s, step.what)
		if !strings.Contains(trace, "written as one pack") || strings.Contains(trace, "ignored: import") {
			t.Errorf("%s: not imported:\n%s", step.what, trace)
		}
		if want := freshTree(t, wt); made.Checkpoint.Tree != want {
			t.Fatalf("%s: tree %s, a fresh store's %s", step.what, made.Checkpoint.Tree, want)
		}
	}
	if out, err := s.git().Run(ctx, "-c", "fsck.zeroPaddedFilemode=error", "fsck", "--full", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.pack"))
	for _, p := range packs {
		if out, err := s.git().Run(ctx, "index-pack", "--verify", "--strict", p); err != nil {
			t.Errorf("index-pack --verify %s: %v\n%s", filepath.Base(p), err, out)
		}
	}
}

// TestReview5DiffUnimportedKept: a capture no checkpoint holds that wrote
// its objects through git (a diff of a change too large to import) leaves
// the store's index naming a tree and blobs no ref names; importRef must
// keep them, as it keeps an import's, so that the procedure's gc
// --prune=now deletes none of them (else the next capture finds them
// missing and hashes every file of the work tree again).
func TestReview5DiffUnimportedKept(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := unimportedDiffThenGC(t)
	if out, err := s.git().Run(ctx, "write-tree"); err != nil || strings.TrimSpace(string(out)) != freshTree(t, wt) {
		t.Fatalf("write-tree after the gc: %s %v", out, err)
	}
}

// TestReview5KilledImportPackRemoved: a rewind killed between the rename
// of an import's pack and that of its index leaves the pack, its .keep,
// and no index: git never reads nor deletes such a pack (no repack or
// prune of the procedure's, nor rewind's prune), so it would take space
// for good. The next capture, which deletes the .keep, deletes the pack.
func TestReview5KilledImportPackRemoved(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := settledStore(t, tenFiles(t))
	mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed, then killed\n")
	c, err := s.capture(ctx, DefaultMaxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	s.cacheWrites.Wait() // (as the store's unlock does) before traceCreate sets the trace
	if c.imported.keep == "" {
		t.Fatal("no import")
	}
	// killed before the index's rename: as if it never was
	if err := os.Remove(strings.TrimSuffix(c.imported.keep, ".keep") + ".idx"); err != nil {
		t.Fatal(err)
	}
	os.Remove(s.statCacheFile()) // nor the stat cache written after it
	nextSecond()
	mustWrite(t, filepath.Join(wt, "d1/f1.txt"), "changed\n")
	made, _ := traceCreate(t, s, "after the kill")
	if want := freshTree(t, wt); made.Checkpoint.Tree != want {
		t.Errorf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
	}
	packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.pack"))
	for _, p := range packs {
		if _, err := os.Stat(strings.TrimSuffix(p, ".pack") + ".idx"); err != nil {
			t.Errorf("a pack without its index: %s", filepath.Base(p))
		}
	}
}

// unimportedDiffThenGC is a settled store whose last capture is a diff's
// with the work tree of a change too large to import (more files than
// preimportMax: git writes its tree, which no checkpoint holds), followed
// by the procedure's git gc --prune=now.
func unimportedDiffThenGC(t *testing.T) (*Store, string) {
	t.Helper()
	ctx := context.Background()
	s, wt := settledStore(t, tenFiles(t))
	made, err := s.Create(ctx, CreateOptions{Reason: "before", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= preimportMax; i++ {
		mustWrite(t, filepath.Join(wt, "many", fmt.Sprintf("f%d.txt", i)), fmt.Sprintf("many %d\n", i))
	}
	nextSecond()
	if _, _, _, _, err := s.Diff(ctx, made.Checkpoint.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	procedureGC(t, s, wt)
	return s, wt
}
