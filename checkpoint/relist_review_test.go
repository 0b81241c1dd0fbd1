package checkpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

// TestRelistIndexStates: after a change in the project's index or in the
// tracked files themselves that leaves some directories unchanged, the next
// checkpoint taken with the listing cache on holds exactly what a fresh
// store's checkpoint holds (tree and directory metadata), whether the cache
// answers whole, in part, or not at all.
func TestRelistIndexStates(t *testing.T) {
	cases := []struct {
		name   string
		before func(t *testing.T, repo string)
		change func(t *testing.T, repo string)
		prep   func(t *testing.T, repo string) // after the commit, before the first checkpoint
	}{
		{"assume-unchanged, then removed", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "update-index", "--assume-unchanged", "a/x")
			os.Remove(filepath.Join(repo, "a/x"))
		}, nil},
		{"skip-worktree, then removed", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "update-index", "--skip-worktree", "a/x")
			os.Remove(filepath.Join(repo, "a/x"))
		}, nil},
		{"sparse checkout", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "sparse-checkout", "set", "--no-cone", "/b/")
		}, nil},
		{"intent to add", nil, func(t *testing.T, repo string) {
			mustWrite(t, filepath.Join(repo, "a/new"), "n")
			gitIn(t, repo, "add", "-N", "a/new")
		}, nil},
		{"split index, rm --cached", func(t *testing.T, repo string) {
			gitIn(t, repo, "config", "core.splitIndex", "true")
			gitIn(t, repo, "update-index", "--split-index")
		}, func(t *testing.T, repo string) {
			gitIn(t, repo, "rm", "-q", "--cached", "a/x")
		}, nil},
		{"rm --cached in the same second", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "rm", "-q", "--cached", "a/y")
		}, nil},
		{"tracked file deleted", nil, func(t *testing.T, repo string) {
			os.Remove(filepath.Join(repo, "a/x"))
		}, nil},
		{"tracked file turned into a directory", nil, func(t *testing.T, repo string) {
			os.Remove(filepath.Join(repo, "a/x"))
			mustWrite(t, filepath.Join(repo, "a/x/inner"), "i")
		}, nil},
		{"ignored tracked file untracked", func(t *testing.T, repo string) {
			mustWrite(t, filepath.Join(repo, ".gitignore"), "*.log\n")
			mustWrite(t, filepath.Join(repo, "a/t.log"), "l")
			gitIn(t, repo, "add", "-f", "a/t.log", ".gitignore")
		}, func(t *testing.T, repo string) {
			gitIn(t, repo, "rm", "-q", "--cached", "a/t.log")
		}, nil},
		{"every kept file of a directory deleted", nil, func(t *testing.T, repo string) {
			os.Remove(filepath.Join(repo, "a/x"))
			os.Remove(filepath.Join(repo, "a/y"))
		}, nil},
		{"empty directory below, bits of another", nil, func(t *testing.T, repo string) {
			os.MkdirAll(filepath.Join(repo, "c/empty/deeper"), 0o755)
			os.Chmod(filepath.Join(repo, "a"), 0o700)
		}, nil},
		{"skip-worktree file missing, a directory in its place", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "update-index", "--skip-worktree", "c/w")
			time.Sleep(40 * time.Millisecond)
			os.Remove(filepath.Join(repo, "c/w"))
			os.MkdirAll(filepath.Join(repo, "c/w"), 0o755)
		}, nil},
		{"untracked file in a directory of tracked ones only, ignored", func(t *testing.T, repo string) {
			mustWrite(t, filepath.Join(repo, "a/.gitignore"), "*.tmp\n")
		}, func(t *testing.T, repo string) {
			mustWrite(t, filepath.Join(repo, "a/t.tmp"), "t")
			mustWrite(t, filepath.Join(repo, "a/t.keep"), "t")
		}, nil},
		{"skip-worktree set before, file then replaced by a directory", nil, func(t *testing.T, repo string) {
			os.Remove(filepath.Join(repo, "c/w"))
			mustWrite(t, filepath.Join(repo, "c/w/in"), "i")
		}, func(t *testing.T, repo string) { gitIn(t, repo, "update-index", "--skip-worktree", "c/w") }},
		{"assume-unchanged set before, file then removed", nil, func(t *testing.T, repo string) {
			os.Remove(filepath.Join(repo, "a/x"))
		}, func(t *testing.T, repo string) { gitIn(t, repo, "update-index", "--assume-unchanged", "a/x") }},
		{"sparse checkout before, a file outside it written", nil, func(t *testing.T, repo string) {
			mustWrite(t, filepath.Join(repo, "a/x"), "back")
			mustWrite(t, filepath.Join(repo, "a/other"), "o")
		}, func(t *testing.T, repo string) { gitIn(t, repo, "sparse-checkout", "set", "--no-cone", "/b/", "/c/") }},
		{"intent to add before, file then removed", nil, func(t *testing.T, repo string) {
			os.Remove(filepath.Join(repo, "a/new"))
		}, func(t *testing.T, repo string) {
			mustWrite(t, filepath.Join(repo, "a/new"), "n")
			gitIn(t, repo, "add", "-N", "a/new")
		}},
		{"index rewritten same size, nothing else", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "update-index", "--really-refresh")
		}, nil},
	}
	inPart, skipped := 0, false
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() { skipped = skipped || t.Skipped() }()
			ctx := context.Background()
			repo := t.TempDir()
			repo, _ = filepath.EvalSymlinks(repo)
			gitIn(t, repo, "init", "-q")
			for _, p := range []string{"a/x", "a/y", "b/z", "c/w"} {
				mustWrite(t, filepath.Join(repo, p), p)
			}
			if c.before != nil {
				c.before(t, repo)
			}
			gitIn(t, repo, "add", "-A")
			gitIn(t, repo, "commit", "-q", "-m", "one")
			if c.prep != nil {
				c.prep(t, repo)
			}
			s := cachedStore(t, repo)
			if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
				t.Fatal(err)
			}
			c.change(t, repo)
			// and an untracked file elsewhere, so that a part is listed again
			mustWrite(t, filepath.Join(repo, "b/untracked"), "u")
			time.Sleep(40 * time.Millisecond)
			var trace bytes.Buffer
			gitexec.Trace = &trace
			made, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"})
			gitexec.Trace = nil
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := Open(repo, filepath.Join(t.TempDir(), "fresh"))
			if err != nil {
				t.Fatal(err)
			}
			dirCacheOff = true
			want, err := fresh.Create(ctx, CreateOptions{Reason: "fresh", Source: "test"})
			dirCacheOff = false
			if err != nil {
				t.Fatal(err)
			}
			how := "full"
			if strings.Contains(trace.String(), "by the listing cache and git") {
				how = "in part"
			} else if strings.Contains(trace.String(), "by the listing cache;") {
				how = "whole"
			}
			t.Logf("listed %s", how)
			if how == "in part" {
				inPart++
			}
			if made.Checkpoint.Tree != want.Checkpoint.Tree || !sameMeta(made.Checkpoint.meta, want.Checkpoint.meta) {
				got := gitIn(t, s.gitDir(), "ls-tree", "-r", "--name-only", made.Checkpoint.Tree)
				exp := gitIn(t, fresh.gitDir(), "ls-tree", "-r", "--name-only", want.Checkpoint.Tree)
				t.Fatalf("listed %s: with the cache\n%s\n%q\nwithout\n%s\n%q", how, got, made.Checkpoint.meta.trailers(), exp, want.Checkpoint.meta.trailers())
			}
		})
	}
	// The comparison above holds for a full listing too: some case must
	// have taken the partial path for it to test that path.
	if inPart == 0 && !skipped {
		t.Fatal("no case was listed in part by the listing cache")
	}
}

