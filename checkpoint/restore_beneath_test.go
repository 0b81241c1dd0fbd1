package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-cli/rewind/gitexec"
	"golang.org/x/sys/unix"
)

// mode is the permission bits of path (not following a symlink), or 0 when
// it is not there.
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	return fi.Mode().Perm()
}

// swapForSymlink moves path away and puts a symlink to target in its place,
// as another writer of the work tree could between two steps of a restore.
func swapForSymlink(t *testing.T, path, target string) {
	t.Helper()
	if err := os.Rename(path, filepath.Join(t.TempDir(), "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// A file or directory whose bits a restore sets, made a symlink after the
// restore looked at it (or given a parent made one), keeps what the symlink
// names as it was: the restore sets the bits of the others, fails naming
// each it could not set, and a second restore makes the tree exact
// without touching what is out there either.
func TestRestorePermsNeverFollowSymlinkMadeMeanwhile(t *testing.T) {
	defer func() { beforeChmod = func(string) {} }()
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "run.sh"), "#!/bin/sh\n")
	mustWrite(t, filepath.Join(wt, "d", "f.txt"), "in d\n")
	mustWrite(t, filepath.Join(wt, "p", "q.sh"), "#!/bin/sh\n")
	mustWrite(t, filepath.Join(wt, "other.sh"), "#!/bin/sh\n")
	for _, f := range []string{"run.sh", "p/q.sh", "other.sh"} {
		if err := os.Chmod(filepath.Join(wt, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	for _, f := range []string{"run.sh", "p/q.sh", "other.sh"} {
		if err := os.Chmod(filepath.Join(wt, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(wt, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Out of the work tree: a file, a directory and a directory holding a
	// file of the name below the swapped parent, none to be changed.
	outside := t.TempDir()
	outFile, outDir, outParent := filepath.Join(outside, "secret"), filepath.Join(outside, "dir"), filepath.Join(outside, "parent")
	mustWrite(t, outFile, "outside\n")
	mustWrite(t, filepath.Join(outParent, "q.sh"), "outside\n")
	if err := os.Mkdir(outDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{outFile, filepath.Join(outParent, "q.sh")} {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	swapped := map[string]bool{}
	beforeChmod = func(p string) {
		swapped[p] = true
		switch p {
		case "run.sh":
			swapForSymlink(t, filepath.Join(wt, "run.sh"), outFile)
		case "d":
			swapForSymlink(t, filepath.Join(wt, "d"), outDir)
		case "p/q.sh":
			swapForSymlink(t, filepath.Join(wt, "p"), outParent)
		}
	}
	_, err := s.Restore(ctx, "target", RestoreOptions{})
	const want = "the work tree may be half restored: restore the permissions of d, p/q.sh, run.sh (the first: d: a symlink is there now, not followed)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the restore's error: %v, want one saying %q: each path whose bits it could not set", err, want)
	}
	// It says how to finish or undo it, with the ids.
	var failed *RestoreFailedError
	if !errors.As(err, &failed) {
		t.Fatalf("the restore's error: %T, want a *RestoreFailedError", err)
	}
	cps, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last := cps[len(cps)-1]; last.Reason != "pre-restore-safety" || failed.Restore.Safety != last.Short() || failed.Restore.Target != cps[0].Short() || failed.Restore.Reason != "target" {
		t.Errorf("the failed restore names %+v; want its safety checkpoint %s and its target %s", failed.Restore, last.Short(), cps[0].Short())
	}
	for _, p := range []string{"run.sh", "d", "p/q.sh", "other.sh"} {
		if !swapped[p] {
			t.Errorf("the restore did not set the bits of %s (it set %v)", p, swapped)
		}
	}
	if got := mode(t, filepath.Join(wt, "other.sh")); got != 0o755 {
		t.Errorf("other.sh, past a failure: %v, want 0755", got)
	}
	check := func(when string) {
		t.Helper()
		for path, want := range map[string]os.FileMode{outFile: 0o600, outDir: 0o700, filepath.Join(outParent, "q.sh"): 0o600, outParent: 0o755} {
			if got := mode(t, path); got != want {
				t.Errorf("%s: %s out of the work tree is %v, want %v", when, path, got, want)
			}
		}
	}
	check("restored")
	beforeChmod = func(string) {}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restored again: %v", err)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("restored again, not exact: %s", d)
	}
	if got := mode(t, filepath.Join(wt, "d")); got != 0o755 {
		t.Errorf("restored again, d is %v, want 0755", got)
	}
	check("restored again")
}

// A directory the checkpoint had without files, whose parent is made a
// symlink to a directory out of the work tree before the restore makes it,
// is not made out there: the restore warns naming it, and a second restore
// makes it.
func TestRestoreMkdirNeverThroughSymlinkMadeMeanwhile(t *testing.T) {
	defer func() { beforeMkdir = func(string) {} }()
	ctx := context.Background()
	s, wt := newStore(t)
	var warnings []string
	s.Warn = func(w string) { warnings = append(warnings, w) }
	mustWrite(t, filepath.Join(wt, "x.txt"), "x\n")
	if err := os.MkdirAll(filepath.Join(wt, "a", "b", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(wt, "a")); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	var made []string
	beforeMkdir = func(d string) {
		made = append(made, d)
		if d == "a/b/c" {
			swapForSymlink(t, filepath.Join(wt, "a"), outside)
		}
	}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
		t.Errorf("the directory out of the work tree holds %v (%v), want nothing", entries, err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "did not make the directory a/b/c") {
		t.Errorf("warnings %q, want one naming a/b/c (made %q)", warnings, made)
	}
	beforeMkdir = func(string) {}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restored again: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(wt, "a", "b", "c")); err != nil || !fi.IsDir() {
		t.Errorf("restored again, a/b/c: %v %v, want a directory", fi, err)
	}
	if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
		t.Errorf("restored again, the directory out of the work tree holds %v (%v)", entries, err)
	}
}

// mkdirBeneath makes what os.MkdirAll makes, with no error for a directory
// that is there, and fails on a file or a symlink on the way.
func TestMkdirBeneath(t *testing.T) {
	root := t.TempDir()
	if err := mkdirBeneath(root, "a/b/c", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mkdirBeneath(root, "a/b", 0o700); err != nil {
		t.Errorf("a directory there already: %v", err)
	}
	if got := mode(t, filepath.Join(root, "a", "b", "c")); got != 0o700 {
		t.Errorf("a/b/c made with %v, want 0700", got)
	}
	// A file or a symlink in the way is ENOTDIR (checkout leaves the writes
	// below it), the symlink named as one.
	mustWrite(t, filepath.Join(root, "f"), "file\n")
	if err := mkdirBeneath(root, "f/g", 0o700); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("below a file: %v, want ENOTDIR", err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	err := mkdirBeneath(root, "l/g/h", 0o700)
	if !errors.Is(err, unix.ENOTDIR) || err.Error() != "l/g/h: its parent l is a symlink; not following it" {
		t.Errorf("through a symlink: %v", err)
	}
	if err := mkdirBeneath(root, "l", 0o700); !errors.Is(err, unix.ENOTDIR) || err.Error() != "l is a symlink; not following it" {
		t.Errorf("a symlink there: %v", err)
	}
	for _, bad := range []string{"../x", "a//b", "a/./b"} {
		if err := mkdirBeneath(root, bad, 0o700); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// What another writer makes where a restore is about to write a file
// (between the restore's removal of what was there and checkout-index) is
// left as it is: a file, a directory of files, a file where a directory of
// the path must be. The restore writes the rest, fails naming those, and a
// second restore, whose safety checkpoint holds them, makes the tree exact.
func TestRestoreNeverOverwritesWhatIsMadeMeanwhile(t *testing.T) {
	defer func() { beforeCheckout = func([]string) {} }()
	ctx := context.Background()
	s, wt := newStore(t)
	for _, f := range []string{"f1.txt", "f2.txt", "x/y.txt", "d.txt"} {
		mustWrite(t, filepath.Join(wt, f), f+" in the target\n")
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	for _, f := range []string{"f1.txt", "f2.txt", "x", "d.txt"} {
		if err := os.RemoveAll(filepath.Join(wt, f)); err != nil {
			t.Fatal(err)
		}
	}
	made := map[string]string{"f1.txt": "made meanwhile\n", "d.txt/inner": "inner\n", "x": "x made\n"}
	beforeCheckout = func(write []string) {
		for f, content := range made {
			mustWrite(t, filepath.Join(wt, f), content)
		}
	}
	_, err := s.Restore(ctx, "target", RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "restore could not write d.txt, f1.txt, x/y.txt: a file, a symlink or a directory with files in it was made there") {
		t.Errorf("the restore's error: %v, want one naming d.txt, f1.txt and x/y.txt", err)
	}
	for f, content := range made {
		if got, err := os.ReadFile(filepath.Join(wt, f)); string(got) != content {
			t.Errorf("%s, made while the restore wrote: %q %v", f, got, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(wt, "f2.txt")); string(got) != "f2.txt in the target\n" {
		t.Errorf("f2.txt, written beside them: %q %v", got, err)
	}
	beforeCheckout = func([]string) {}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restored again: %v", err)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("restored again, not exact: %s", d)
	}
}

// refusedWrites takes what checkout-index says of a path it did not write
// because something is there (as it looked, or as it created the file),
// and nothing else: another line, another exit code, a path it was not
// given, or a name its lines cannot tell (a newline in it).
func TestRefusedWrites(t *testing.T) {
	write := []string{"a b.txt", "d/x", "l", "ok.txt", "error: d/x"}
	gitErr := func(code int, stderr string) error {
		return &gitexec.Error{Args: []string{"checkout-index"}, ExitCode: code, Stderr: stderr}
	}
	refused, ok := refusedWrites(gitErr(1, "a b.txt already exists, no checkout\nerror: unable to create file d/x: File exists\nerror: unable to create symlink l: File exists\n"), write)
	if !ok || len(refused) != 3 || !refused["a b.txt"] || !refused["d/x"] || !refused["l"] {
		t.Errorf("refused %v %v, want a b.txt, d/x and l", refused, ok)
	}
	for name, err := range map[string]error{
		"another line":        gitErr(1, "a b.txt already exists, no checkout\nerror: unable to write file ok.txt\n"),
		"fatal":               gitErr(128, "fatal: cannot create directory at 'd': File exists\n"),
		"a path not given":    gitErr(1, "other already exists, no checkout\n"),
		"another error there": gitErr(1, "error: unable to create file d/x: Permission denied\n"),
		"another message":     gitErr(1, "error: d/x: File exists\n"),
		"not git's":           errors.New("a already exists, no checkout"),
	} {
		if refused, ok := refusedWrites(err, write); ok {
			t.Errorf("%s: refused %v", name, refused)
		}
	}
	// git refused the third; its line reads as two refusals of the others
	odd := "a already exists, no checkout\nb"
	if refused, ok := refusedWrites(gitErr(1, odd+" already exists, no checkout\n"), []string{"a", "b", odd}); ok {
		t.Errorf("a name with a newline: refused %v", refused)
	}
}

// The parent directories a --file restore makes get the bits the checkpoint
// recorded, as those of a whole restore do, not the 0700 it writes under.
func TestRestoreFileMakesParentsWithTheirBits(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a", "b", "f.txt"), "f\n")
	mustWrite(t, filepath.Join(wt, "g.txt"), "g\n")
	for d, perm := range map[string]os.FileMode{"a": 0o755, "a/b": 0o750} {
		if err := os.Chmod(filepath.Join(wt, d), perm); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(wt, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, "target", RestoreOptions{Files: []string{"a/b/f.txt"}}); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]os.FileMode{"a": 0o755, "a/b": 0o750, "a/b/f.txt": 0o644} {
		if got := mode(t, filepath.Join(wt, d)); got != want {
			t.Errorf("%s after the --file restore: %v, want %v", d, got, want)
		}
	}
}

// A file made, while the restore writes, at a path the safety checkpoint
// found empty and the restore writes is left as it is and named, however
// early in the writes it is made (here, before the writes in place).
func TestRestoreLeavesFileMadeAtEmptyPath(t *testing.T) {
	defer func() { beforeInPlace = func(string) {} }()
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "new.txt"), "in the target\n")
	mustWrite(t, filepath.Join(wt, "edit.txt"), "in the target\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	if err := os.Remove(filepath.Join(wt, "new.txt")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "edit.txt"), "edited\n")
	beforeInPlace = func(string) { mustWrite(t, filepath.Join(wt, "new.txt"), "made meanwhile\n") }
	_, err := s.Restore(ctx, "target", RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "restore could not write new.txt: a file, a symlink or a directory with files in it was made there") {
		t.Errorf("the restore's error: %v, want one naming new.txt", err)
	}
	if got, err := os.ReadFile(filepath.Join(wt, "new.txt")); string(got) != "made meanwhile\n" {
		t.Errorf("new.txt, made while the restore wrote: %q %v", got, err)
	}
	beforeInPlace = func(string) {}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restored again: %v", err)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("restored again, not exact: %s", d)
	}
}

// A directory the checkpoint had without files, below one that can be
// searched but not read (0300) now, is made: the restore opens the
// directories on its way only to search them (dirOpen), as git's own calls
// need. The capture skips what the unreadable directory holds, and the
// restore keeps it; the undo brings back the tree as it was, bits and all.
// (Run as a user other than root: root reads an unreadable directory.)
func TestRestoreMakesDirectoryBelowUnreadableOne(t *testing.T) {
	if asUnprivileged(t) {
		return
	}
	ctx := context.Background()
	s, wt := newStore(t)
	var warned []string
	s.Warn = func(w string) { warned = append(warned, w) }
	locked := filepath.Join(wt, "locked")
	mustWrite(t, filepath.Join(locked, "sub", "a.txt"), "one\n")
	mustWrite(t, filepath.Join(wt, "top.txt"), "top\n")
	if err := os.Mkdir(filepath.Join(locked, "new"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	if err := os.Remove(filepath.Join(locked, "new")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "top.txt"), "top, later\n")
	before := listing(t, wt, true)
	if err := os.Chmod(locked, 0o300); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o755) // for the test's cleanup
	warned = nil
	res, err := s.Restore(ctx, "target", RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warned {
		if strings.Contains(w, "did not make the directory") {
			t.Errorf("warned: %s", w)
		}
	}
	if fi, err := os.Lstat(filepath.Join(locked, "new")); err != nil || !fi.IsDir() {
		t.Errorf("locked/new after the restore: %v, want the directory", err)
	}
	if got := mode(t, locked); got != 0o755 {
		t.Errorf("locked is %v after the restore, want 0755 as the checkpoint holds it", got)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("the restore is not exact: %s", d)
	}
	if _, err := s.Restore(ctx, res.Safety.ID, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, locked); got != 0o300 {
		t.Errorf("locked is %v after the undo, want 0300", got)
	}
	os.Chmod(locked, 0o755)
	if _, err := os.Lstat(filepath.Join(locked, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("locked/new after the undo: %v, want it gone", err)
	}
	if d := diffMaps(before, listing(t, wt, true)); d != "" {
		t.Errorf("the undo is not exact: %s", d)
	}
}

// A directory a restore makes below a parent that is a symlink now, to a
// directory out of the work tree holding one of the same name, is made and
// gets the checkpoint's bits, one with files (b) and one without (e): the
// plan looks for the directories to make through their parents opened
// without following a symlink, where a look at the whole path found the one
// out there, and never counted this one as made: b was left with the 0700
// the restore makes it with, e was not made. Nothing out there is touched.
func TestRestoreDirBelowSymlinkedParentGetsItsBits(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "deep", "a", "b", "c.txt"), "c\n")
	if err := os.Mkdir(filepath.Join(wt, "deep", "a", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"deep", "deep/a", "deep/a/b", "deep/a/e"} {
		if err := os.Chmod(filepath.Join(wt, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "b", "keep.txt"), "outside\n")
	for _, d := range []string{"b", "e"} {
		if err := os.MkdirAll(filepath.Join(outside, d), 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(outside, d), 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(wt, "deep", "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wt, "deep", "a")); err != nil {
		t.Fatal(err)
	}
	outBefore := listing(t, outside, false)
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("the restore is not exact: %s", d)
	}
	if d := diffMaps(outBefore, listing(t, outside, false)); d != "" {
		t.Errorf("out of the work tree: %s", d)
	}
}
