package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// sharedParts lists the shared parts of split indexes in the store.
func sharedParts(t *testing.T, s *Store) []string {
	t.Helper()
	parts, err := filepath.Glob(filepath.Join(s.gitDir(), "sharedindex.*"))
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// freshTree is the tree a new store makes of the work tree as it is now: what
// any capture must give, whatever state the index was left in.
func freshTree(t *testing.T, wt string) string {
	t.Helper()
	return freshCheckpoint(t, wt).Tree
}

// freshCheckpoint is the checkpoint a new store makes of the work tree now.
func freshCheckpoint(t *testing.T, wt string) *Checkpoint {
	t.Helper()
	fresh, err := Open(wt, filepath.Join(t.TempDir(), "fresh"))
	if err != nil {
		t.Fatal(err)
	}
	made, err := fresh.Create(context.Background(), CreateOptions{Reason: "fresh", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return made.Checkpoint
}

func splitWorkTree(t *testing.T, wt string, files int) {
	t.Helper()
	for i := 0; i < files; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%03d.txt", i%7, i)), fmt.Sprintf("file %d\n", i))
	}
}

// TestIndexIsSplit checks that the store's index is kept split: after a
// change, the index file holds only what changed, and the shared part the
// rest.
func TestIndexIsSplit(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	splitWorkTree(t, wt, 300)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "d1/f001.txt"), "changed\n")
	made, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// (The first capture may have written two shared parts: files it hashed
	// in the second it began leave the index again, a large change.)
	var largest int64
	for _, p := range sharedParts(t, s) {
		if fi, err := os.Stat(p); err == nil && fi.Size() > largest {
			largest = fi.Size()
		}
	}
	front, err := os.Stat(s.indexFile())
	if err != nil {
		t.Fatal(err)
	}
	if front.Size()*4 > largest {
		t.Errorf("the index is %d bytes beside a shared part of %d: not split", front.Size(), largest)
	}
	if got := freshTree(t, wt); made.Checkpoint.Tree != got {
		t.Errorf("tree %s, a fresh store's %s", made.Checkpoint.Tree, got)
	}
}