// cachedStore opens a store of repo whose listing cache trusts the
// directories' times from 20 ms before a capture began (so that quick steps
// use it), or skips the test on a file system where the cache is not used.
func cachedStore(t *testing.T, repo string) *Store {
	t.Helper()
	s, err := Open(repo, filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	if !trustedHere(s) {
		t.Skip("the listing cache does not trust this file system")
	}
	cut := dirRacyCut
	t.Cleanup(func() { dirRacyCut = cut })
	dirRacyCut = func(start time.Time, _ bool) time.Time { return start.Add(-20 * time.Millisecond) }
	time.Sleep(40 * time.Millisecond)
	return s
}

// TestRelistRestoreRoundTrip: in a project with a skip-worktree file missing
// from disk, an assume-unchanged one and an intent-to-add one, a restore
// whose safety checkpoint is listed in part by the cache, then a restore of
// that safety checkpoint, gives back exactly the work tree before.
func TestRelistRestoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	repo, _ = filepath.EvalSymlinks(repo)
	gitIn(t, repo, "init", "-q")
	for _, p := range []string{"a/x", "a/y", "b/z", "c/w", "d/v"} {
		mustWrite(t, filepath.Join(repo, p), p)
	}
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-q", "-m", "one")
	gitIn(t, repo, "update-index", "--skip-worktree", "c/w")
	os.Remove(filepath.Join(repo, "c/w"))
	gitIn(t, repo, "update-index", "--assume-unchanged", "a/y")
	mustWrite(t, filepath.Join(repo, "b/new"), "n")
	gitIn(t, repo, "add", "-N", "b/new")
	s := cachedStore(t, repo)
	one, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// changes in some directories only
	mustWrite(t, filepath.Join(repo, "a/y"), "assumed, changed")
	os.Remove(filepath.Join(repo, "b/new"))
	mustWrite(t, filepath.Join(repo, "b/untracked"), "u")
	os.MkdirAll(filepath.Join(repo, "b/empty"), 0o755)
	mustWrite(t, filepath.Join(repo, "c/w/in"), "a directory where the skipped file was")
	time.Sleep(40 * time.Millisecond)
	before := listing(t, repo, true)
	var trace bytes.Buffer
	gitexec.Trace = &trace
	res, err := s.Restore(ctx, one.Checkpoint.ID, RestoreOptions{})
	gitexec.Trace = nil
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trace.String(), "by the listing cache and git") {
		t.Logf("the safety checkpoint was not listed in part; trace:\n%s", trace.String())
	}
	time.Sleep(40 * time.Millisecond)
	if _, err := s.Restore(ctx, res.Safety.ID, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	after := listing(t, repo, true)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("restoring the safety checkpoint gave\n%v\nwant\n%v", after, before)
	}
}

// TestRelistFallbackKeepsBranch: a partial listing that meets what the cache
// cannot hold (a repository made in a changed directory) lists it all, and
// the checkpoint still records the project's branch and HEAD (the full
// listing started from a held work tree that had lost them).
func TestRelistFallbackKeepsBranch(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	repo, _ = filepath.EvalSymlinks(repo)
	gitIn(t, repo, "init", "-q", "-b", "main")
	mustWrite(t, filepath.Join(repo, "d/a"), "a")
	mustWrite(t, filepath.Join(repo, "e/b"), "b")
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
	s := cachedStore(t, repo)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Millisecond)
	gitIn(t, filepath.Join(repo, "d"), "init", "-q", "nested")
	var trace strings.Builder
	gitexec.Trace = &trace
	made, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"})
	gitexec.Trace = nil
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trace.String(), "listing (by git;") {
		t.Fatalf("the capture did not fall back to a full listing:\n%s", trace.String())
	}
	if made.Checkpoint.Branch != "main" || made.Checkpoint.Head == "" {
		t.Fatalf("branch %q, head %q after the fall-back listing", made.Checkpoint.Branch, made.Checkpoint.Head)
	}
}
