package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
	"golang.org/x/sys/unix"
)

// A restore writes a file changed since the checkpoint into the file that is
// there: the same inode, its directory untouched. When the file is no longer
// fit for that by the time the restore opens it (made a hard link to a file
// outside the tree, a symlink to one, given other bits), the restore writes
// it anew as checkout-index does, and the file outside is never written. A
// file changed so after the safety checkpoint read it (a file other than the
// one it read, or other bits) is first left as it is, and written by the next
// restore.
func TestRestoreWritesInPlace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inPlace bool
		left    bool // by the first restore
		change  func(t *testing.T, full, outside string)
	}{
		{"unchanged meanwhile", true, false, nil},
		{"made a hard link to a file outside", false, true, func(t *testing.T, full, outside string) {
			os.Remove(full)
			if err := os.Link(outside, full); err != nil {
				t.Fatal(err)
			}
		}},
		{"made a symlink to a file outside", false, true, func(t *testing.T, full, outside string) {
			os.Remove(full)
			if err := os.Symlink(outside, full); err != nil {
				t.Fatal(err)
			}
		}},
		{"given other bits", false, true, func(t *testing.T, full, _ string) {
			if err := os.Chmod(full, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, wt := newStore(t)
			sub := filepath.Join(wt, "sub")
			a := filepath.Join(sub, "a.txt")
			mustWrite(t, a, "target\n")
			mustWrite(t, filepath.Join(sub, "b.txt"), "b\n")
			if err := os.Chmod(a, 0o600); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(t.TempDir(), "outside.txt")
			mustWrite(t, outside, "outside\n")
			if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
				t.Fatal(err)
			}
			target := listing(t, wt, true)
			f, err := os.OpenFile(a, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("changed since\n")
			f.Close()
			var before, dirBefore unix.Stat_t
			if err := unix.Lstat(a, &before); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // a directory changed now gets a later mtime
			if err := unix.Lstat(sub, &dirBefore); err != nil {
				t.Fatal(err)
			}
			called := 0
			beforeInPlace = func(p string) {
				called++
				if p == "sub/a.txt" && tc.change != nil {
					tc.change(t, a, outside)
				}
			}
			defer func() { beforeInPlace = func(string) {} }()
			res, err := s.Restore(ctx, "target", RestoreOptions{})
			if tc.left {
				if err == nil || !strings.Contains(err.Error(), "restore left sub/a.txt as it is: changed after the safety checkpoint") {
					t.Fatalf("the restore's error: %v, want one leaving sub/a.txt", err)
				}
				if got, _ := os.ReadFile(outside); string(got) != "outside\n" {
					t.Errorf("the file outside the tree is now %q", got)
				}
				// Restored again: not a file to write in place now.
				called = 1
				beforeInPlace = func(string) { called++ }
				res, err = s.Restore(ctx, "target", RestoreOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			if called != 1 || len(res.Write) != 1 {
				t.Fatalf("written %v, %d in place: want sub/a.txt in place", res.Write, called)
			}
			if d := diffMaps(target, listing(t, wt, true)); d != "" {
				t.Errorf("the restore is not exact: %s", d)
			}
			if got, _ := os.ReadFile(outside); string(got) != "outside\n" {
				t.Errorf("the file outside the tree is now %q", got)
			}
			var after, dirAfter unix.Stat_t
			if err := unix.Lstat(a, &after); err != nil {
				t.Fatal(err)
			}
			unix.Lstat(sub, &dirAfter)
			sameDir := dirAfter.Mtim == dirBefore.Mtim
			if tc.inPlace && (after.Ino != before.Ino || !sameDir) {
				t.Errorf("not written in place: inode %d, was %d; directory's mtime the same: %v", after.Ino, before.Ino, sameDir)
			}
			if !tc.inPlace && (after.Nlink != 1 || sameDir) {
				t.Errorf("written in place (its directory's mtime the same: %v), %d links after", sameDir, after.Nlink)
			}
		})
	}
}

// The objects a restore writes are read from the store's files, or (past
// the room, or when one cannot be read so) by cat-file: both ways the files
// come back exactly, in place as far as the room holds their content.
func TestRestoreReadsObjectsBothWays(t *testing.T) {
	for _, tc := range []struct {
		name    string
		room    int64
		direct  bool
		inPlace int
	}{
		{"from the store's files", 32 << 20, true, 3},
		{"some content past the room", 30, true, 1},
		{"by cat-file, past the reader's budget", 4, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(n int64) { heldBytesMax = n }(heldBytesMax)
			heldBytesMax = tc.room
			ctx := context.Background()
			s, wt := newStore(t)
			for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
				mustWrite(t, filepath.Join(wt, f), f+" at the target\n")
			}
			if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
				t.Fatal(err)
			}
			target := listing(t, wt, true)
			for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
				mustWrite(t, filepath.Join(wt, f), "changed\n")
			}
			inPlace, trace := traceRestore(t, s, "target")
			if d := diffMaps(target, listing(t, wt, true)); d != "" {
				t.Errorf("the restore is not exact: %s", d)
			}
			if direct := !strings.Contains(trace, "objects to write:"); direct != tc.direct || inPlace != tc.inPlace {
				t.Errorf("read from the files: %v, %d in place; want %v, %d\n%s", direct, inPlace, tc.direct, tc.inPlace, trace)
			}
		})
	}
}