// TestSplitIndexAfterKill puts the store in the states a kill can leave while
// git writes a split index (a new shared part written, the index naming it not
// yet in place), and the state damage leaves (the index's shared part gone),
// and checks that the next checkpoint is what a fresh store takes: in the
// first state silently, in the second with a note, never an error.
func TestSplitIndexAfterKill(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	var warnings []string
	s.Warn = func(m string) { warnings = append(warnings, m) }
	splitWorkTree(t, wt, 200)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	oldIndex, err := os.ReadFile(s.indexFile())
	if err != nil {
		t.Fatal(err)
	}
	oldParts := sharedParts(t, s)

	// A capture from scratch writes a new shared part and an index naming it.
	os.Remove(s.indexFile())
	mustWrite(t, filepath.Join(wt, "d2/f002.txt"), "changed once\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if parts := sharedParts(t, s); len(parts) != len(oldParts)+1 {
		t.Fatalf("shared parts %v after a capture from scratch, before %v", parts, oldParts)
	}

	// Killed after the new shared part, before the index: the old index
	// (whose shared part is still there) beside a shared part nothing names.
	if err := os.WriteFile(s.indexFile(), oldIndex, 0o644); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "d3/f003.txt"), "changed twice\n")
	warnings = nil
	made, err := s.Create(ctx, CreateOptions{Reason: "three", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings with the old index in place: %q", warnings)
	}
	if got := freshTree(t, wt); made.Checkpoint.Tree != got {
		t.Errorf("after a kill between the shared part and the index: tree %s, a fresh store's %s", made.Checkpoint.Tree, got)
	}

	// The index's shared part gone: a note, the index rebuilt.
	for _, p := range sharedParts(t, s) {
		os.Remove(p)
	}
	mustWrite(t, filepath.Join(wt, "d4/f004.txt"), "changed thrice\n")
	warnings = nil
	made, err = s.Create(ctx, CreateOptions{Reason: "four", Source: "test"})
	if err != nil {
		t.Fatalf("a missing shared part is an error: %v", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "index (a cache) was damaged") {
		t.Errorf("warnings %q, want one saying the index was damaged", warnings)
	}
	if got := freshTree(t, wt); made.Checkpoint.Tree != got {
		t.Errorf("after the shared part was lost: tree %s, a fresh store's %s", made.Checkpoint.Tree, got)
	}
	if out, err := exec.Command("git", "--git-dir", s.gitDir(), "fsck", "--no-progress").CombinedOutput(); err != nil {
		t.Errorf("fsck: %v %s", err, out)
	}
}

// TestWholeIndexIsSplitOnce checks that an index written whole (as rewind
// wrote it before splitting) is split by the next capture, which says so
// when that takes longer than migrationNote, and that the capture after it
// says nothing.
func TestWholeIndexIsSplitOnce(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	var warnings []string
	s.Warn = func(m string) { warnings = append(warnings, m) }
	splitWorkTree(t, wt, 100)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	whole := s.git()
	whole.SplitIndexFile = ""
	if _, err := whole.Run(ctx, "update-index", "--no-split-index"); err != nil {
		t.Fatal(err)
	}
	for _, p := range sharedParts(t, s) {
		os.Remove(p)
	}
	if !s.unsplitIndex() {
		t.Fatal("the index is not whole")
	}
	migrationNote = 0
	defer func() { migrationNote = time.Second }()
	warnings = nil
	if _, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "index was split, once") {
		t.Errorf("warnings %q, want one saying the index was split", warnings)
	}
	if s.unsplitIndex() {
		t.Error("the index is still whole")
	}
	mustWrite(t, filepath.Join(wt, "d0/f000.txt"), "changed\n")
	warnings = nil
	made, err := s.Create(ctx, CreateOptions{Reason: "three", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings after the split: %q", warnings)
	}
	if got := freshTree(t, wt); made.Checkpoint.Tree != got {
		t.Errorf("tree %s, a fresh store's %s", made.Checkpoint.Tree, got)
	}
}

// TestPruneLeavesOneSharedPart checks that a prune drops the shared parts
// earlier indexes named (kept a day otherwise), and that the index it leaves
// is whole and gives the next checkpoint a fresh store's tree.
func TestPruneLeavesOneSharedPart(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	splitWorkTree(t, wt, 150)
	// Files written in the capture's second are racy and left out of the
	// index; the index compared below must hold them.
	untilNextSecond()
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(s.indexFile()) // the next capture writes a new shared part
	mustWrite(t, filepath.Join(wt, "d1/f001.txt"), "changed\n")
	untilNextSecond()
	if _, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if parts := sharedParts(t, s); len(parts) < 2 {
		t.Fatalf("shared parts %v before the prune, want at least two", parts)
	}
	before, err := s.git().Run(ctx, "ls-files", "-z", "--stage")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Prune(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if parts := sharedParts(t, s); len(parts) != 1 {
		t.Errorf("shared parts %v after the prune, want one", parts)
	}
	after, err := s.git().Run(ctx, "ls-files", "-z", "--stage")
	if err != nil || string(after) != string(before) || len(before) == 0 {
		t.Fatalf("the index after the prune differs (%d bytes listed, %d before): %v", len(after), len(before), err)
	}
	mustWrite(t, filepath.Join(wt, "d2/f002.txt"), "changed too\n")
	made, err := s.Create(ctx, CreateOptions{Reason: "three", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := freshTree(t, wt); made.Checkpoint.Tree != got {
		t.Errorf("tree %s, a fresh store's %s", made.Checkpoint.Tree, got)
	}
}

// untilNextSecond sleeps into the next whole second, past its first tenth
// (fileRacyCut), so that what was written before is not racy for the next
// capture.
func untilNextSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now) + 110*time.Millisecond)
}

// TestReplacedSharedPartDropped checks that a capture whose index names a new
// shared part deletes the part the index named before (git would keep it a
// day, as large as the index), keeps one another index of the store names
// (the procedure's), and leaves an index git reads, with exact checkpoints.
func TestReplacedSharedPartDropped(t *testing.T) {
	defer func(old int64) { splitPartMin = old }(splitPartMin)
	splitPartMin = 0
	ctx := context.Background()
	s, wt := newStore(t)
	splitWorkTree(t, wt, 300)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past the racy second: the index keeps every file
	if _, err := s.Create(ctx, CreateOptions{Reason: "settled", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	first := namedSharedPart(s.indexFile())
	if first == "" {
		t.Fatal("the index names no shared part")
	}
	// Another index naming the same part: the procedure's, were its git to
	// split its index.
	data, err := os.ReadFile(s.indexFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.procedureIndex(), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		// A third of the entries rewritten: the index's own part passes an
		// eighth of the shared part (splitPartLarge), which is written anew.
		for i := 0; i < 300; i += 3 {
			mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%03d.txt", i%7, i)), fmt.Sprintf("round %d file %d\n", round, i))
		}
		time.Sleep(1100 * time.Millisecond)
		made, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprintf("round %d", round), Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		named := namedSharedPart(s.indexFile())
		if named == "" || named == first {
			t.Fatalf("round %d: the index names %q, not a new shared part", round, named)
		}
		want := []string{filepath.Join(s.gitDir(), "sharedindex."+named), filepath.Join(s.gitDir(), "sharedindex."+first)}
		sort.Strings(want)
		if got := sharedParts(t, s); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("round %d: shared parts %v, want the index's and the procedure's %v", round, got, want)
		}
		if out, err := s.git().Run(ctx, "ls-files", "-z"); err != nil || strings.Count(string(out), "\x00") != 300 {
			t.Fatalf("round %d: ls-files of the index: %v (%d paths)", round, err, strings.Count(string(out), "\x00"))
		}
		if got := freshTree(t, wt); made.Checkpoint.Tree != got {
			t.Errorf("round %d: tree %s, a fresh store's %s", round, made.Checkpoint.Tree, got)
		}
	}
	// Once the procedure's index names another, the part is deleted with the
	// next one the store's index leaves.
	if err := os.Remove(s.procedureIndex()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i += 2 {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%03d.txt", i%7, i)), fmt.Sprintf("last %d\n", i))
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.Create(ctx, CreateOptions{Reason: "last", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := sharedParts(t, s); len(got) != 2 {
		t.Errorf("shared parts %v: want the index's and the procedure's old one (left to git's expiry)", got)
	}
}

// TestArmLeavesNoSharedPart checks that capturing an arm's work tree, with an
// index of its own deleted afterwards, leaves no shared part of that index in
// the store.
func TestArmLeavesNoSharedPart(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	splitWorkTree(t, wt, 50)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	before := sharedParts(t, s)
	arm := filepath.Join(t.TempDir(), "arm")
	splitWorkTree(t, arm, 80)
	if _, err := s.CreateFrom(ctx, arm, CreateOptions{Reason: "arm", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := sharedParts(t, s); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Errorf("shared parts %v after the arm's capture, %v before", got, before)
	}
}

// TestNamedSharedPartFormats reads the shared part's id from split indexes
// git writes in each index version, in sha1 and sha256 repositories, with
// entries of every name length that pads differently.
func TestNamedSharedPartFormats(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		for _, version := range []string{"2", "3", "4"} {
			t.Run(format+"-v"+version, func(t *testing.T) {
				dir := t.TempDir()
				git := func(args ...string) {
					t.Helper()
					cmd := exec.Command("git", append([]string{"-c", "index.version=" + version, "-c", "splitIndex.maxPercentChange=100"}, args...)...)
					cmd.Dir = dir
					cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
					if out, err := cmd.CombinedOutput(); err != nil {
						if format == "sha256" && args[0] == "init" {
							t.Skipf("git cannot make a sha256 repository: %s", out)
						}
						t.Fatalf("git %v: %v\n%s", args, err, out)
					}
				}
				git("init", "-q", "--object-format="+format)
				for i := 1; i <= 20; i++ {
					mustWrite(t, filepath.Join(dir, strings.Repeat("n", i)+"/f"+strings.Repeat("x", i)), "a\n")
				}
				git("add", "-A")
				git("update-index", "--split-index")
				mustWrite(t, filepath.Join(dir, "n/fx"), "b\n")
				git("add", "n/fx")
				if version == "3" {
					// An entry with extended flags, in the index's own part.
					git("update-index", "--skip-worktree", "--", "nn/fxx")
				}
				parts, _ := filepath.Glob(filepath.Join(dir, ".git", "sharedindex.*"))
				if len(parts) != 1 {
					t.Fatalf("shared parts %v", parts)
				}
				if got, want := namedSharedPart(filepath.Join(dir, ".git", "index")), strings.TrimPrefix(filepath.Base(parts[0]), "sharedindex."); got != want {
					t.Errorf("named %q, the part is %q", got, want)
				}
			})
		}
	}
	if got := namedSharedPart(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Errorf("a missing index names %q", got)
	}
}

// TestArmLeavesStatCache: an arm's capture (CreateFrom: another work tree,
// an index of its own used once) leaves the store's stat cache as it was,
// and the store's next checkpoint uses it.
func TestArmLeavesStatCache(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	splitWorkTree(t, wt, 50)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	s.cacheWrites.Wait()
	before, err := os.ReadFile(s.statCacheFile())
	if err != nil {
		t.Fatal(err)
	}
	arm := filepath.Join(t.TempDir(), "arm")
	splitWorkTree(t, arm, 80)
	if _, err := s.CreateFrom(ctx, arm, CreateOptions{Reason: "arm", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if after, err := os.ReadFile(s.statCacheFile()); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the arm's capture changed the store's stat cache (%d bytes to %d, %v)", len(before), len(after), err)
	}
	mustWrite(t, filepath.Join(wt, "d0/f000.txt"), "changed\n")
	if _, trace := tracedCreate(t, s, wt, "two"); !strings.Contains(trace, "stat cache used: true") {
		t.Errorf("the store's next checkpoint did not use its stat cache:\n%s", trace)
	}
}
