package checkpoint

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// importNames are names whose order in a tree is where git's differs from
// plain byte order (a tree sorts as if its name ended in "/": "a" as a
// directory comes after "a.b" and "a-b", before "a0"), and odd bytes.
var importNames = []string{"a", "a.b", "a-b", "a0", "ab", "a b", "é", "z"}

// randomImportPath is a path of one to three of importNames.
func randomImportPath(r *rand.Rand) string {
	parts := make([]string, 1+r.Intn(3))
	for i := range parts {
		parts[i] = importNames[r.Intn(len(importNames))]
	}
	return strings.Join(parts, "/")
}

// TestImportTreesRandom: random small changes (files written, removed,
// made executable or symlinks; a file made a directory and a directory a
// file; directories emptied) are imported as one pack rewind writes, and
// each checkpoint's tree is git's: write-tree's of the same index (the
// package's tests check every imported tree so) and a fresh store's, in a
// sha1 and a sha256 store. fsck, strict, finds every pack and tree sound.
func TestImportTreesRandom(t *testing.T) {
	needPreimport(t)
	for _, run := range []struct{ format, reader string }{{"sha1", "direct"}, {"sha256", "direct"}, {"sha1", "cat-file"}, {"sha256", "cat-file"}} {
		format := run.format
		t.Run(format+"/"+run.reader, func(t *testing.T) {
			defer forceCatFile(run.reader == "cat-file")()
			r := seededRand(t)
			ctx := context.Background()
			s, wt := newStore(t)
			if format == "sha256" {
				wt = t.TempDir()
				wt, _ = filepath.EvalSymlinks(wt)
				s = sha256Store(t, wt)
			}
			for i := 0; i < 30; i++ {
				writeImportFile(t, r, wt, randomImportPath(r))
			}
			imported := 0
			for step := 0; step < 16; step++ {
				for n := 1 + r.Intn(4); n > 0; n-- {
					changeImportTree(t, r, wt)
				}
				nextSecond()
				made, trace := traceCreate(t, s, fmt.Sprint("step ", step))
				if strings.Contains(trace, "written as one pack") && !strings.Contains(trace, "ignored: import") {
					imported++
					if direct := strings.Contains(trace, "base trees read from the store's files"); direct != (run.reader == "direct") {
						t.Fatalf("step %d: base trees read from the files: %v\n%s", step, direct, trace)
					}
				}
				if want := freshCheckpoint(t, wt).Tree; made.Checkpoint.Tree != want && format == "sha1" {
					t.Fatalf("step %d: tree %s, a fresh store's %s", step, made.Checkpoint.Tree, want)
				}
			}
			if imported < 10 {
				t.Errorf("%d of 16 checkpoints imported", imported)
			}
			if out, err := s.git().Run(ctx, "-c", "fsck.zeroPaddedFilemode=error", "fsck", "--full", "--strict", "--no-dangling"); err != nil {
				t.Fatalf("fsck: %v\n%s", err, out)
			}
			// each pack's index as git makes it from the pack (offsets, CRCs)
			packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.idx"))
			if out, err := s.git().Run(ctx, append([]string{"verify-pack"}, packs...)...); err != nil || len(packs) == 0 {
				t.Fatalf("verify-pack %d packs: %v\n%s", len(packs), err, out)
			}
		})
	}
}

// writeImportFile writes a file at path, made the way through: whatever
// is in the way (a file where a directory goes) is removed first.
func writeImportFile(t *testing.T, r *rand.Rand, wt, path string) {
	full := filepath.Join(wt, path)
	for dir := filepath.Dir(full); dir != wt; dir = filepath.Dir(dir) {
		if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
			os.Remove(dir)
		}
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(full) // a directory or a symlink there
	if r.Intn(8) == 0 {
		if err := os.Symlink(fmt.Sprint("target-", r.Intn(5)), full); err != nil {
			t.Fatal(err)
		}
		return
	}
	mode := os.FileMode(0o644)
	if r.Intn(5) == 0 {
		mode = 0o755
	}
	if err := os.WriteFile(full, []byte(fmt.Sprintf("%s %d\n", path, r.Intn(1000))), mode); err != nil {
		t.Fatal(err)
	}
}

