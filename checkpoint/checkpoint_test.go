package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listing maps every path under dir (except .git contents) to its mode and
// hash: a file's, a symlink's target, a directory's bits (under its name
// and a slash).
func listing(t *testing.T, dir string, skipGit bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		if skipGit && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, _ := os.Lstat(p)
		switch {
		case d.IsDir():
			if rel != "." {
				out[rel+"/"] = fmt.Sprintf("dir %v", fi.Mode().Perm())
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		default:
			data, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("%v %x", fi.Mode(), sha256.Sum256(data))
		}
		return nil
	})
	return out
}

func diffMaps(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, "-"+k)
		}
	}
	for k, v := range b {
		if a[k] != v {
			d = append(d, "+"+k)
		}
	}
	return strings.Join(d, " ")
}

// seededRand is a random source seeded from the clock, its seed logged so
// that a failing run can be replayed: REWIND_TEST_SEED=<seed> seeds it so.
func seededRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("REWIND_TEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d", seed)
	return rand.New(rand.NewSource(seed))
}

func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	wt := t.TempDir()
	wt, _ = filepath.EvalSymlinks(wt)
	s, err := Open(wt, filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	return s, wt
}

func TestCreateRestoreExact(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a.txt"), "one\r\n")
	mustWrite(t, filepath.Join(wt, "dir/b.txt"), "b")
	mustWrite(t, filepath.Join(wt, "weird name\nwith newline"), "x")
	mustWrite(t, filepath.Join(wt, "node_modules/m.js"), "ignored")
	mustWrite(t, filepath.Join(wt, "nested/file.txt"), "nested")
	os.Symlink("a.txt", filepath.Join(wt, "link"))
	os.Chmod(filepath.Join(wt, "dir/b.txt"), 0o755)
	if out, err := exec.Command("git", "init", "-q", filepath.Join(wt, "nested")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	want := listing(t, wt, true)
	nestedGit := listing(t, filepath.Join(wt, "nested", ".git"), false)

	c1, err := s.Create(ctx, CreateOptions{Reason: "pre-wave-1", Source: "build"})
	if err != nil {
		t.Fatal(err)
	}
	if c1.Files != 5 {
		t.Errorf("files %d, want 5", c1.Files)
	}
	// Change everything.
	mustWrite(t, filepath.Join(wt, "a.txt"), "changed")
	os.Remove(filepath.Join(wt, "dir/b.txt"))
	mustWrite(t, filepath.Join(wt, "new/created.txt"), "new")
	mustWrite(t, filepath.Join(wt, "nested/file.txt"), "changed")
	mustWrite(t, filepath.Join(wt, "node_modules/m.js"), "still ignored, changed")
	changed := listing(t, wt, true)

	dry, err := s.Restore(ctx, "pre-wave-1", RestoreOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(dry.Write, ",") != "a.txt,dir/b.txt,nested/file.txt" || strings.Join(dry.Remove, ",") != "new/created.txt" {
		t.Errorf("dry run: write %q remove %q", dry.Write, dry.Remove)
	}
	if d := diffMaps(changed, listing(t, wt, true)); d != "" {
		t.Fatalf("dry run changed the work tree: %s", d)
	}

	r, err := s.Restore(ctx, c1.Checkpoint.ID[:6], RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := listing(t, wt, true)
	want["node_modules/m.js"] = got["node_modules/m.js"] // ignored: untouched
	if d := diffMaps(want, got); d != "" {
		t.Errorf("restore is not exact: %s", d)
	}
	if got["node_modules/m.js"] != changed["node_modules/m.js"] {
		t.Errorf("an ignored file was touched")
	}
	if d := diffMaps(nestedGit, listing(t, filepath.Join(wt, "nested", ".git"), false)); d != "" {
		t.Errorf("the nested .git changed: %s", d)
	}
	// Undo.
	if _, err := s.Restore(ctx, r.Safety.ID, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffMaps(changed, listing(t, wt, true)); d != "" {
		t.Errorf("undo is not exact: %s", d)
	}
	// Single file.
	if _, err := s.Restore(ctx, "pre-wave-1", RestoreOptions{Files: []string{"a.txt"}}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(wt, "a.txt")); string(data) != "one\r\n" {
		t.Errorf("a.txt = %q", data)
	}
	if _, err := os.Stat(filepath.Join(wt, "new/created.txt")); err != nil {
		t.Errorf("single-file restore touched another file")
	}
	cps, _ := s.List(ctx)
	var reasons []string
	for _, c := range cps {
		reasons = append(reasons, c.Reason)
	}
	if strings.Join(reasons, ",") != "pre-wave-1,pre-restore-safety,pre-restore-safety,pre-restore-safety-file" {
		t.Errorf("checkpoints %q", reasons)
	}
}

func TestUnchangedAndDuplicate(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a"), "a")
	c1, _ := s.Create(ctx, CreateOptions{Reason: "pre-wave-1", Source: "build"})
	c2, err := s.Create(ctx, CreateOptions{Reason: "pre-wave-2", Source: "build"})
	if err != nil || c2.Unchanged == nil || c2.Unchanged.ID != c1.Checkpoint.ID || c2.Checkpoint.ID == c1.Checkpoint.ID {
		t.Errorf("unchanged tree: %+v %v", c2, err)
	}
	fixed := s.now()
	s.Now = func() time.Time { return fixed }
	c3, _ := s.Create(ctx, CreateOptions{Reason: "again", Source: "x"})
	c4, _ := s.Create(ctx, CreateOptions{Reason: "again", Source: "x"})
	if !c4.Duplicate || c4.Checkpoint.ID != c3.Checkpoint.ID {
		t.Errorf("duplicate within a second was recorded again")
	}
	cps, _ := s.List(ctx)
	if len(cps) != 3 {
		t.Errorf("%d checkpoints", len(cps))
	}
}

func TestEvictionAndPrune(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	for i := 0; i < 6; i++ {
		mustWrite(t, filepath.Join(wt, "f"), strings.Repeat("x", i*1000))
		if _, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprintf("r%d", i), Source: "t", Keep: 4}); err != nil {
			t.Fatal(err)
		}
	}
	cps, _ := s.List(ctx)
	if len(cps) != 4 || cps[0].Reason != "r2" {
		t.Fatalf("after eviction: %d, first %s", len(cps), cps[0].Reason)
	}
	data, _ := os.ReadFile(s.manifestFile())
	if strings.Count(string(data), "\n") != 4 || !strings.HasPrefix(string(data), "| "+cps[0].Short()+" | ") {
		t.Errorf("manifest:\n%s", data)
	}
	ev, _, _, err := s.Prune(ctx, 2)
	if err != nil || len(ev) != 2 {
		t.Fatalf("prune: %v %d", err, len(ev))
	}
	cps, _ = s.List(ctx)
	for _, c := range cps {
		if _, err := s.Restore(ctx, c.ID, RestoreOptions{DryRun: true}); err != nil {
			t.Errorf("checkpoint %s unusable after prune: %v", c.Short(), err)
		}
	}
}

func TestResolve(t *testing.T) {
	cps := []*Checkpoint{
		{ID: "aaaa1111", Seq: 1, Reason: "pre-wave-1"},
		{ID: "aaaa2222", Seq: 2, Reason: "pre-wave-12"},
		{ID: "bbbb3333", Seq: 3, Reason: "pre-wave-2"},
		{ID: "cccc4444", Seq: 4, Reason: "beef"},
	}
	for ref, want := range map[string]string{
		"pre-wave-1": "aaaa1111", "pre-wave": "bbbb3333", "latest": "cccc4444", "latest~3": "aaaa1111",
		"bbbb": "bbbb3333", "beef": "cccc4444", "aaaa2": "aaaa2222",
	} {
		c, err := Resolve(cps, ref)
		if err != nil || c.ID != want {
			t.Errorf("Resolve(%q) = %v, %v; want %s", ref, c, err, want)
		}
	}
	for _, ref := range []string{"aaaa", "nope", "latest~4", "latest~x"} {
		if _, err := Resolve(cps, ref); err == nil {
			t.Errorf("Resolve(%q) succeeded", ref)
		}
	}
}

func TestRestoreKeepsPermissions(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	secret := filepath.Join(wt, "secret")
	mustWrite(t, secret, "v1")
	os.Chmod(secret, 0o600)
	if _, err := s.Create(ctx, CreateOptions{Reason: "c1", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, secret, "v2")
	os.Chmod(secret, 0o600)
	if _, err := s.Restore(ctx, "c1", RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(secret)
	data, _ := os.ReadFile(secret)
	if fi.Mode().Perm() != 0o600 || string(data) != "v1" {
		t.Errorf("secret is %v %q after restore, want 0600 v1", fi.Mode().Perm(), data)
	}
}

func TestFinishingAnInterruptedRestoreNamesTheFirstSafety(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a"), "a1")
	c1, _ := s.Create(ctx, CreateOptions{Reason: "c1", Source: "t"})
	mustWrite(t, filepath.Join(wt, "a"), "a2")
	first, _ := s.Create(ctx, CreateOptions{Reason: "pre-restore-safety", Source: "checkpoint"})
	// The marker an interrupted restore leaves, after a half-done write.
	mustWrite(t, s.restoreMarker(), "target "+c1.Checkpoint.Short()+"\nsafety "+first.Checkpoint.Short()+"\nreason c1\n")
	mustWrite(t, filepath.Join(wt, "a"), "half")
	res, err := s.Restore(ctx, "c1", RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Safety.ID != first.Checkpoint.ID {
		t.Errorf("undo names %s, want the first safety checkpoint %s", res.Safety.Short(), first.Checkpoint.Short())
	}
	if s.Interrupted() != nil {
		t.Errorf("the marker outlived the finished restore")
	}
	// Undoing it instead (a restore to that first safety checkpoint) names
	// its own safety checkpoint, the half-restored state.
	mustWrite(t, s.restoreMarker(), "target "+c1.Checkpoint.Short()+"\nsafety "+first.Checkpoint.Short()+"\nreason c1\n")
	mustWrite(t, filepath.Join(wt, "a"), "half again")
	undo, err := s.Restore(ctx, first.Checkpoint.ID, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if undo.Safety.ID == first.Checkpoint.ID {
		t.Errorf("the undo names its own target %s as the safety checkpoint", first.Checkpoint.Short())
	}
}

func TestSameCommitUnderTwoRefs(t *testing.T) {
	cps := []*Checkpoint{{ID: "abcd1234", Seq: 1, Reason: "r"}, {ID: "abcd1234", Seq: 2, Reason: "r"}}
	c, err := Resolve(cps, "abcd1234")
	if err != nil || c.Seq != 2 {
		t.Errorf("Resolve = %v, %v", c, err)
	}
}

func TestStoreWithoutRecordIsRefused(t *testing.T) {
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a"), "a")
	if _, err := s.Create(context.Background(), CreateOptions{Reason: "c1", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(s.ownerFile())
	if _, err := Open(t.TempDir(), s.Dir); !errors.Is(err, ErrForeignStore) {
		t.Errorf("a store without its work tree record was adopted: %v", err)
	}
}

// TestPrewriteSameTree checks that writing blobs ahead in scratch indexes (as a
// large capture does) gives the tree update-index alone gives, whatever the
// names and kinds of the files, and leaves a store git finds sound.
func TestPrewriteSameTree(t *testing.T) {
	ctx := context.Background()
	trees := map[int]string{}
	for _, min := range []int{1, 1 << 30} {
		s, wt := newStore(t)
		for i, name := range []string{"plain.txt", "sp ace.txt", " lead", "quo\"te", "new\nline", "cr\r", "ünï.txt", "dir/deep/f.go", "tab\there"} {
			mustWrite(t, filepath.Join(wt, name), strings.Repeat(fmt.Sprintf("content %d\r\n", i), i+1))
		}
		mustWrite(t, filepath.Join(wt, "target.txt"), "the symlink's target")
		os.Symlink("target.txt", filepath.Join(wt, "link"))
		os.Chmod(filepath.Join(wt, "plain.txt"), 0o755)
		prewriteMin = min
		var trace bytes.Buffer
		gitexec.Trace = &trace
		made, err := s.Create(ctx, CreateOptions{Reason: "first", Source: "test"})
		prewriteMin, gitexec.Trace = 2000, nil
		if err != nil {
			t.Fatal(err)
		}
		if ran := strings.Contains(trace.String(), "update-index --add --remove -z --stdin"); ran != (min == 1) {
			t.Fatalf("prewrite ran: %v, with the threshold at %d", ran, min)
		}
		trees[min] = made.Checkpoint.Tree
		if out, err := s.git().Run(ctx, "fsck", "--strict"); err != nil {
			t.Fatalf("fsck: %v %s", err, out)
		}
		out, err := s.git().Run(ctx, "cat-file", "-p", made.Checkpoint.Tree)
		if err != nil || !strings.Contains(string(out), "120000 blob") {
			t.Fatalf("the symlink is not stored as one: %s %v", out, err)
		}
	}
	if trees[1] != trees[1<<30] {
		t.Errorf("tree with prewrite %s, without %s", trees[1], trees[1<<30])
	}
}

// A reason or source with a NUL byte (one a hook's JSON can carry) is refused
// as a bad label, before anything is written.
func TestCheckLabelNUL(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a.txt"), "a\n")
	_, err := s.Create(ctx, CreateOptions{Reason: "tool\x00call", Source: "t"})
	if !errors.Is(err, ErrBadLabel) || !strings.Contains(err.Error(), "holds a NUL byte") {
		t.Fatalf("got %v, want a bad label holding a NUL byte", err)
	}
	if cps, err := s.List(ctx); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints after the refusal: %v %v", cps, err)
	}
}
