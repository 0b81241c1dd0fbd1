package checkpoint

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

func rgit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// A nested repository's file whose relative path equals a root path (README.md)
// is lost once it is deleted and re-created.
func TestRestoreNestedSameName(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "README.md"), "root\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "sub", "x"), "x\n")
	mustWrite(t, filepath.Join(wt, "sub", "README.md"), "sub readme v1\n")
	rgit(t, filepath.Join(wt, "sub"), "init", "-q")
	c, err := s.Create(ctx, CreateOptions{Reason: "b", Source: "t"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := s.git().Run(ctx, "ls-tree", "-r", "--name-only", c.Checkpoint.Tree)
	if !strings.Contains(string(out), "sub/README.md") {
		t.Errorf("sub/README.md not captured; tree holds:\n%s", out)
	}
}

// A file captured small and now over the size limit is overwritten by a restore,
// and the safety checkpoint does not hold it: the undo cannot give it back.
func TestRestoreOversizeOverwritten(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "data.bin"), "small\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t", MaxFileSize: 100}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("B", 1000)
	mustWrite(t, filepath.Join(wt, "data.bin"), big)
	if _, err := s.Restore(ctx, "a", RestoreOptions{MaxFileSize: 100}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(wt, "data.bin"))
	if string(data) != big {
		t.Errorf("the oversize file the safety checkpoint could not hold was overwritten (now %q)", data)
	}
}

// A directory holding an ignored file, at a path the checkpoint has as a file.
func TestRestoreDirToFileWithIgnored(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(wt, "x"), "file\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(wt, "x"))
	mustWrite(t, filepath.Join(wt, "x", "a"), "a\n")
	mustWrite(t, filepath.Join(wt, "x", "keep.log"), "precious\n")
	_, err := s.Restore(ctx, "a", RestoreOptions{})
	if _, serr := os.Stat(filepath.Join(wt, "x", "keep.log")); serr != nil {
		t.Errorf("ignored file x/keep.log gone (restore err %v)", err)
	}
}

// A file the checkpoint holds but that is ignored now is never overwritten: a
// restore touches only what the rule holds now.
func TestRestoreIgnoredNotOverwritten(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "conf.local"), "v1\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(wt, "conf.local"))
	if _, err := s.Create(ctx, CreateOptions{Reason: "b", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, ".gitignore"), "*.local\n")
	mustWrite(t, filepath.Join(wt, "conf.local"), "user secret v2\n")
	r, err := s.Restore(ctx, "a", RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(wt, "conf.local")); string(data) != "user secret v2\n" {
		t.Errorf("conf.local, ignored now, was overwritten: %q", data)
	}
	if len(r.Kept) != 1 || r.Kept[0].Path != "conf.local" {
		t.Errorf("kept = %v, want conf.local named", r.Kept)
	}
}

// Hostile names round-trip.
func TestRestoreNames(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	names := []string{"sp ace", "new\nline", "bad\xffutf8", "ünï", "-dash", ":(glob)*", "tab\there", "quote\"d", "back\\slash"}
	for _, n := range names {
		mustWrite(t, filepath.Join(wt, "d", n), n)
	}
	os.Symlink("d/sp ace", filepath.Join(wt, "link"))
	os.Chmod(filepath.Join(wt, "d", "sp ace"), 0o755)
	want := listing(t, wt, true)
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(wt, "d"))
	mustWrite(t, filepath.Join(wt, "later"), "x")
	if _, err := s.Restore(ctx, "a", RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffMaps(want, listing(t, wt, true)); d != "" {
		t.Errorf("not exact: %s", d)
	}
	if _, err := s.Restore(ctx, "a", RestoreOptions{Files: []string{"d/:(glob)*"}}); err != nil {
		t.Errorf("single file with magic name: %v", err)
	}
}

// A parent directory replaced by a symlink pointing outside the work tree must
// not let a restore write through it.
func TestRestoreSymlinkParentWrite(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "d", "f"), "inside\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "f"), "outside\n")
	os.RemoveAll(filepath.Join(wt, "d"))
	os.Symlink(outside, filepath.Join(wt, "d"))
	_, err := s.Restore(ctx, "a", RestoreOptions{})
	data, _ := os.ReadFile(filepath.Join(outside, "f"))
	if string(data) != "outside\n" {
		t.Errorf("wrote through a symlink outside the work tree: %q (err %v)", data, err)
	}
	t.Logf("restore err: %v", err)
}

func TestRestoreConcurrent(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "f"), "x")
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func(i int) {
			s2, err := Open(wt, s.Dir)
			if err != nil {
				errs <- err
				return
			}
			s2.Now = s.Now
			mustWrite(t, filepath.Join(wt, "f"+string(rune('a'+i))), "x")
			_, err = s2.Create(ctx, CreateOptions{Reason: "r" + string(rune('a'+i)), Source: "t"})
			errs <- err
		}(i)
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	cps, _ := s.List(ctx)
	if len(cps) != 8 {
		t.Errorf("%d checkpoints", len(cps))
	}
	if out, err := s.git().Run(ctx, "fsck", "--strict"); err != nil {
		t.Errorf("fsck: %v %s", err, out)
	}
}