// changeImportTree makes one random change in wt.
func changeImportTree(t *testing.T, r *rand.Rand, wt string) {
	var files, dirs []string
	filepath.WalkDir(wt, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == wt {
			return nil
		}
		rel, _ := filepath.Rel(wt, p)
		if d.IsDir() {
			dirs = append(dirs, rel)
		} else {
			files = append(files, rel)
		}
		return nil
	})
	pick := func(from []string) string {
		if len(from) == 0 {
			return randomImportPath(r)
		}
		return from[r.Intn(len(from))]
	}
	switch r.Intn(6) {
	case 0: // a new file, or one rewritten
		writeImportFile(t, r, wt, randomImportPath(r))
	case 1:
		writeImportFile(t, r, wt, pick(files))
	case 2: // a file removed
		os.Remove(filepath.Join(wt, pick(files)))
	case 3: // a file made a directory
		f := pick(files)
		writeImportFile(t, r, wt, f+"/"+importNames[r.Intn(len(importNames))])
	case 4: // a directory made a file, or emptied
		d := pick(dirs)
		os.RemoveAll(filepath.Join(wt, d))
		if r.Intn(2) == 0 {
			writeImportFile(t, r, wt, d)
		}
	case 5: // executable, or no longer
		full := filepath.Join(wt, pick(files))
		if fi, err := os.Lstat(full); err == nil && fi.Mode().IsRegular() {
			os.Chmod(full, fi.Mode().Perm()^0o111)
		}
	}
}

// TestImportDirectoryNewline: a changed file in a directory whose name
// holds a newline, which cat-file cannot be asked for by path: read from the
// store's files, the import goes through; asking cat-file, it gives up (as
// traced). The checkpoint is git's all the same.
func TestImportDirectoryNewline(t *testing.T) {
	needPreimport(t)
	for _, catFile := range []bool{false, true} {
		t.Run(fmt.Sprint("cat-file ", catFile), func(t *testing.T) {
			defer forceCatFile(catFile)()
			s, wt := settledStore(t, tenFiles(t))
			mustWrite(t, filepath.Join(wt, "odd\ndir/f.txt"), "new\n")
			mustWrite(t, filepath.Join(wt, "odd\ndir/g.txt"), "new\n")
			mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed\n")
			nextSecond()
			traceCreate(t, s, "odd")
			mustWrite(t, filepath.Join(wt, "odd\ndir/f.txt"), "changed\n")
			made, trace := traceCreate(t, s, "odd again")
			if gaveUp := strings.Contains(trace, "ignored: import"); gaveUp != catFile {
				t.Errorf("the import gave up: %v\n%s", gaveUp, trace)
			}
			if want := freshTree(t, wt); made.Checkpoint.Tree != want {
				t.Fatalf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
			}
		})
	}
}

// forceCatFile has the import's base trees read by cat-file (when on) until
// the function it returns is called.
func forceCatFile(on bool) func() {
	old := readTreesDirect
	readTreesDirect = !on
	return func() { readTreesDirect = old }
}

