package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

func TestListCacheRoundTrip(t *testing.T) {
	want := &listCache{inputs: []byte("in"), parents: []byte("pa"),
		paths:    []string{"a", "b/c", "b/d e\n"},
		tracked:  map[string]bool{"b/c": true},
		dirs:     map[string]dirKeys{"": {dir: statKey{1, 2, 3, 4, 5, 6, 7, 8}}, "b": racyKeys},
		dirPerms: map[string]os.FileMode{"": 0o755, "b": 0o700},
		digests:  map[string][]byte{"b": []byte("0123456789abcdef")},
		empty:    []string{"b/x"}}
	data := want.encode()
	got, err := decodeListCache(data)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x20
		if _, err := decodeListCache(bad); err == nil {
			t.Fatalf("a flipped byte %d was not noticed", i)
		}
	}
}

func FuzzListCache(f *testing.F) {
	f.Add((&listCache{inputs: []byte("i"), paths: []string{"a"}, tracked: map[string]bool{},
		dirs: map[string]dirKeys{"": {}}, dirPerms: map[string]os.FileMode{"": 0o755}}).encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeListCache(data)
		if err != nil {
			return
		}
		if _, err := decodeListCache(c.encode()); err != nil {
			t.Fatalf("a decoded cache does not survive encoding: %v", err)
		}
	})
}

