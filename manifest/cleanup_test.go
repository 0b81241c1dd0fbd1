package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolvePath(t *testing.T) {
	root := t.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/b")
	mk("c")
	if err := os.Symlink("a/b", filepath.Join(root, "lb")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a", filepath.Join(root, "c/up")); err != nil {
		t.Fatal(err)
	}
	// A dangling symlink: the directory it names would be created through it.
	if err := os.Symlink(filepath.Join(root, "a/b/new"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"a/b":              "a/b",
		"lb":               "a/b",
		"lb/..":            "a", // .. after a symlink is the target's parent, not root
		"lb/../b/x/y":      "a/b/x/y",
		"c/up/b":           "a/b",
		"dangling/more":    "a/b/new/more",
		"./a//b/./missing": "a/b/missing",
	}
	for in, want := range cases {
		got, err := resolvePath(root + "/" + in) // not Join: it would drop "lb/.." lexically
		if err != nil || got != filepath.Join(root, want) {
			t.Errorf("resolvePath(%s) = %q, %v; want %s", in, got, err, want)
		}
	}
	if err := os.Symlink("loop", filepath.Join(root, "loop")); err != nil {
		t.Fatal(err)
	}
	if _, err := resolvePath(filepath.Join(root, "loop/x")); err == nil {
		t.Error("a symlink loop resolved")
	}
}

func TestCheckCopyTarget(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "crucible-dispatch-1")
	if err := os.MkdirAll(filepath.Join(d, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(d, filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{d, d + "/", d + "/sub/x", filepath.Join(root, "alias"), filepath.Join(root, "alias/new"), d + "/sub/../x"} {
		err := checkCopyTarget(d, dst)
		var de *DispatchError
		if !errors.As(err, &de) || !de.Inside || !strings.Contains(de.Msg, dst) || !strings.Contains(de.Msg, d) {
			t.Errorf("target %s: %v, want a refusal naming both paths", dst, err)
		}
	}
	for _, dst := range []string{root, filepath.Join(root, "crucible-dispatch-10"), d + "/../other"} {
		if err := checkCopyTarget(d, dst); err != nil {
			t.Errorf("target %s refused: %v", dst, err)
		}
	}
}

func TestCleanupFailedKeepsModes(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "tmp", "crucible-dispatch-5")
	for p, mode := range map[string]os.FileMode{"": 0o700, "sub": 0o750, "ro": 0o500} {
		if err := os.MkdirAll(filepath.Join(d, p), 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(filepath.Join(d, p), mode)
	}
	files := map[string]os.FileMode{FileName: 0o644, "sub/x.sh": 0o755, "sub/secret": 0o600, "ro/f": 0o444}
	for p, mode := range files {
		if err := os.WriteFile(filepath.Join(d, p), []byte(p), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(d, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	for p, mode := range map[string]os.FileMode{"": 0o700, "sub": 0o750, "ro": 0o500} {
		if err := os.Chmod(filepath.Join(d, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	scratch := filepath.Join(root, "scratch")
	if _, err := Cleanup(d, scratch, true); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(scratch, "crucible-dispatch-5")
	defer os.Chmod(filepath.Join(dst, "ro"), 0o700)
	for p, mode := range map[string]os.FileMode{"": 0o700, "sub": 0o750, "ro": 0o500, FileName: 0o644, "sub/x.sh": 0o755, "sub/secret": 0o600, "ro/f": 0o444} {
		fi, err := os.Lstat(filepath.Join(dst, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %o, want %o", p, fi.Mode().Perm(), mode)
		}
	}
	// A second copy merges into the first, read-only directory included.
	if _, err := Cleanup(d, scratch, true); err != nil {
		t.Fatalf("second copy: %v", err)
	}
}

func TestCleanupFailedUnreadable(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root reads any file: an unreadable file cannot be made")
	}
	root := t.TempDir()
	d := filepath.Join(root, "crucible-dispatch-6")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a-unreadable", FileName, LedgerName, "z.md"} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(d, "a-unreadable"), 0); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(root, "scratch")
	_, err := Cleanup(d, scratch, true)
	var cf *CopyFailures
	if !errors.As(err, &cf) || len(cf.Failures) != 1 || cf.Failures[0].Path != filepath.Join(d, "a-unreadable") {
		t.Fatalf("got %v, want one failure for the unreadable file", err)
	}
	for _, name := range []string{FileName, LedgerName, "z.md"} {
		if _, err := os.Stat(filepath.Join(scratch, "crucible-dispatch-6", name)); err != nil {
			t.Errorf("%s not copied: %v", name, err)
		}
	}
}

func TestDispatchRefusesForeignOwner(t *testing.T) {
	d := t.TempDir()
	writeManifest(t, d, `{"seq":1,"file":"1-a.md","status":"dispatched"}`+"\n")
	defer func(f func() int) { currentUID = f }(currentUID)
	currentUID = func() int { return os.Getuid() + 1 }
	check := func(what string, err error) {
		t.Helper()
		var de *DispatchError
		if !errors.As(err, &de) || de.Usage || !strings.Contains(de.Msg, "is owned by uid") || !strings.Contains(de.Msg, d) {
			t.Errorf("%s: %v, want a refusal naming the owner", what, err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(d, FileName))
	_, err := NextSeq(d)
	check("seq", err)
	_, err = Before(d, Dispatched{Seq: 2, File: "2-b.md"}, false, nil)
	check("before", err)
	_, err = After(d, Completion{Seq: 1, Status: "completed"}, nil)
	check("after", err)
	_, err = Cleanup(d, t.TempDir(), true)
	check("cleanup", err)
	after, _ := os.ReadFile(filepath.Join(d, FileName))
	if string(after) != string(before) {
		t.Errorf("the manifest changed:\n%s", after)
	}
}

func TestCleanupFailedCopiesTheLedgerThroughASymlink(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "crucible-dispatch-8")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, d, `{"seq":1}`+"\n")
	elsewhere := filepath.Join(root, "ledger-elsewhere.jsonl")
	if err := os.WriteFile(elsewhere, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(d, LedgerName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(d, "broken")); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(root, "scratch")
	if _, err := Cleanup(d, scratch, true); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(scratch, "crucible-dispatch-8", LedgerName))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("ledger copy: %v, %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(scratch, "crucible-dispatch-8", "broken")); err != nil || target != "nowhere" {
		t.Errorf("broken symlink copy: %q, %v", target, err)
	}
}