// traceRestore restores ref with its trace, and counts the files it went to
// write in place.
func traceRestore(t *testing.T, s *Store, ref string) (inPlace int, trace string) {
	t.Helper()
	beforeInPlace = func(string) { inPlace++ }
	defer func() { beforeInPlace = func(string) {} }()
	var b strings.Builder
	gitexec.Trace = &b
	_, err := s.Restore(context.Background(), ref, RestoreOptions{})
	gitexec.Trace = nil
	if err != nil {
		t.Fatal(err)
	}
	return inPlace, b.String()
}

// A file the restore writes that is made a directory with files in it after
// the restore's plan and before its writes is not the restore's to delete
// (checkout-index --force would delete the directory and all below it):
// what was made stays, the other files are written, and the restore fails
// naming it. Restored again, the work tree is the checkpoint's (the
// directory is then in the first restore's safety checkpoint).
func TestRestoreLeavesDirectoryMadeMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name string
		made func(t *testing.T, full string)
	}{
		{"a file in it", func(t *testing.T, full string) {
			mustWrite(t, filepath.Join(full, "precious.txt"), "made meanwhile\n")
		}},
		{"a symlink deeper down", func(t *testing.T, full string) {
			if err := os.MkdirAll(filepath.Join(full, "d", "e"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("anywhere", filepath.Join(full, "d", "e", "link")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() { beforeInPlace = func(string) {} }()
			ctx := context.Background()
			s, wt := newStore(t)
			a := filepath.Join(wt, "sub", "a.txt")
			mustWrite(t, a, "target\n")
			mustWrite(t, filepath.Join(wt, "sub", "b.txt"), "b\n")
			mustWrite(t, filepath.Join(wt, "c.txt"), "c\n")
			if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
				t.Fatal(err)
			}
			target := listing(t, wt, true)
			mustWrite(t, a, "changed since\n")
			if err := os.Remove(filepath.Join(wt, "c.txt")); err != nil { // written by checkout-index
				t.Fatal(err)
			}
			beforeInPlace = func(p string) {
				if p == "sub/a.txt" {
					os.Remove(a)
					tc.made(t, a)
				}
			}
			_, err := s.Restore(ctx, "target", RestoreOptions{})
			if err == nil || !strings.Contains(err.Error(), "restore could not write sub/a.txt: a file, a symlink or a directory with files in it was made there") {
				t.Errorf("the restore's error: %v, want one naming sub/a.txt", err)
			}
			if fi, err := os.Lstat(a); err != nil || !fi.IsDir() || !holdsAFile(a) {
				t.Fatalf("sub/a.txt, made a directory with files while the restore wrote, is not as made (%v)", err)
			}
			if got, err := os.ReadFile(filepath.Join(wt, "c.txt")); string(got) != "c\n" {
				t.Errorf("c.txt, written beside it: %q %v", got, err)
			}
			beforeInPlace = func(string) {}
			if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
				t.Fatalf("restored again: %v", err)
			}
			if d := diffMaps(target, listing(t, wt, true)); d != "" {
				t.Errorf("restored again, not exact: %s", d)
			}
		})
	}
}