// TestListCacheSameCheckpoints takes a checkpoint of one project (a git
// repository with .gitignore files at two levels) in two stores after every
// step of random changes: new files and directories, deletions, renames,
// directory bits, .gitignore rewritten in place at the same size, a new
// .gitignore deeper down, .rewindignore, info/exclude and the excludes file
// the config names, files tracked and untracked, a nested repository coming
// and going. One store lists with the listing cache (trusting every
// directory changed before the capture began, to see it used between quick
// steps), the other is forced to the full walk, as on a file system judged
// untrustworthy: both must hold the same tree and bits every time.
func TestListCacheSameCheckpoints(t *testing.T) {
	ctx := context.Background()
	withCache, wt := newStore(t)
	without, err := Open(wt, filepath.Join(t.TempDir(), "without"))
	if err != nil {
		t.Fatal(err)
	}
	without.Now = withCache.Now
	if !trustedHere(withCache) {
		t.Skip("the listing cache does not trust this file system")
	}
	defer func(cut func(time.Time, bool) time.Time) { dirRacyCut = cut }(dirRacyCut)
	dirRacyCut = func(start time.Time, _ bool) time.Time { return start }

	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	gitIn(t, wt, "init", "-q")
	mustWrite(t, filepath.Join(wt, ".gitignore"), "*.log\nout/\n")
	mustWrite(t, filepath.Join(wt, "src/.gitignore"), "*.tmp\n")
	for i := 0; i < 20; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("src/d%d/f%d.go", i%4, i)), fmt.Sprintf("package p // %d\n", i))
	}
	gitIn(t, wt, "add", "-A")

	rng := seededRand(t)
	dir := func() string { return []string{"", "src", "src/d1", "src/d2/new", "top", "src/d3"}[rng.Intn(6)] }
	file := func() string {
		return filepath.Join(dir(), []string{"a.go", "b.log", "c.tmp", "d.txt", "out/e.go"}[rng.Intn(5)])
	}
	steps := []func() string{
		func() string { p := file(); mustWrite(t, filepath.Join(wt, p), "new "+p); return "write " + p },
		func() string { p := file(); os.RemoveAll(filepath.Join(wt, p)); return "remove " + p },
		func() string {
			// a new file in place of the old, as a restore or a checkout
			// writes one: the directory changes, its names do not
			p := file()
			if os.Remove(filepath.Join(wt, p)) != nil {
				return "nothing"
			}
			mustWrite(t, filepath.Join(wt, p), fmt.Sprint("anew ", rng.Int()))
			return "write anew " + p
		},
		func() string {
			p := filepath.Join(wt, dir(), "tmp~")
			if os.MkdirAll(filepath.Dir(p), 0o755) != nil || os.WriteFile(p, nil, 0o644) != nil {
				return "nothing"
			}
			os.Remove(p)
			return "a file made and removed in " + filepath.Dir(p)
		},
		func() string {
			// a file and a directory of one name, in turn
			p := filepath.Join(dir(), "swap")
			fi, err := os.Lstat(filepath.Join(wt, p))
			os.RemoveAll(filepath.Join(wt, p))
			if err == nil && fi.IsDir() {
				mustWrite(t, filepath.Join(wt, p), "a file")
				return "a file in place of the directory " + p
			}
			mustWrite(t, filepath.Join(wt, p, "inner.go"), "inner")
			return "a directory in place of " + p
		},
		func() string { d := dir(); os.RemoveAll(filepath.Join(wt, d, "out")); return "remove " + d + "/out" },
		func() string {
			d := dir()
			if d == "" {
				return "nothing"
			}
			os.Rename(filepath.Join(wt, d), filepath.Join(wt, d+"-moved"))
			return "rename " + d
		},
		func() string {
			d := dir()
			os.MkdirAll(filepath.Join(wt, d, "empty"), 0o755)
			os.Chmod(filepath.Join(wt, d, "empty"), []os.FileMode{0o700, 0o755, 0o750}[rng.Intn(3)])
			return "chmod " + d + "/empty"
		},
		func() string {
			// same size: only the content and the times say it changed
			p := filepath.Join(wt, ".gitignore")
			data, _ := os.ReadFile(p)
			if bytes.Contains(data, []byte("*.log")) {
				data = bytes.Replace(data, []byte("*.log"), []byte("*.go "), 1)
			} else {
				data = bytes.Replace(data, []byte("*.go "), []byte("*.log"), 1)
			}
			os.WriteFile(p, data, 0o644)
			return "rewrite .gitignore"
		},
		func() string {
			mustWrite(t, filepath.Join(wt, "src/d1/.gitignore"), []string{"*.go\n", "!*.log\n", "a.*\n"}[rng.Intn(3)])
			return "src/d1/.gitignore"
		},
		func() string {
			mustWrite(t, filepath.Join(wt, ".rewindignore"), []string{"*.txt\n", "top/\n", ""}[rng.Intn(3)])
			return ".rewindignore"
		},
		func() string {
			mustWrite(t, filepath.Join(wt, ".git/info/exclude"), []string{"*.txt\n", "d.*\n", ""}[rng.Intn(3)])
			return "info/exclude"
		},
		func() string {
			mustWrite(t, filepath.Join(home, "excludes"), []string{"*.tmp\n", "!*.tmp\n"}[rng.Intn(2)])
			gitIn(t, wt, "config", "core.excludesFile", "~/excludes")
			return "core.excludesFile"
		},
		func() string { gitIn(t, wt, "add", "-A", "-f", "."); return "git add -A -f" },
		func() string {
			gitIn(t, wt, "rm", "-r", "-q", "-f", "--cached", "--ignore-unmatch", "src/d1")
			return "git rm --cached src/d1"
		},
		func() string {
			if _, err := os.Stat(filepath.Join(wt, "top/nested/.git")); err == nil {
				os.RemoveAll(filepath.Join(wt, "top/nested"))
				return "remove the nested repository"
			}
			mustWrite(t, filepath.Join(wt, "top/nested/n.go"), "nested")
			gitIn(t, filepath.Join(wt, "top/nested"), "init", "-q")
			gitIn(t, filepath.Join(wt, "top/nested"), "add", "-A")
			gitIn(t, filepath.Join(wt, "top/nested"), "commit", "-q", "-m", "n")
			return "a nested repository"
		},
	}
	hits, partial, confirmed := 0, 0, 0
	sameNames := regexp.MustCompile(`[1-9][0-9]* with the same names`)
	for step := 0; step < 60; step++ {
		var did []string
		if rng.Intn(2) == 0 {
			// A nested repository stays a step or two (wherever a rename
			// took it): while it is there, or the project tracks it (a
			// submodule entry), nothing is cached.
			var nested []string
			filepath.WalkDir(wt, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() && d.Name() == ".git" && p != filepath.Join(wt, ".git") {
					nested = append(nested, filepath.Dir(p))
					return filepath.SkipDir
				}
				return nil
			})
			for _, n := range nested {
				os.RemoveAll(filepath.Join(n, ".git"))
				rel, _ := filepath.Rel(wt, n)
				did = append(did, rel+" is no longer a repository")
			}
			// and the project no longer tracks one (a rename may have
			// taken its directory away from its entry)
			out, _ := exec.Command("git", "-C", wt, "ls-files", "-s").Output()
			for _, line := range strings.Split(string(out), "\n") {
				if _, p, ok := strings.Cut(line, "\t"); ok && strings.HasPrefix(line, "160000 ") {
					exec.Command("git", "-C", wt, "rm", "-q", "--cached", p).Run()
				}
			}
		}
		for n := rng.Intn(3) + 1; n > 0; n-- {
			// the first five (files and directories) come up half the time
			i := rng.Intn(len(steps))
			if rng.Intn(2) == 0 {
				i = rng.Intn(5)
			}
			did = append(did, steps[i]())
		}
		// The edits' times lie before the capture begins (a clock tick can
		// be a few milliseconds).
		time.Sleep(15 * time.Millisecond)
		a, trace := traceCreate(t, withCache, fmt.Sprint("step ", step))
		switch {
		case strings.Contains(trace, "by the listing cache;"):
			hits++
		case strings.Contains(trace, "by the listing cache and git"):
			partial++
		}
		if sameNames.MatchString(trace) {
			confirmed++
		}
		dirCacheOff = true
		b, err := without.Create(ctx, CreateOptions{Reason: fmt.Sprint("step ", step), Source: "test"})
		dirCacheOff = false
		if err != nil {
			t.Fatal(err)
		}
		if a.Checkpoint.Tree != b.Checkpoint.Tree || !sameMeta(a.Checkpoint.meta, b.Checkpoint.meta) {
			diff, _ := withCache.git().Run(ctx, "diff-tree", "-r", "--name-status", b.Checkpoint.Tree, a.Checkpoint.Tree)
			t.Fatalf("step %d (%s): with the listing cache tree %s %q, without %s %q\n%s", step, strings.Join(did, "; "),
				a.Checkpoint.Tree, a.Checkpoint.meta.trailers(), b.Checkpoint.Tree, b.Checkpoint.meta.trailers(), diff)
		}
		if rng.Intn(3) == 0 {
			// nothing changed: the whole listing from the cache
			time.Sleep(15 * time.Millisecond)
			again, trace := traceCreate(t, withCache, fmt.Sprint("again ", step))
			if strings.Contains(trace, "by the listing cache;") {
				hits++
			}
			if again.Checkpoint.Tree != a.Checkpoint.Tree || !sameMeta(again.Checkpoint.meta, a.Checkpoint.meta) {
				t.Fatalf("step %d: nothing changed, but the tree went from %s to %s", step, a.Checkpoint.Tree, again.Checkpoint.Tree)
			}
		}
		time.Sleep(15 * time.Millisecond)
	}
	// (Some sequences keep the project uncacheable for long stretches, a
	// tracked nested repository for one: the use of the cache is asserted by
	// TestRulePropertyDirCache and the checkpoint_dir_cache script.)
	t.Logf("listing cache: %d captures whole, %d in part, %d with directories confirmed by their names", hits, partial, confirmed)
}

