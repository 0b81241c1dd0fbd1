package checkpoint

import (
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A pack the reader has mapped that is cut short meanwhile (damaged on
// disk, or rewritten in place by a tool other than git) makes a read of it
// an error the caller falls back from, never a crash of rewind: touching the
// mapping past the file's new end is a fault (SIGBUS), which the reader must
// turn into an error like any other damage. The read runs in a child
// process so that a crash fails this test alone.
func TestObjectReaderPackCutShort(t *testing.T) {
	if os.Getenv("REWIND_REVIEW7_CHILD") == "cut" {
		objectReaderPackCutShort(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestObjectReaderPackCutShort$", "-test.v")
	cmd.Env = append(os.Environ(), "REWIND_REVIEW7_CHILD=cut")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the read of a pack cut short crashed: %v\n%s", err, firstLines(string(out), 8))
	}
}

func objectReaderPackCutShort(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	for _, d := range []string{"a", "b", "c"} {
		mustWrite(t, filepath.Join(wt, d, "f.txt"), strings.Repeat(d+" line\n", 2000))
	}
	made, err := s.Create(ctx, CreateOptions{Reason: "packed", Source: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rgitDir(t, s, "repack", "-a", "-d", "-q")
	packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	root, _ := hex.DecodeString(made.Checkpoint.Tree)
	sub, _ := hex.DecodeString(strings.Fields(rgitDir(t, s, "rev-parse", made.Checkpoint.Tree+":b"))[0])
	r := newObjectReader(filepath.Join(s.gitDir(), "objects"), false)
	defer r.close()
	if _, _, err := r.read(root); err != nil { // maps the pack
		t.Fatal(err)
	}
	if err := os.Truncate(packs[0], 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.read(sub); err == nil {
		t.Log("read from the pack's pages still in memory")
	} else {
		t.Logf("an error, as it should be: %v", err)
	}
}

// A parent directory of a file the restore writes in place, replaced by a
// symlink to a directory outside the work tree after the restore looked at
// the parents and before it opens the file, never has the restore write
// through it: the file of the same name outside keeps its content. The
// symlink, made while the restore wrote, is left as it is (the restore
// makes no directory where it is) and the file below it named; a second
// restore, whose safety checkpoint holds it, leaves the work tree the
// checkpoint's.
func TestRestoreInPlaceParentSwappedForSymlink(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	sub := filepath.Join(wt, "sub")
	a := filepath.Join(sub, "a.txt")
	mustWrite(t, a, "target\n")
	if err := os.Chmod(a, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	mustWrite(t, a, "changed since\n")
	outside := t.TempDir()
	secret := filepath.Join(outside, "a.txt")
	mustWrite(t, secret, "outside\n")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	called := 0
	beforeInPlace = func(p string) {
		called++
		if p != "sub/a.txt" {
			return
		}
		// the real directory goes away, a symlink to outside takes its name
		if err := os.Rename(sub, filepath.Join(t.TempDir(), "moved")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, sub); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { beforeInPlace = func(string) {} }()
	_, err := s.Restore(ctx, "target", RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "restore could not write sub/a.txt: a file, a symlink or a directory with files in it was made there") {
		t.Errorf("the restore's error: %v, want one naming sub/a.txt", err)
	}
	if called != 1 {
		t.Fatalf("%d files written in place, want sub/a.txt", called)
	}
	if got, _ := os.ReadFile(secret); string(got) != "outside\n" {
		t.Errorf("the restore wrote %q into a file outside the work tree, through a symlinked parent", got)
	}
	if fi, err := os.Lstat(sub); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("sub, made a symlink while the restore wrote, is not as made (%v)", err)
	}
	beforeInPlace = func(string) {}
	if _, err := s.Restore(ctx, "target", RestoreOptions{}); err != nil {
		t.Fatalf("restored again: %v", err)
	}
	if d := diffMaps(target, listing(t, wt, true)); d != "" {
		t.Errorf("restored again, not exact: %s", d)
	}
	if got, _ := os.ReadFile(secret); string(got) != "outside\n" {
		t.Errorf("restored again, the file outside the work tree holds %q", got)
	}
}

// The base trees read from the store's files are those cat-file gives, for
// edits under names that are prefixes of others (a, a-b, a.b, a0, a/), a
// name that is a file, a symlink or a submodule in the base, and a
// directory below a directory.
func TestBaseTreesDirectLikeCatFile(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "f"), "f\n")
	made, err := s.Create(ctx, CreateOptions{Reason: "init", Source: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(entries ...string) string {
		t.Helper()
		out, err := s.git().RunInput(ctx, strings.NewReader(strings.Join(entries, "\n")+"\n"), "mktree", "--missing")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	blob := strings.TrimSpace(rgitDir(t, s, "rev-parse", made.Checkpoint.Tree+":f"))
	commit := "1234567890123456789012345678901234567890"
	leaf := mk("100644 blob " + blob + "\tf")
	deep := mk("040000 tree "+leaf+"\tx", "100644 blob "+blob+"\tx-y")
	base := mk(
		"040000 tree "+deep+"\ta",
		"040000 tree "+leaf+"\ta-b",
		"100644 blob "+blob+"\ta.b",
		"040000 tree "+leaf+"\ta0",
		"100644 blob "+blob+"\tfile",
		"120000 blob "+blob+"\tlink",
		"160000 commit "+commit+"\tsub",
		"040000 tree "+leaf+"\tsub.d",
	)
	edits := func() *treeEdit {
		root := &treeEdit{}
		for _, p := range []string{"a/x/new", "a/x-y/new", "a/new", "a-b/new", "a.b/new", "a0/f", "file/new", "link/new", "sub/new", "sub.d/new", "none/deeper/new"} {
			root.below(p)
		}
		return root
	}
	var dump func(e *treeEdit, path string, out *[]string)
	dump = func(e *treeEdit, path string, out *[]string) {
		names := []string{}
		for _, b := range e.base {
			names = append(names, b.mode+" "+b.name+" "+hex.EncodeToString(b.id))
		}
		*out = append(*out, path+" "+e.baseID+" ["+strings.Join(names, ", ")+"]")
		keys := []string{}
		for k := range e.sub {
			keys = append(keys, k)
		}
		sortStrings(keys)
		for _, k := range keys {
			dump(e.sub[k], path+"/"+k, out)
		}
	}
	direct := edits()
	n, err := s.readBaseTreesDirect(base, direct)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 { // the root, a, a/x, a-b, a0, sub.d
		t.Errorf("%d trees read, want 6", n)
	}
	defer func(was bool) { readTreesDirect = was }(readTreesDirect)
	readTreesDirect = false
	asked := edits()
	if err := s.readBaseTrees(ctx, base, asked); err != nil {
		t.Fatal(err)
	}
	var got, want []string
	dump(direct, "", &got)
	dump(asked, "", &want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read from the store's files (%d trees):\n%s\ncat-file:\n%s", n, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func sortStrings(s []string) { sort.Strings(s) }