// A captured directory replaced by a symlink (to a directory inside the tree).
func TestRestoreDirBecomesSymlink(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "d", "f"), "v1\n")
	mustWrite(t, filepath.Join(wt, "e", "f"), "v2\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(wt, "d"))
	os.Symlink("e", filepath.Join(wt, "d"))
	if _, err := s.Create(ctx, CreateOptions{Reason: "b", Source: "t"}); err != nil {
		t.Fatalf("create after a directory became a symlink: %v", err)
	}
}

// A restore never deletes a file the checkpoint's own rules ignore: when the
// checkpoint was taken, n/ was a plain directory under the root's .gitignore.
func TestRestoreNestedIgnoredRemoved(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, ".gitignore"), "*.log\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "n", "f"), "f\n")
	mustWrite(t, filepath.Join(wt, "n", "build.log"), "precious log\n")
	rgit(t, filepath.Join(wt, "n"), "init", "-q")
	if _, err := s.Restore(ctx, "a", RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wt, "n", "build.log")); err != nil {
		t.Errorf("n/build.log, ignored by the checkpoint's rules, was removed by the restore")
	}
}

// A same-size rewrite in the second the file was hashed, its mtime set back,
// looks unchanged to git (whole-second times); the next checkpoint must still
// see it, and the one after must not see a change that is not there.
func TestSameSizeRewriteInTheSameSecond(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	f := filepath.Join(wt, "a.txt")
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := 0; round < 5; round++ {
		mustWrite(t, f, "one\n")
		os.Chtimes(f, old, old)
		c1, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "t", Keep: 100})
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, "two\n")
		os.Chtimes(f, old, old)
		c2, err := s.Create(ctx, CreateOptions{Reason: "b", Source: "t", Keep: 100})
		if err != nil {
			t.Fatal(err)
		}
		if c2.Checkpoint.Tree == c1.Checkpoint.Tree {
			t.Fatalf("round %d: the same-size rewrite was missed", round)
		}
		c3, err := s.Create(ctx, CreateOptions{Reason: "c", Source: "t", Keep: 100})
		if err != nil {
			t.Fatal(err)
		}
		if c3.Checkpoint.Tree != c2.Checkpoint.Tree {
			t.Fatalf("round %d: a change seen where there is none", round)
		}
	}
}

// unlinkWrites deletes what checkout-index is about to write anew, and
// nothing through a symlinked parent, no directory holding a file, and no
// file at a path where the safety checkpoint found none (made since).
func TestUnlinkWrites(t *testing.T) {
	s, wt := newStore(t)
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "f"), "outside\n")
	os.Symlink(outside, filepath.Join(wt, "link"))
	mustWrite(t, filepath.Join(wt, "a", "f"), "a\n")
	mustWrite(t, filepath.Join(wt, "dir", "g"), "g\n")
	os.Symlink("a/f", filepath.Join(wt, "sym"))
	mustWrite(t, filepath.Join(wt, "new"), "made since the safety checkpoint looked\n")
	kept, made, changed, unremoved, err := s.unlinkWrites([]string{"link/f", "a/f", "dir", "sym", "missing", "new"}, &capture{inTree: sortedPaths{"a/f", "sym"}}, nil)
	if err != nil || !slices.Equal(kept, []string{"link/f", "a/f", "sym", "missing"}) || !slices.Equal(made, []string{"dir", "new"}) || changed != nil || unremoved != nil {
		t.Errorf("kept %q, made %q, changed %q, unremoved %q, %v", kept, made, changed, unremoved, err)
	}
	if data, err := os.ReadFile(filepath.Join(wt, "new")); string(data) != "made since the safety checkpoint looked\n" {
		t.Errorf("a file at a path the safety checkpoint found empty: %q, %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(outside, "f")); string(data) != "outside\n" {
		t.Errorf("deleted through a symlinked parent: %q, %v", data, err)
	}
	for _, gone := range []string{"a/f", "sym"} {
		if _, err := os.Lstat(filepath.Join(wt, gone)); !os.IsNotExist(err) {
			t.Errorf("%s not deleted: %v", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(wt, "dir", "g")); err != nil {
		t.Errorf("a directory's file deleted: %v", err)
	}
}

// TestRestoreLooksUpNoGitFile: a restore in a repository looks no ignore
// source below .git up in the checkpoint's tree (info/exclude is in the
// work tree's .git, and no checkpoint holds it): no git process for it.
func TestRestoreLooksUpNoGitFile(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	if out, err := exec.Command("git", "init", "-q", wt).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	mustWrite(t, filepath.Join(wt, "f"), "a\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "a", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "f"), "b\n")
	var trace strings.Builder
	gitexec.Trace = &trace
	_, err := s.Restore(ctx, "a", RestoreOptions{})
	gitexec.Trace = nil
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(trace.String(), "\n") {
		if strings.Contains(line, "ls-tree") && strings.Contains(line, ".git/") {
			t.Errorf("a restore looked a file below .git up: %s", line[max(0, len(line)-120):])
		}
	}
}