// TestImportRefNamesLastImport: importRef names a commit of the last
// import's tree, so that a gc keeps the objects the store's index holds by
// id: moved in the transaction that creates a checkpoint's ref (one
// update-ref in all), and by itself after a capture no checkpoint holds (a
// dry-run restore's, a diff's with the work tree). A gc --prune=now then
// leaves every object of the index there.
func TestImportRefNamesLastImport(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := settledStore(t, tenFiles(t))
	importTree := func() string {
		out, err := s.git().Run(ctx, "rev-parse", importRef+"^{tree}")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed\n")
	made, trace := traceCreate(t, s, "changed")
	if !strings.Contains(trace, "written as one pack") {
		t.Fatalf("no import:\n%s", trace)
	}
	if n := strings.Count(trace, "git update-ref:"); n != 1 {
		t.Errorf("%d update-ref processes, want the checkpoint's one", n)
	}
	if got := importTree(); got != made.Checkpoint.Tree {
		t.Errorf("importRef's tree %s, the checkpoint's %s", got, made.Checkpoint.Tree)
	}
	nextSecond()
	mustWrite(t, filepath.Join(wt, "d1/f1.txt"), "dry run\n")
	if _, err := s.Restore(ctx, made.Checkpoint.ID, RestoreOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := importTree(), freshTree(t, wt); got != want {
		t.Errorf("after a dry run: importRef's tree %s, the work tree's %s", got, want)
	}
	nextSecond()
	mustWrite(t, filepath.Join(wt, "d2/f2.txt"), "diff\n")
	if _, _, _, _, err := s.Diff(ctx, made.Checkpoint.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	want := freshTree(t, wt)
	if got := importTree(); got != want {
		t.Errorf("after a diff: importRef's tree %s, the work tree's %s", got, want)
	}
	procedureGC(t, s, wt)
	// every blob the index names is there: write-tree writes none missing
	if out, err := s.git().Run(ctx, "write-tree"); err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("write-tree after the gc: %s %v", out, err)
	}
}

// TestImportPackKeptUntilRef: an import's pack has a .keep file until a
// ref names its objects, so that the procedure's git gc --prune=now
// meanwhile deletes none of them; a checkpoint leaves none, and the next
// capture deletes one a killed rewind left (and no one else's).
func TestImportPackKeptUntilRef(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := settledStore(t, tenFiles(t))
	keeps := func() []string {
		k, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "*.keep"))
		return k
	}
	mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed before a gc\n")
	c, err := s.capture(ctx, DefaultMaxFileSize) // as a checkpoint's, its ref not yet made
	if err != nil {
		t.Fatal(err)
	}
	s.cacheWrites.Wait() // (as the store's unlock does) before traceCreate sets the trace
	if k := keeps(); len(k) != 1 || c.imported.keep != k[0] {
		t.Fatalf(".keep files %v, the import's %q", k, c.imported.keep)
	}
	procedureGC(t, s, wt)
	if out, err := s.git().Run(ctx, "ls-tree", "-r", c.tree); err != nil {
		t.Fatalf("the capture's tree after the gc: %v %s", err, out)
	}
	if out, err := s.git().Run(ctx, "cat-file", "-e", c.tree+":d0/f0.txt"); err != nil {
		t.Fatalf("the changed file's blob after the gc: %v %s", err, out)
	}
	// a rewind killed here: its .keep stays, beside someone else's
	foreign := filepath.Join(s.gitDir(), "objects", "pack", "pack-0000000000000000000000000000000000000000.keep")
	if err := os.WriteFile(foreign, []byte("kept by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nextSecond()
	mustWrite(t, filepath.Join(wt, "d1/f1.txt"), "changed\n")
	made, trace := traceCreate(t, s, "after")
	if !strings.Contains(trace, "written as one pack") {
		t.Fatalf("no import:\n%s", trace)
	}
	if k := keeps(); len(k) != 1 || k[0] != foreign {
		t.Errorf(".keep files after a checkpoint: %v, want only %s", k, foreign)
	}
	if want := freshTree(t, wt); made.Checkpoint.Tree != want {
		t.Errorf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
	}
}

// procedureGC runs git gc --prune=now on the store as crucible's procedure
// runs it: git's own index of the store, not rewind's.
func procedureGC(t *testing.T, s *Store, wt string) {
	t.Helper()
	gc := exec.Command("git", "gc", "--quiet", "--prune=now")
	gc.Env = append(os.Environ(), "GIT_DIR="+s.gitDir(), "GIT_WORK_TREE="+wt)
	if out, err := gc.CombinedOutput(); err != nil {
		t.Fatalf("git gc: %v %s", err, out)
	}
}

// writeCommit writes the commit git commit-tree writes, byte for byte, in a
// store of sha1 and of sha256 ids: every checkpoint's id (and so every
// golden output that shows one) is what it was when git wrote it.
func TestWriteCommitLikeGit(t *testing.T) {
	ctx := context.Background()
	wt := t.TempDir()
	mustWrite(t, filepath.Join(wt, "a.txt"), "a\n")
	sha1Store, err := Open(wt, filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{sha1Store, sha256Store(t, wt)} {
		made, err := s.Create(ctx, CreateOptions{Reason: "first", Source: "t"})
		if err != nil {
			t.Fatal(err)
		}
		tree := made.Checkpoint.Tree
		for _, tc := range []struct {
			message string
			date    time.Time
		}{
			{"first | 2026-01-02T03:04:05Z | t\n", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			{"ünïcode réason | 2026-01-02T03:04:05Z | skill\n\nRewind-Branch: main\nRewind-Skipped: \"big file.bin\" over 1 MiB\n", time.Unix(0, 0)},
			{"tabs\tand  spaces | 1970-01-01T00:00:00Z | t\n\n\n", time.Unix(1<<33, 0)},
			{"no newline at the end", time.Date(2026, 11, 28, 23, 59, 59, 999, time.FixedZone("x", 3600))},
		} {
			id, err := s.writeCommit(tree, tc.message, tc.date)
			if err != nil {
				t.Fatal(err)
			}
			g := s.git()
			g.Date = tc.date
			out, err := g.RunInput(ctx, strings.NewReader(tc.message), "commit-tree", tree)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSpace(string(out)); id != want {
				raw, _ := s.git().Run(ctx, "cat-file", "commit", want)
				t.Errorf("writeCommit %q: %s, git commit-tree: %s\n%s", tc.message, id, want, raw)
			}
			if again, err := s.writeCommit(tree, tc.message, tc.date); err != nil || again != id {
				t.Errorf("the same commit again: %s %v", again, err)
			}
		}
		if out, err := s.git().Run(ctx, "fsck", "--full", "--strict", "--no-dangling"); err != nil {
			t.Errorf("fsck: %v %s", err, out)
		}
		if _, err := s.writeCommit(tree, "nul\x00byte", time.Unix(0, 0)); err == nil {
			t.Error("a message with a NUL byte was written")
		}
		// A branch name that is not UTF-8 keeps its bytes (git would take
		// them for Latin-1), and reads back as it is.
		odd := "x | 2026-01-02T03:04:05Z | t\n\nRewind-Branch: caf\xe9\n"
		id, err := s.writeCommit(tree, odd, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if raw, err := s.git().Run(ctx, "cat-file", "commit", id); err != nil || !strings.HasSuffix(string(raw), odd) {
			t.Errorf("the commit holds %q (%v), want it to end with %q", raw, err, odd)
		}
	}
}