// TestListCacheRacyDirectory checks the racy rule with the real cut: a
// directory changed in the second a capture began is listed again by the next
// capture, whatever its times say, and a file added to it then, within the
// same second, is seen.
func TestListCacheRacyDirectory(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	if !trustedHere(s) {
		t.Skip("the listing cache does not trust this file system")
	}
	mustWrite(t, filepath.Join(wt, "d/a.txt"), "a")
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	c := s.readListCache()
	if c == nil || c.dirs["d"] != racyKeys {
		t.Fatalf("a directory written just before the capture was cached as %+v, want racy", c.dirs["d"])
	}
	mustWrite(t, filepath.Join(wt, "d/b.txt"), "b")
	made, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if made.Files != 2 {
		t.Fatalf("the second capture holds %d files, want 2", made.Files)
	}
}

// TestDirCacheTrustedProbe checks the verdict is kept per file system, and
// that REWIND_DIR_CACHE=off turns the cache off.
func TestDirCacheTrustedProbe(t *testing.T) {
	s, _ := newStore(t)
	if err := s.ensure(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	first, fine := s.dirCacheTrusted()
	data, err := os.ReadFile(s.scratchFile("fscheck"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[bool]string{true: " trusted\n", false: " untrusted\n"}[first]
	if fine {
		want = " trusted fine\n"
	}
	if !strings.HasSuffix(string(data), want) {
		t.Fatalf("rewind-fscheck = %q, want it to end in %q", data, want)
	}
	// A verdict for another file system is not this one's.
	os.WriteFile(s.scratchFile("fscheck"), []byte("1 other trusted\n"), 0o600)
	if got, _ := s.dirCacheTrusted(); got != first {
		t.Fatalf("after a verdict for another file system: %v, want %v", got, first)
	}
	t.Setenv("REWIND_DIR_CACHE", "off")
	if trustedHere(s) {
		t.Fatal("REWIND_DIR_CACHE=off left the cache on")
	}
}

// TestListCacheBuiltOnceNote checks that a store without the listing cache
// (an older rewind's) builds it with a note on stderr when that is slow, and
// that the next capture neither needs it again nor says so.
func TestListCacheBuiltOnceNote(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	if !trustedHere(s) {
		t.Skip("the listing cache does not trust this file system")
	}
	var notes []string
	s.Warn = func(m string) { notes = append(notes, m) }
	mustWrite(t, filepath.Join(wt, "a/b.txt"), "b")
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.listCacheFile()); err != nil {
		t.Fatal(err)
	}
	notes = nil
	defer func(d time.Duration) { migrationNote = d }(migrationNote)
	migrationNote = 0
	if _, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "build the store's listing cache") {
		t.Fatalf("notes after building the cache: %q", notes)
	}
	notes = nil
	if _, err := s.Create(ctx, CreateOptions{Reason: "three", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Fatalf("notes once the cache is built: %q", notes)
	}
}

// TestListCacheParentGitignore checks a work tree below its repository's top:
// a .gitignore above it, rewritten at the same size, changes what it holds,
// though no directory of the work tree changed.
func TestListCacheParentGitignore(t *testing.T) {
	subdirInputChange(t,
		func(repo string) { mustWrite(t, filepath.Join(repo, ".gitignore"), "*.log\n") },
		func(repo string) { mustWrite(t, filepath.Join(repo, ".gitignore"), "*.txt\n") })
}

// subdirInputChange checkpoints a work tree below its repository's top
// (set up by before), changes an input of the listing there (change), and
// checks the next checkpoint, though no directory of the work tree changed,
// holds what a fresh store holds.
func subdirInputChange(t *testing.T, before, change func(repo string)) {
	t.Helper()
	ctx := context.Background()
	repo := t.TempDir()
	repo, _ = filepath.EvalSymlinks(repo)
	gitIn(t, repo, "init", "-q")
	before(repo)
	wt := filepath.Join(repo, "sub")
	mustWrite(t, filepath.Join(wt, "a.log"), "a")
	mustWrite(t, filepath.Join(wt, "a.txt"), "a")
	s, err := Open(wt, filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	if !trustedHere(s) {
		t.Skip("the listing cache does not trust this file system")
	}
	defer func(cut func(time.Time, bool) time.Time) { dirRacyCut = cut }(dirRacyCut)
	dirRacyCut = func(start time.Time, _ bool) time.Time { return start }
	time.Sleep(15 * time.Millisecond)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	change(repo)
	time.Sleep(15 * time.Millisecond)
	made, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := freshTree(t, wt); made.Checkpoint.Tree != got {
		t.Fatalf("after the change: tree %s, a fresh store's %s", made.Checkpoint.Tree, got)
	}
}

// TestRulePropertyDirCache runs rounds of the rule's property test (random
// edits, ignore and tracking changes, checkpoints and restores, each checked
// against the project's own git) with the listing cache trusting every
// directory changed before a capture began, so that captures between quick
// steps take their listing from the cache, whole or in part, as they do a
// few seconds apart.
func TestRulePropertyDirCache(t *testing.T) {
	defer func(cut func(time.Time, bool) time.Time) { dirRacyCut = cut }(dirRacyCut)
	dirRacyCut = func(start time.Time, _ bool) time.Time { return start }
	seeds, steps := 2, 120
	if os.Getenv("REWIND_SOAK") != "" {
		seeds, steps = 10, 400
	}
	var trace bytes.Buffer
	gitexec.Trace = &trace
	defer func() { gitexec.Trace = nil }()
	for seed := int64(101); seed < int64(101+seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { ruleRound(t, seed, steps) })
	}
	whole := strings.Count(trace.String(), "by the listing cache;")
	part := strings.Count(trace.String(), "by the listing cache and git")
	t.Logf("listing cache: %d captures whole, %d in part", whole, part)
	if whole == 0 || part == 0 {
		t.Errorf("the listing cache was used whole %d times and in part %d times; want both", whole, part)
	}
}

func trustedHere(s *Store) bool {
	trusted, _ := s.dirCacheTrusted()
	return trusted
}

func TestExcludesFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	for _, c := range []struct {
		config string
		want   string
		ok     bool
	}{
		{"", filepath.Join(home, ".config/git/ignore"), true},
		{"core.excludesfile\n/a/x\x00core.excludesfile\n~/y\x00", filepath.Join(home, "y"), true},
		{"core.excludesFile\nrel/z\x00", "rel/z", true}, // the caller puts it under the top
		{"core.excludesfile\n~other/z\x00", "", false},
		{"core.excludesfile\n%(prefix)/etc/ignore\x00", "", false},
		{"core.excludesfile\n\x00", "", true},                            // set empty: none, not the default
		{"core.excludesfile\n/a/x\x00core.excludesfile\n\x00", "", true}, // the last one
	} {
		got, ok := excludesFile([]byte(c.config))
		if got != c.want || ok != c.ok {
			t.Errorf("excludesFile(%q) = %q, %v; want %q, %v", c.config, got, ok, c.want, c.ok)
		}
	}
}

// TestListCacheRelativeExcludesFile checks a work tree below its
// repository's top whose core.excludesFile is a relative path: git reads it
// from the top, and a change to it is seen though no directory changed.
func TestListCacheRelativeExcludesFile(t *testing.T) {
	subdirInputChange(t,
		func(repo string) {
			gitIn(t, repo, "config", "core.excludesFile", "my-excludes")
			mustWrite(t, filepath.Join(repo, "my-excludes"), "*.log\n")
		},
		func(repo string) { mustWrite(t, filepath.Join(repo, "my-excludes"), "*.txt\n") })
}

// TestDirSetHolds: dirSet answers as underAny does, for paths in, below,
// beside and above the directories (a name that only starts like one
// included).
func TestDirSetHolds(t *testing.T) {
	dirs := []string{"a", "b/c", "b/c d", "x/y/z"}
	set := newDirSet(dirs)
	for _, p := range []string{"a", "a/f", "ab", "ab/f", "b", "b/c", "b/c/d/e", "b/cd", "b/c d/f", "b/c.d", "x/y", "x/y/z", "x/y/z/w", "x/y/zz", ""} {
		if got, want := set.holds(p), underAny(p, dirs); got != want {
			t.Errorf("%q: holds %v, underAny %v", p, got, want)
		}
	}
}

// TestReplaceUnder: the cache's paths under the relisted directories give way
// to what the relisting found, in order and once each, whether the cache's
// paths come sorted (merged) or not (sorted whole).
func TestReplaceUnder(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	names := []string{"a", "a/b", "a/b/c", "a/b c", "a.b", "b", "b/x", "b-x", "c/d/e", "c/d"}
	pick := func(n int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, names[rng.Intn(len(names))]+fmt.Sprintf("/f%d", rng.Intn(4)))
		}
		return out
	}
	for round := 0; round < 500; round++ {
		paths, fresh := pick(rng.Intn(20)), pick(rng.Intn(8))
		if round%2 == 0 {
			sort.Strings(paths)
			paths = dedupeSorted(paths)
		}
		dirs := []string{names[rng.Intn(len(names))], names[rng.Intn(len(names))]}
		var want []string
		for _, p := range paths {
			if !underAny(p, dirs) {
				want = append(want, p)
			}
		}
		want = append(want, fresh...)
		sort.Strings(want)
		want = dedupeSorted(want)
		got := replaceUnder(append([]string(nil), paths...), newDirSet(dirs), append([]string(nil), fresh...))
		if !slices.Equal(got, want) {
			t.Fatalf("paths %q, dirs %q, fresh %q: got %q, want %q", paths, dirs, fresh, got, want)
		}
	}
}

