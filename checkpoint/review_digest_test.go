package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

// digestPair is a store with the listing cache and one forced to the full
// walk, on one work tree: compare captures with each and checks they hold
// the same tree and bits, and returns the cached store's trace.
type digestPair struct {
	t                  *testing.T
	wt                 string
	withCache, without *Store
}

func newDigestPair(t *testing.T) *digestPair {
	t.Helper()
	withCache, wt := newStore(t)
	if !trustedHere(withCache) {
		t.Skip("the listing cache does not trust this file system")
	}
	without, err := Open(wt, filepath.Join(t.TempDir(), "without"))
	if err != nil {
		t.Fatal(err)
	}
	without.Now = withCache.Now
	cut := dirRacyCut
	t.Cleanup(func() { dirRacyCut = cut })
	dirRacyCut = func(start time.Time, _ bool) time.Time { return start }
	return &digestPair{t: t, wt: wt, withCache: withCache, without: without}
}

func (p *digestPair) compare(what string) string {
	t := p.t
	t.Helper()
	ctx := context.Background()
	time.Sleep(15 * time.Millisecond) // the change lies before the capture's start
	a, trace := traceCreate(t, p.withCache, what)
	dirCacheOff = true
	b, err := p.without.Create(ctx, CreateOptions{Reason: what, Source: "test"})
	dirCacheOff = false
	if err != nil {
		t.Fatal(err)
	}
	if a.Checkpoint.Tree != b.Checkpoint.Tree || !sameMeta(a.Checkpoint.meta, b.Checkpoint.meta) {
		diff, _ := p.withCache.git().Run(ctx, "diff-tree", "-r", "--name-status", b.Checkpoint.Tree, a.Checkpoint.Tree)
		t.Fatalf("%s: with the listing cache %s %q, without %s %q\n%s\n%s", what,
			a.Checkpoint.Tree, a.Checkpoint.meta.trailers(), b.Checkpoint.Tree, b.Checkpoint.meta.trailers(), diff, listingSteps(trace))
	}
	time.Sleep(15 * time.Millisecond)
	return trace
}

