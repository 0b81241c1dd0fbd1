package checkpoint

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileGoneBeforeHashNotCached: a changed file the walk saw, removed
// before update-index hashes it (which then drops it from the index), must
// not stay in the stat cache as the index holding it: else, once it is back,
// every later capture takes it as unchanged (git's diff-files cannot name a
// path the index lacks) and no checkpoint holds it.
func TestFileGoneBeforeHashNotCached(t *testing.T) {
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	defer func(n int64) { heldBytesMax = n }(heldBytesMax)
	heldBytesMax = 0 // the files are hashed by update-index, not held
	p := filepath.Join(wt, "d1/f4.txt")
	mustWrite(t, p, "changed\n")
	nextSecond()
	createWhileHashed(t, s, "gone meanwhile", func() { os.Remove(p) })
	mustWrite(t, p, "back again\n")
	nextSecond()
	tracedCreate(t, s, wt, "back")
}

// TestByIDRandomSteps: random small changes, checkpoint after checkpoint,
// most entered by id (byIDMax low, so that refreshes come too), some in the
// second the capture begins: odd names (a tab, a newline, a leading dash,
// bytes that are not UTF-8), a file that becomes a directory and back,
// symlinks, bit changes, same-size rewrites with the mtime set back. Every
// checkpoint must hold what a fresh store's first one does.
func TestByIDRandomSteps(t *testing.T) {
	byIDRandomSteps(t, func(wt string) *Store {
		s, err := Open(wt, filepath.Join(t.TempDir(), "store"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestByIDRandomStepsSHA256 is TestByIDRandomSteps in stores of sha256 ids.
func TestByIDRandomStepsSHA256(t *testing.T) {
	byIDRandomSteps(t, func(wt string) *Store { return sha256Store(t, wt) })
}

// byIDRandomSteps makes the stores it compares with open.
func byIDRandomSteps(t *testing.T, open func(wt string) *Store) {
	needPreimport(t)
	ctx := context.Background()
	defer func(n int) { byIDMax = n }(byIDMax)
	byIDMax = 6
	wt, _ := filepath.EvalSymlinks(t.TempDir())
	s := open(wt)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	names := []string{"a", "b\tc", "-dash", "new\nline", "caf\xe9", "d/e", "d/f", "g/h/i"}
	name := func() string {
		return fmt.Sprintf("%s/%s", []string{"x", "y", "x/z"}[rng.Intn(3)], names[rng.Intn(len(names))])
	}
	for i := 0; i < 12; i++ {
		p := filepath.Join(wt, name())
		os.RemoveAll(p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("start %d\n", i)), 0o644)
	}
	byID := 0
	for step := 0; step < 20; step++ {
		if rng.Intn(3) > 0 {
			nextSecond()
		}
		for n := rng.Intn(4) + 1; n > 0; n-- {
			randomEdit(rng, filepath.Join(wt, name()), true)
		}
		made, trace := traceCreate(t, s, fmt.Sprint("step ", step))
		if strings.Contains(trace, "--index-info") {
			byID++
		}
		s.cacheWrites.Wait()
		want, err := open(wt).Create(ctx, CreateOptions{Reason: "fresh", Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if made.Checkpoint.Tree != want.Checkpoint.Tree || !sameMeta(made.Checkpoint.meta, want.Checkpoint.meta) {
			t.Fatalf("seed %d step %d: tree %s %q, a fresh store's %s %q", seed, step,
				made.Checkpoint.Tree, made.Checkpoint.meta.trailers(), want.Checkpoint.Tree, want.Checkpoint.meta.trailers())
		}
	}
	if byID == 0 {
		t.Error("no change went in by id")
	}
	t.Logf("seed %d: %d of 20 captures entered files by id", seed, byID)
}

// TestByIDSymlinkUnderDotGitmodules: git refuses a symlink anywhere below a
// directory named .gitmodules (verify_path), as it refuses one named so.
// update-index --add only ignores such a path; update-index --index-info
// dies on it. A small change that adds one must still make a checkpoint,
// and hold what a fresh store's does.
func TestByIDSymlinkUnderDotGitmodules(t *testing.T) {
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	if err := os.MkdirAll(filepath.Join(wt, ".gitmodules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../d0/f0.txt", filepath.Join(wt, ".gitmodules/link")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, ".gitmodules/file"), "a file\n")
	nextSecond()
	tracedCreate(t, s, wt, "symlink under .gitmodules")
}

// TestRulePropertyByIDRefresh is a round of TestRuleProperty with byIDMax
// low: files held by id are hashed again every few checkpoints, between
// the restores.
func TestRulePropertyByIDRefresh(t *testing.T) {
	defer func(n int) { byIDMax = n }(byIDMax)
	byIDMax = 3
	ruleRound(t, 7, 60)
}

// TestRacyCutClockLag: the kernel stamps a file from a clock that may lag
// a tick (a few milliseconds) behind the one rewind reads. A file changed
// just after a capture began in the first milliseconds of a second may then
// carry a time in the second before; it must still count as racy: a
// same-size rewrite in the same tick, after the capture read it, would
// leave its stat data as the stat cache holds it.
func TestRacyCutClockLag(t *testing.T) {
	s, _ := newStore(t)
	sec := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start := sec.Add(time.Millisecond)
	stamp := uint64(sec.Add(-3 * time.Millisecond).UnixNano())
	keep := []verdict{{path: "f", keep: true, regular: true, unchanged: true, key: statKey{mtime: stamp, ctime: stamp}}}
	if racy := s.racyFiles(keep, fileRacyCut(start)); len(racy) != 1 {
		t.Fatalf("a file stamped 3ms before a capture that began 1ms into a second: racy %q, want it racy", racy)
	}
}

// TestChangedWhileHashed: files changed, removed, made directories or
// symlinks after the walk and before update-index hashes them (the files
// of a small change hashed beside the import, heldBytesMax 0): the
// checkpoint after the next quiet second must hold what a fresh store's
// does, whatever the capture in between held.
func TestChangedWhileHashed(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	defer func(n int64) { heldBytesMax = n }(heldBytesMax)
	heldBytesMax = 0
	s, wt := newStore(t)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	name := func() string { return filepath.Join(wt, fmt.Sprintf("d%d/f%d", rng.Intn(2), rng.Intn(6))) }
	edit := func(p string) {
		switch rng.Intn(5) {
		case 0:
			rewriteSameSize(p)
		case 1:
			os.RemoveAll(p)
		case 2:
			os.RemoveAll(p)
			os.Symlink("target", p)
		case 3:
			os.RemoveAll(p)
			os.MkdirAll(p, 0o755)
			os.WriteFile(filepath.Join(p, "in"), []byte("inside\n"), 0o644)
		default:
			os.RemoveAll(p)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(strings.Repeat("y", 1+rng.Intn(9))), 0o644)
		}
	}
	for i := 0; i < 10; i++ {
		mustWrite(t, name(), fmt.Sprintf("start %d\n", i))
	}
	for _, what := range []string{"start", "settled"} {
		if _, err := s.Create(ctx, CreateOptions{Reason: what, Source: "test"}); err != nil {
			t.Fatal(err)
		}
		nextSecond()
	}
	for step := 0; step < 12; step++ {
		var targets []string
		for n := rng.Intn(3) + 1; n > 0; n-- {
			p := name()
			targets = append(targets, p)
			edit(p)
		}
		nextSecond()
		createWhileHashed(t, s, fmt.Sprintf("seed %d step %d", seed, step), func() { edit(targets[rng.Intn(len(targets))]) })
		nextSecond()
		made, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("quiet ", step), Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		s.cacheWrites.Wait()
		if want := freshTree(t, wt); made.Checkpoint.Tree != want {
			t.Fatalf("seed %d step %d: tree %s, a fresh store's %s", seed, step, made.Checkpoint.Tree, want)
		}
	}
}

// TestNewFileMadeDirectoryWhileHashed: a new file the walk saw, replaced by
// a directory before update-index hashes it, is a change made during the
// capture like any other: the checkpoint must still be made.
func TestNewFileMadeDirectoryWhileHashed(t *testing.T) {
	needPreimport(t)
	defer func(n int64) { heldBytesMax = n }(heldBytesMax)
	heldBytesMax = 0
	s, wt := settledStore(t, tenFiles(t))
	p := filepath.Join(wt, "d0/new")
	mustWrite(t, p, "new\n")
	nextSecond()
	createWhileHashed(t, s, "made a directory meanwhile", func() {
		os.Remove(p)
		mustWrite(t, filepath.Join(p, "in"), "inside\n")
	})
	nextSecond()
	tracedCreate(t, s, wt, "quiet")
}

// TestDirectoryMadeSymlinkWhileHashed: a directory of new files the walk
// saw, replaced by a symlink before update-index hashes them ("beyond a
// symbolic link"), is a change made during the capture like any other:
// the checkpoint must still be made.
func TestDirectoryMadeSymlinkWhileHashed(t *testing.T) {
	needPreimport(t)
	defer func(n int64) { heldBytesMax = n }(heldBytesMax)
	heldBytesMax = 0
	s, wt := settledStore(t, tenFiles(t))
	dir := filepath.Join(wt, "d0/sub")
	mustWrite(t, filepath.Join(dir, "new"), "new\n")
	nextSecond()
	createWhileHashed(t, s, "made a symlink meanwhile", func() {
		os.RemoveAll(dir)
		os.Symlink("..", dir)
	})
	nextSecond()
	tracedCreate(t, s, wt, "quiet")
}

// rewriteSameSize flips a bit of a regular file's first byte, keeping its
// size, and sets its mtime back: only its ctime tells the change.
func rewriteSameSize(p string) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	data, _ := os.ReadFile(p)
	if len(data) > 0 {
		data[0] ^= 1
		os.WriteFile(p, data, fi.Mode().Perm())
		os.Chtimes(p, fi.ModTime(), fi.ModTime())
	}
}

// createWhileHashed takes a checkpoint, with meanwhile run once as
// update-index is about to hash the files (after the walk).
func createWhileHashed(t *testing.T, s *Store, what string, meanwhile func()) {
	t.Helper()
	once := false
	s.Progress = func(step string, done, total int) {
		if step == "hashing files" && !once {
			once = true
			meanwhile()
		}
	}
	_, err := s.Create(context.Background(), CreateOptions{Reason: what, Source: "test"})
	s.Progress = nil
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	s.cacheWrites.Wait()
}

// TestProcedureGCBetweenByIDCheckpoints: crucible's procedure runs git gc
// --prune=now on the store it shares (with its own index, not rewind's)
// while rewind's index holds changed files by id only, among them files a
// dry-run restore's capture entered, which no checkpoint holds. Every later
// checkpoint is a fresh store's, and every checkpoint restores exactly.
func TestProcedureGCBetweenByIDCheckpoints(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	for i := range 40 {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%02d.txt", i%4, i)), fmt.Sprintf("file %d\n", i))
	}
	edit := func(round int, files ...int) {
		for _, i := range files {
			mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%02d.txt", i%4, i)), fmt.Sprintf("file %d, round %d\n", i, round))
		}
	}
	states := map[string]map[string]string{}
	create := func(reason string) {
		t.Helper()
		tracedCreate(t, s, wt, reason)
		states[reason] = listing(t, wt, true)
	}
	create("one")
	edit(2, 1, 5, 9, 13)
	create("two")
	edit(3, 2, 6, 30)
	if _, err := s.Restore(ctx, "one", RestoreOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	s.cacheWrites.Wait()
	if c := s.readStatCache(); c == nil || c.held == 0 {
		t.Fatal("no file is held by id: the case is not made")
	}
	procedureGC(t, s, wt)
	edit(4, 5, 21)
	create("three")
	edit(5, 2, 3)
	create("four")
	for _, reason := range []string{"two", "one", "four", "three"} {
		if _, err := s.Restore(ctx, reason, RestoreOptions{}); err != nil {
			t.Fatalf("restore %s: %v", reason, err)
		}
		if d := diffMaps(states[reason], listing(t, wt, true)); d != "" {
			t.Fatalf("restore %s is not what it held: %s", reason, d)
		}
	}
}