// TestListCachePartialMeta: when some directories are listed again and the
// directories holding files are the same, only those directories are read for
// the checkpoint's directories without files and their bits; the rest comes
// from the cache. The result is what a store without the cache records: a new
// empty directory, one below a directory recorded as holding none, changed
// bits, a removed empty directory.
func TestListCachePartialMeta(t *testing.T) {
	ctx := context.Background()
	withCache, wt := newStore(t)
	if !trustedHere(withCache) {
		t.Skip("the listing cache does not trust this file system")
	}
	without, err := Open(wt, filepath.Join(t.TempDir(), "without"))
	if err != nil {
		t.Fatal(err)
	}
	defer func(cut func(time.Time, bool) time.Time) { dirRacyCut = cut }(dirRacyCut)
	dirRacyCut = func(start time.Time, _ bool) time.Time { return start.Add(-20 * time.Millisecond) }
	for _, p := range []string{"a/f", "a/sub/g", "b/h", "c/i"} {
		mustWrite(t, filepath.Join(wt, p), p)
	}
	for _, d := range []string{"e", "a/gone", "c/keep"} {
		os.MkdirAll(filepath.Join(wt, d), 0o755)
	}
	compare := func(step string) {
		t.Helper()
		time.Sleep(40 * time.Millisecond)
		var trace bytes.Buffer
		gitexec.Trace = &trace
		a, err := withCache.Create(ctx, CreateOptions{Reason: step, Source: "test"})
		gitexec.Trace = nil
		if err != nil {
			t.Fatal(err)
		}
		dirCacheOff = true
		b, err := without.Create(ctx, CreateOptions{Reason: step, Source: "test"})
		dirCacheOff = false
		if err != nil {
			t.Fatal(err)
		}
		if a.Checkpoint.Tree != b.Checkpoint.Tree || !sameMeta(a.Checkpoint.meta, b.Checkpoint.meta) {
			t.Fatalf("%s: with the cache %q, without %q", step, a.Checkpoint.meta.trailers(), b.Checkpoint.meta.trailers())
		}
		if step != "first" && !strings.Contains(trace.String(), "directories read again: ") {
			t.Fatalf("%s: the directories were not read in part; trace:\n%s", step, trace.String())
		}
	}
	compare("first")
	os.MkdirAll(filepath.Join(wt, "a/new"), 0o755)
	os.Chmod(filepath.Join(wt, "a/sub"), 0o700)
	os.MkdirAll(filepath.Join(wt, "e/f"), 0o750)
	os.Remove(filepath.Join(wt, "a/gone"))
	mustWrite(t, filepath.Join(wt, "b/h"), "changed")
	compare("changed")
	os.Chmod(filepath.Join(wt, "e"), 0o700)
	os.Remove(filepath.Join(wt, "e/f"))
	compare("again")
}