// A file of the checkpoint that is now a directory of files, empty
// directories among them, is written back over it (the files are in the
// safety checkpoint; the directories left empty go): whole, and by --file
// of it or of its parent.
func TestRestoreFileOverDirectoryOfFiles(t *testing.T) {
	for _, files := range [][]string{nil, {"sub/p"}, {"sub"}} {
		t.Run(fmt.Sprint(files), func(t *testing.T) {
			ctx := context.Background()
			s, wt := newStore(t)
			p := filepath.Join(wt, "sub", "p")
			mustWrite(t, p, "a file\n")
			mustWrite(t, filepath.Join(wt, "sub", "q"), "q\n")
			if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
				t.Fatal(err)
			}
			target := listing(t, wt, true)
			os.Remove(p)
			mustWrite(t, filepath.Join(p, "x"), "x\n")
			mustWrite(t, filepath.Join(p, "d", "y"), "y\n")
			if err := os.MkdirAll(filepath.Join(p, "e", "e2"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Restore(ctx, "target", RestoreOptions{Files: files}); err != nil {
				t.Fatal(err)
			}
			if d := diffMaps(target, listing(t, wt, true)); d != "" {
				t.Errorf("not exact: %s", d)
			}
		})
	}
}

// A parent of a file the restore removes, made a symlink to a directory
// outside the work tree after the restore checked the path, is not
// followed: the file of the same name out there stays, the restore fails
// naming the file, and a second restore makes the tree exact without
// touching it either.
func TestRestoreRemovalNeverFollowsSymlinkMadeMeanwhile(t *testing.T) {
	defer func() { beforeRemove = func(string) {} }()
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "sub", "keep.txt"), "keep\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	mustWrite(t, filepath.Join(wt, "sub", "extra.txt"), "not in the target\n")
	outside := t.TempDir()
	precious := filepath.Join(outside, "extra.txt")
	mustWrite(t, precious, "outside the work tree\n")
	beforeRemove = func(p string) {
		if p == "sub/extra.txt" {
			if err := os.Rename(filepath.Join(wt, "sub"), filepath.Join(t.TempDir(), "moved")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(wt, "sub")); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := s.Restore(ctx, "target", RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "remove sub/extra.txt") {
		t.Errorf("the restore's error: %v, want one naming sub/extra.txt", err)
	}
	if got, err := os.ReadFile(precious); string(got) != "outside the work tree\n" {
		t.Fatalf("the file outside the work tree, behind a parent made a symlink: %q %v", got, err)
	}
	beforeRemove = func(string) {}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restored again: %v", err)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("restored again, not exact: %s", d)
	}
	if got, err := os.ReadFile(precious); string(got) != "outside the work tree\n" {
		t.Fatalf("the file outside the work tree, after the second restore: %q %v", got, err)
	}
}

// removeBeneath removes what os.Remove removes (a file, a symlink, an
// empty directory; not a directory with anything in it), errs as it does
// on a missing path, and never through a symlinked parent; rmdirBeneath
// removes only an empty directory.
func TestRemoveBeneath(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	mustWrite(t, filepath.Join(root, "d", "f"), "f\n")
	mustWrite(t, filepath.Join(root, "d", "full", "g"), "g\n")
	mustWrite(t, filepath.Join(outside, "f"), "outside\n")
	os.Mkdir(filepath.Join(root, "d", "empty"), 0o755)
	os.Mkdir(filepath.Join(outside, "empty"), 0o755)
	os.Symlink("f", filepath.Join(root, "d", "link"))
	os.Symlink(outside, filepath.Join(root, "away"))
	for _, p := range []string{"d/f", "d/link", "d/empty"} {
		if err := removeBeneath(root, p); err != nil {
			t.Errorf("remove %s: %v", p, err)
		}
		if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
	if err := removeBeneath(root, "d/full"); err == nil {
		t.Error("a directory with a file in it was removed")
	}
	if err := removeBeneath(root, "d/gone"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	rmdirBeneath(root, "d/full")
	rmdirBeneath(root, "away/empty")
	if err := removeBeneath(root, "away/f"); err == nil {
		t.Error("removed through a symlinked parent")
	}
	for _, p := range []string{filepath.Join(root, "d", "full", "g"), filepath.Join(outside, "f"), filepath.Join(outside, "empty")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// A file changed after the safety checkpoint read it, before the restore
// removes or writes it, is left as it is (its content is in no
// checkpoint): the one removed, the one written in place, the one written
// by checkout-index. The restore writes the rest and fails naming them; a
// second restore, whose safety checkpoint holds them, makes the tree exact.
func TestRestoreLeavesFileChangedAfterSafetyCheckpoint(t *testing.T) {
	defer func() { beforeRemove, beforeInPlace = func(string) {}, func(string) {} }()
	ctx := context.Background()
	s, wt := newStore(t)
	in := func(p string) string { return filepath.Join(wt, p) }
	mustWrite(t, in("a.txt"), "target a\n")
	mustWrite(t, in("b.txt"), "target b\n")
	mustWrite(t, in("c.txt"), "target c\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	mustWrite(t, in("a.txt"), "a since\n") // written in place
	mustWrite(t, in("b.txt"), "b since\n")
	if err := os.Chmod(in("b.txt"), 0o600); err != nil { // not in place: checkout-index
		t.Fatal(err)
	}
	mustWrite(t, in("c.txt"), "c since\n")
	mustWrite(t, in("extra.txt"), "not in the target\n") // removed
	mustWrite(t, in("extra2.txt"), "not in the target\n")
	edit := func(p string) {
		time.Sleep(10 * time.Millisecond) // a ctime of its own
		mustWrite(t, in(p), p+" edited meanwhile\n")
	}
	beforeRemove = func(p string) {
		if p == "extra.txt" {
			edit("extra2.txt") // removed next
		}
	}
	beforeInPlace = func(p string) {
		if p == "a.txt" {
			edit("a.txt")
			edit("b.txt")
		}
	}
	_, err := s.Restore(ctx, "target", RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "restore left a.txt, b.txt, extra2.txt as it is: changed after the safety checkpoint read it") {
		t.Errorf("the restore's error: %v, want one naming a.txt, b.txt and extra2.txt", err)
	}
	for _, p := range []string{"a.txt", "b.txt", "extra2.txt"} {
		if got, err := os.ReadFile(in(p)); string(got) != p+" edited meanwhile\n" {
			t.Errorf("%s, changed after the safety checkpoint: %q %v", p, got, err)
		}
	}
	if fi, err := os.Lstat(in("b.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("b.txt, left as it is, its bits too: %v %v", fi.Mode(), err)
	}
	if got, err := os.ReadFile(in("c.txt")); string(got) != "target c\n" {
		t.Errorf("c.txt, written beside them: %q %v", got, err)
	}
	if _, err := os.Lstat(in("extra.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("extra.txt, removed beside them: %v", err)
	}
	beforeRemove, beforeInPlace = func(string) {}, func(string) {}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restored again: %v", err)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("restored again, not exact: %s", d)
	}
}

// A file changed between the safety checkpoint's walk and its read is in
// that checkpoint with its new content, under the stat data the walk saw:
// the restore writes or removes it (the one written in place, the one
// written by checkout-index, a symlink, the one removed) as it does a file
// nobody changed, and its undo brings back what was read. A file changed
// after the read is left (TestRestoreLeavesFileChangedAfterSafetyCheckpoint).
func TestRestoreTakesFileChangedBetweenWalkAndRead(t *testing.T) {
	defer func() { beforeHeldRead = func(string) {} }()
	ctx := context.Background()
	s, wt := newStore(t)
	in := func(p string) string { return filepath.Join(wt, p) }
	mustWrite(t, in("a.txt"), "target a\n")
	mustWrite(t, in("b.txt"), "target b\n")
	if err := os.Symlink("target", in("d.lnk")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	relink := func(p, to string) {
		if err := os.Remove(in(p)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, in(p)); err != nil {
			t.Fatal(err)
		}
	}
	relink("d.lnk", "since")
	mustWrite(t, in("a.txt"), "a since\n") // written in place
	mustWrite(t, in("b.txt"), "b since\n")
	if err := os.Chmod(in("b.txt"), 0o600); err != nil { // not in place: checkout-index
		t.Fatal(err)
	}
	mustWrite(t, in("c.txt"), "c since\n") // removed
	var mu sync.Mutex
	edited := map[string]bool{}
	beforeHeldRead = func(p string) {
		mu.Lock()
		defer mu.Unlock()
		if !edited[p] {
			edited[p] = true
			time.Sleep(10 * time.Millisecond) // an mtime of its own
			if p == "d.lnk" {
				relink(p, "again")
			} else {
				mustWrite(t, in(p), p[:1]+" again\n")
			}
		}
	}
	res, err := s.Restore(ctx, "target", RestoreOptions{})
	if err != nil {
		t.Fatalf("the restore: %v", err)
	}
	if len(edited) != 4 {
		t.Fatalf("the safety checkpoint read %d changed files itself, want 4: %v", len(edited), edited)
	}
	beforeHeldRead = func(string) {}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("not exact: %s", d)
	}
	if _, err := s.Restore(ctx, res.Safety.ID, RestoreOptions{}); err != nil {
		t.Fatalf("the undo: %v", err)
	}
	for _, p := range []string{"a.txt", "b.txt", "c.txt"} {
		if got, err := os.ReadFile(in(p)); string(got) != p[:1]+" again\n" {
			t.Errorf("%s after the undo: %q %v, want what the safety checkpoint read", p, got, err)
		}
	}
	if fi, err := os.Lstat(in("b.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("b.txt after the undo: %v %v, want 0600", fi.Mode(), err)
	}
	if got, err := os.Readlink(in("d.lnk")); got != "again" {
		t.Errorf("d.lnk after the undo: %q %v, want what the safety checkpoint read", got, err)
	}
}

// Hard links of one file, with nothing changed meanwhile: the restore's
// removal of one moves the other's ctime, which does not make it a file
// changed after the safety checkpoint. Both removed, or one removed and the
// other written, the restore is exact.
func TestRestoreHardLinksNotJudgedChanged(t *testing.T) {
	for _, written := range []bool{false, true} {
		t.Run(fmt.Sprintf("the other written: %v", written), func(t *testing.T) {
			ctx := context.Background()
			s, wt := newStore(t)
			in := func(p string) string { return filepath.Join(wt, p) }
			mustWrite(t, in("keep.txt"), "k\n")
			if written {
				mustWrite(t, in("b.txt"), "target b\n")
			}
			if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
				t.Fatal(err)
			}
			target := listing(t, wt, true)
			os.Remove(in("b.txt"))
			mustWrite(t, in("a.txt"), "linked\n")
			if err := os.Link(in("a.txt"), in("b.txt")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if d := diffMaps(target, listing(t, wt, true)); d != "" {
				t.Errorf("not exact: %s", d)
			}
		})
	}
}

// A file the restore leaves (changed after the safety checkpoint) where the
// target has a directory: nothing below it is written (checkout-index would
// delete the file to make the directory), and the error names both.
func TestRestoreWritesNothingBelowALeftFile(t *testing.T) {
	defer func() { beforeRemove = func(string) {} }()
	ctx := context.Background()
	s, wt := newStore(t)
	in := func(p string) string { return filepath.Join(wt, p) }
	mustWrite(t, in("x/y.txt"), "target y\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	os.RemoveAll(in("x"))
	mustWrite(t, in("x"), "x a file now\n")
	mustWrite(t, in("a_extra.txt"), "extra\n") // removed first
	beforeRemove = func(p string) {
		if p == "a_extra.txt" {
			time.Sleep(10 * time.Millisecond)
			mustWrite(t, in("x"), "x edited meanwhile\n")
		}
	}
	_, err := s.Restore(ctx, "target", RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "restore left x as it is: changed after the safety checkpoint read it, its content in no checkpoint; restore did not write x/y.txt, below a file it left") {
		t.Errorf("the restore's error: %v, want one naming x and x/y.txt", err)
	}
	if got, err := os.ReadFile(in("x")); string(got) != "x edited meanwhile\n" {
		t.Fatalf("x, changed after the safety checkpoint: %q %v", got, err)
	}
	beforeRemove = func(string) {}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restored again: %v", err)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("restored again, not exact: %s", d)
	}
}

// holdsAFile reports whether anything but a directory is below dir.
func holdsAFile(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	return found
}

// A write in place that fails midway (a full disk) leaves the file half
// written: the restore's own change, which it then writes anew through
// checkout-index, as it writes a file no longer fit to be written in place.
// The tree comes out exact, and the safety checkpoint holds the file as it
// was before, which its undo brings back.
func TestRestoreInPlaceWriteFailsMidway(t *testing.T) {
	defer func(w func(*os.File, []byte) error) { inPlaceWrite = w }(inPlaceWrite)
	ctx := context.Background()
	s, wt := newStore(t)
	a := filepath.Join(wt, "sub", "a.txt")
	mustWrite(t, a, strings.Repeat("the checkpoint's line\n", 100))
	mustWrite(t, filepath.Join(wt, "sub", "b.txt"), "b\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	mustWrite(t, a, strings.Repeat("a later line\n", 300))
	mustWrite(t, filepath.Join(wt, "sub", "b.txt"), "b, later\n")
	before := listing(t, wt, true)
	failed := 0
	inPlaceWrite = func(f *os.File, data []byte) error {
		if !strings.HasSuffix(f.Name(), "a.txt") {
			_, err := f.WriteAt(data, 0)
			return err
		}
		failed++
		if _, err := f.WriteAt(data[:len(data)/2], 0); err != nil {
			return err
		}
		return unix.ENOSPC
	}
	res, err := s.Restore(ctx, "target", RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if failed != 1 || len(res.Write) != 2 {
		t.Fatalf("written %v, %d writes of a.txt failed: want both written, the one failed", res.Write, failed)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("the restore is not exact after a write in place failed: %s", d)
	}
	inPlaceWrite = func(f *os.File, data []byte) error { _, err := f.WriteAt(data, 0); return err }
	if _, err := s.Restore(ctx, res.Safety.ID, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffMaps(before, listing(t, wt, true)); d != "" {
		t.Errorf("the undo is not exact: %s", d)
	}
}