// projectWithSub makes the work tree a repository ignoring *.log, with a
// directory sub holding a.txt and x.log (a file only a nested repository
// there would hold).
func (p *digestPair) projectWithSub() {
	t := p.t
	t.Helper()
	gitIn(t, p.wt, "init", "-q")
	mustWrite(t, filepath.Join(p.wt, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(p.wt, "sub/a.txt"), "a\n")
	mustWrite(t, filepath.Join(p.wt, "sub/x.log"), "x\n")
}

// TestListCacheDigestGitBecomesRepository: whether git takes a directory
// holding a .git entry for a nested repository depends on what that entry
// holds (a valid repository, a gitfile naming one), not on its name. A
// directory whose .git was no repository (a leftover, a broken clone) and is
// made anew as one keeps its names; it must still be listed again, and then
// its files are the nested repository's (here a file the project ignores,
// which the nested repository tracks).
func TestListCacheDigestGitBecomesRepository(t *testing.T) {
	p := newDigestPair(t)
	p.projectWithSub()
	mustWrite(t, filepath.Join(p.wt, "sub/.git/leftover"), "not a repository\n")
	p.compare("first")
	p.compare("settled")
	if err := os.RemoveAll(filepath.Join(p.wt, "sub/.git")); err != nil {
		t.Fatal(err)
	}
	gitIn(t, filepath.Join(p.wt, "sub"), "init", "-q")
	gitIn(t, filepath.Join(p.wt, "sub"), "add", "-f", "a.txt", "x.log")
	p.compare("sub/.git made a repository")
}

// TestListCacheDigestGitfileRewritten: the same with a gitfile, rewritten
// (as an editor saves one) to name a repository instead of nothing.
func TestListCacheDigestGitfileRewritten(t *testing.T) {
	p := newDigestPair(t)
	gitIn(t, p.wt, "init", "-q")
	mustWrite(t, filepath.Join(p.wt, ".gitignore"), "*.log\n/elsewhere/\n")
	mustWrite(t, filepath.Join(p.wt, "sub/a.txt"), "a\n")
	mustWrite(t, filepath.Join(p.wt, "sub/x.log"), "x\n")
	gitdir := filepath.Join(p.wt, "elsewhere")
	gitIn(t, p.wt, "init", "-q", "--separate-git-dir", gitdir, filepath.Join(p.wt, "sub"))
	gitIn(t, filepath.Join(p.wt, "sub"), "add", "-f", "a.txt", "x.log")
	mustWrite(t, filepath.Join(p.wt, "sub/.git"), "gitdir: "+filepath.Join(p.wt, "nowhere")+"\n")
	p.compare("first")
	p.compare("settled")
	os.Remove(filepath.Join(p.wt, "sub/.git"))
	mustWrite(t, filepath.Join(p.wt, "sub/.git"), "gitdir: "+gitdir+"\n")
	p.compare("sub/.git names a repository")
}

// listingSteps are the trace's lines that tell how the listing was made.
func listingSteps(trace string) string {
	var out []string
	for _, line := range strings.Split(trace, "\n") {
		if strings.Contains(line, "listing (by") || strings.Contains(line, "directories read again") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestListCacheGitFilledIn: a directory's .git that is no repository (here
// an empty directory) filled in as one, by git init, leaves the directory's
// own stat data as it was: it is a nested repository all the same.
func TestListCacheGitFilledIn(t *testing.T) {
	p := newDigestPair(t)
	p.projectWithSub()
	if err := os.Mkdir(filepath.Join(p.wt, "sub/.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.compare("first")
	p.compare("settled")
	gitIn(t, filepath.Join(p.wt, "sub"), "init", "-q")
	gitIn(t, filepath.Join(p.wt, "sub"), "add", "-f", "a.txt", "x.log")
	p.compare("sub/.git filled in")
}

// TestListCacheGitdirAppears: a gitfile naming a repository (outside the
// work tree) that is not there yet; when it appears, nothing in the work
// tree changed.
func TestListCacheGitdirAppears(t *testing.T) {
	p := newDigestPair(t)
	p.projectWithSub()
	away := t.TempDir()
	gitIn(t, p.wt, "init", "-q", "--separate-git-dir", filepath.Join(away, "gitdir"), filepath.Join(p.wt, "sub"))
	gitIn(t, filepath.Join(p.wt, "sub"), "add", "-f", "a.txt", "x.log")
	if err := os.Rename(filepath.Join(away, "gitdir"), filepath.Join(away, "not-yet")); err != nil {
		t.Fatal(err)
	}
	p.compare("first")
	p.compare("settled")
	if err := os.Rename(filepath.Join(away, "not-yet"), filepath.Join(away, "gitdir")); err != nil {
		t.Fatal(err)
	}
	p.compare("the gitdir appeared")
}

// TestListCacheDigestRestores: random edits, and restores (whole, or of one
// path) of earlier checkpoints, each followed by a capture with the listing
// cache and one without: a restore writes files anew, the directories keep
// their names, and the cache confirms them by their names.
func TestListCacheDigestRestores(t *testing.T) {
	ctx := context.Background()
	p := newDigestPair(t)
	wt := p.wt
	gitIn(t, wt, "init", "-q")
	mustWrite(t, filepath.Join(wt, ".gitignore"), "*.log\n")
	for i := 0; i < 12; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("s/d%d/f%d.txt", i%3, i)), fmt.Sprint("one ", i))
	}
	gitIn(t, wt, "add", "-A")
	rng := seededRand(t)
	dir := func() string { return []string{"", "s", "s/d0", "s/d1", "s/d2", "s/d1/e"}[rng.Intn(6)] }
	name := func() string { return []string{"a.txt", "b.log", "f0.txt", "f1.txt", "g"}[rng.Intn(5)] }
	// (a path whose parent is a file, or that is a directory, is left be)
	write := func(q, content string) {
		if os.MkdirAll(filepath.Dir(q), 0o755) == nil {
			os.WriteFile(q, []byte(content), 0o644)
		}
	}
	edits := []func() string{
		func() string {
			q := filepath.Join(dir(), name())
			write(filepath.Join(wt, q), fmt.Sprint(rng.Int()))
			return "write " + q
		},
		func() string {
			q := filepath.Join(dir(), name())
			os.RemoveAll(filepath.Join(wt, q))
			return "remove " + q
		},
		func() string {
			q := filepath.Join(dir(), name())
			os.RemoveAll(filepath.Join(wt, q))
			write(filepath.Join(wt, q, "in.txt"), "in")
			return "directory " + q
		},
		func() string {
			d := dir()
			os.MkdirAll(filepath.Join(wt, d, "empty"), 0o755)
			return "mkdir " + d + "/empty"
		},
		func() string {
			d := filepath.Join(wt, dir())
			os.Chmod(d, []os.FileMode{0o700, 0o755}[rng.Intn(2)])
			return "chmod " + d
		},
		func() string {
			// a .git that is no repository, made one, or gone
			d := filepath.Join(wt, []string{"s/d0", "s/d2"}[rng.Intn(2)])
			switch rng.Intn(3) {
			case 0:
				os.RemoveAll(filepath.Join(d, ".git"))
				os.MkdirAll(filepath.Join(d, ".git"), 0o755)
				return "an empty .git in " + d
			case 1:
				if os.MkdirAll(d, 0o755) == nil {
					gitIn(t, d, "init", "-q")
				}
				return "git init " + d
			}
			os.RemoveAll(filepath.Join(d, ".git"))
			return "no .git in " + d
		},
		func() string {
			d := []string{"s", "s/d1"}[rng.Intn(2)]
			write(filepath.Join(wt, d, ".gitignore"), []string{"*.txt\n", "!b.log\n", "g\n"}[rng.Intn(3)])
			return d + "/.gitignore"
		},
	}
	var ids []string
	confirmed := 0
	sameNames := regexp.MustCompile(`[1-9][0-9]* with the same names`)
	for step := 0; step < 30; step++ {
		var did []string
		if len(ids) > 0 && rng.Intn(2) == 0 {
			id := ids[rng.Intn(len(ids))]
			opt := RestoreOptions{}
			if rng.Intn(3) == 0 {
				opt.Files = []string{filepath.Join(wt, []string{"s", "s/d1", "s/d0/f0.txt", ".gitignore"}[rng.Intn(4)])}
			}
			time.Sleep(15 * time.Millisecond)
			_, err := p.withCache.Restore(ctx, id, opt)
			switch {
			case err != nil && len(opt.Files) > 0 && strings.Contains(err.Error(), "neither checkpoint"):
				// a path the edits removed, which that checkpoint lacks too:
				// refused, nothing changed
				did = append(did, fmt.Sprintf("restore %s %v refused", id, opt.Files))
			case err != nil:
				t.Fatal(err)
			default:
				did = append(did, fmt.Sprintf("restore %s %v", id, opt.Files))
			}
		} else {
			for n := rng.Intn(3) + 1; n > 0; n-- {
				did = append(did, edits[rng.Intn(len(edits))]())
			}
		}
		tr := p.compare(fmt.Sprintf("step %d (%s)", step, strings.Join(did, "; ")))
		if sameNames.MatchString(tr) {
			confirmed++
		}
		list, err := p.withCache.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, c := range list {
			ids = append(ids, c.ID)
		}
	}
	t.Logf("%d captures with directories confirmed by their names", confirmed)
}

// TestListCacheDigestRacedConfirmed: a directory confirmed by its names
// (a file written anew) changes after its names were read, before the
// capture takes its stat data again: this capture may miss the change, the
// next one must not. The racy cut is the real one.
func TestListCacheDigestRacedConfirmed(t *testing.T) {
	s, wt := newStore(t)
	if !trustedHere(s) {
		t.Skip("the listing cache does not trust this file system")
	}
	for _, q := range []string{"d/f.txt", "d/g.txt", "e/h.txt"} {
		mustWrite(t, filepath.Join(wt, q), q)
	}
	settle := func() { time.Sleep(250 * time.Millisecond) } // past the racy cut
	settle()
	tracedCreate(t, s, wt, "first")
	settle()
	tracedCreate(t, s, wt, "settled")
	for i, change := range []func(){
		func() { mustWrite(t, filepath.Join(wt, "d/y.txt"), "y") },
		func() { os.Remove(filepath.Join(wt, "d/g.txt")) },
		func() { os.Mkdir(filepath.Join(wt, "d/empty"), 0o755) },
		func() { mustWrite(t, filepath.Join(wt, "d/.gitignore"), "*.txt\n") },
	} {
		settle()
		os.Remove(filepath.Join(wt, "d/f.txt"))
		mustWrite(t, filepath.Join(wt, "d/f.txt"), fmt.Sprint("anew ", i))
		settle()
		// The change comes as the listing is done: after changedDirs
		// read d's names, before buildMeta looks at d again.
		raced := &traceHook{at: "listing (by", then: change}
		gitexec.Trace = raced
		_, err := s.Create(context.Background(), CreateOptions{Reason: "raced", Source: "test"})
		gitexec.Trace = nil
		if err != nil {
			t.Fatal(err)
		}
		ran := raced.ran
		if !ran || !strings.Contains(raced.String(), "1 with the same names") {
			t.Fatalf("change %d: the raced capture did not confirm d (changed meanwhile: %v)\n%s", i, ran, listingSteps(raced.String()))
		}
		settle()
		made, trace := tracedCreate(t, s, wt, "after the race")
		if want := freshMeta(t, wt); !sameMeta(made.Checkpoint.meta, want) {
			t.Fatalf("change %d: after the race %q, a fresh store's %q\n%s", i, made.Checkpoint.meta.trailers(), want.trailers(), listingSteps(trace))
		}
	}
}

// traceHook is a trace that runs then, once, as the line holding at is
// written (by the capture's own goroutine: the capture waits for it).
type traceHook struct {
	strings.Builder
	at   string
	then func()
	ran  bool
}

func (h *traceHook) Write(p []byte) (int, error) {
	if !h.ran && strings.Contains(string(p), h.at) {
		h.ran = true
		h.then()
	}
	return h.Builder.Write(p)
}

// freshMeta is the meta a new store records of the work tree as it is now.
func freshMeta(t *testing.T, wt string) *meta {
	t.Helper()
	return freshCheckpoint(t, wt).meta
}