// TestListCacheSameNames checks the directories that changed with the same
// names: a file written anew (as a restore writes one), a file made and
// removed, a directory's bits, are taken from the cache without git's
// listing; a new name, a file become a directory and a .gitignore rewritten
// at the same size are listed again. Each checkpoint is the one a store
// without the cache makes.
func TestListCacheSameNames(t *testing.T) {
	p := newDigestPair(t)
	wt, capture := p.wt, p.compare
	mustWrite(t, filepath.Join(wt, ".gitignore"), "*.log\n")
	for i := 0; i < 6; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f.txt", i)), "one\n")
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/g.txt", i)), "one\n")
	}
	capture("first")
	capture("settled")
	for _, c := range []struct {
		what   string
		change func()
		same   bool // listed from the cache, the directory confirmed by its names
	}{
		{"a file written anew", func() {
			os.Remove(filepath.Join(wt, "d0/f.txt"))
			mustWrite(t, filepath.Join(wt, "d0/f.txt"), "two\n")
		}, true},
		{"a file made and removed", func() {
			mustWrite(t, filepath.Join(wt, "d1/tmp"), "")
			os.Remove(filepath.Join(wt, "d1/tmp"))
		}, true},
		{"a directory's bits", func() { os.Chmod(filepath.Join(wt, "d2"), 0o700) }, true},
		{"an ignored file", func() { mustWrite(t, filepath.Join(wt, "d3/x.log"), "") }, false},
		{"a new file", func() { mustWrite(t, filepath.Join(wt, "d3/new.txt"), "") }, false},
		{"a file become a directory", func() {
			os.Remove(filepath.Join(wt, "d4/g.txt"))
			mustWrite(t, filepath.Join(wt, "d4/g.txt/inner.txt"), "")
		}, false},
		{"a .gitignore rewritten at its size", func() { mustWrite(t, filepath.Join(wt, ".gitignore"), "*.txt\n") }, false},
		{"the file ignored now written anew", func() {
			os.Remove(filepath.Join(wt, "d5/f.txt"))
			mustWrite(t, filepath.Join(wt, "d5/f.txt"), "three\n")
		}, true},
	} {
		c.change()
		trace := capture(c.what)
		if got := strings.Contains(trace, "0 listed again, and below; 1 with the same names") && strings.Contains(trace, "by the listing cache;"); got != c.same {
			t.Errorf("%s: listed from the cache with directories confirmed by their names: %v, want %v\n%s", c.what, got, c.same, trace)
		}
		// and the next capture, with nothing changed, takes it all from
		// the cache, the directory's stat data recorded again
		if trace := capture(c.what + ", again"); !strings.Contains(trace, "by the listing cache;") || strings.Contains(trace, "with the same names") {
			t.Errorf("%s, again: not all from the cache\n%s", c.what, trace)
		}
	}
}
