package checkpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	var trace bytes.Buffer
	gitexec.Trace = &trace
	a, err := p.withCache.Create(ctx, CreateOptions{Reason: what, Source: "test"})
	gitexec.Trace = nil
	if err != nil {
		t.Fatal(err)
	}
	dirCacheOff = true
	b, err := p.without.Create(ctx, CreateOptions{Reason: what, Source: "test"})
	dirCacheOff = false
	if err != nil {
		t.Fatal(err)
	}
	if a.Checkpoint.Tree != b.Checkpoint.Tree || !sameMeta(a.Checkpoint.meta, b.Checkpoint.meta) {
		diff, _ := p.withCache.git().Run(ctx, "diff-tree", "-r", "--name-status", b.Checkpoint.Tree, a.Checkpoint.Tree)
		t.Fatalf("%s: with the listing cache %s %q, without %s %q\n%s\n%s", what,
			a.Checkpoint.Tree, a.Checkpoint.meta.trailers(), b.Checkpoint.Tree, b.Checkpoint.meta.trailers(), diff, listingSteps(trace.String()))
	}
	time.Sleep(15 * time.Millisecond)
	return trace.String()
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
	gitIn(t, p.wt, "init", "-q")
	mustWrite(t, filepath.Join(p.wt, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(p.wt, "sub/a.txt"), "a\n")
	mustWrite(t, filepath.Join(p.wt, "sub/x.log"), "x\n")
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
	gitIn(t, p.wt, "init", "-q")
	mustWrite(t, filepath.Join(p.wt, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(p.wt, "sub/a.txt"), "a\n")
	mustWrite(t, filepath.Join(p.wt, "sub/x.log"), "x\n")
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
	gitIn(t, p.wt, "init", "-q")
	mustWrite(t, filepath.Join(p.wt, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(p.wt, "sub/a.txt"), "a\n")
	mustWrite(t, filepath.Join(p.wt, "sub/x.log"), "x\n")
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
