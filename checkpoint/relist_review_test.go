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
	}{
		{"assume-unchanged, then removed", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "update-index", "--assume-unchanged", "a/x")
			os.Remove(filepath.Join(repo, "a/x"))
		}},
		{"skip-worktree, then removed", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "update-index", "--skip-worktree", "a/x")
			os.Remove(filepath.Join(repo, "a/x"))
		}},
		{"sparse checkout", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "sparse-checkout", "set", "--no-cone", "/b/")
		}},
		{"intent to add", nil, func(t *testing.T, repo string) {
			mustWrite(t, filepath.Join(repo, "a/new"), "n")
			gitIn(t, repo, "add", "-N", "a/new")
		}},
		{"split index, rm --cached", func(t *testing.T, repo string) {
			gitIn(t, repo, "config", "core.splitIndex", "true")
			gitIn(t, repo, "update-index", "--split-index")
		}, func(t *testing.T, repo string) {
			gitIn(t, repo, "rm", "-q", "--cached", "a/x")
		}},
		{"rm --cached in the same second", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "rm", "-q", "--cached", "a/y")
		}},
		{"tracked file deleted", nil, func(t *testing.T, repo string) {
			os.Remove(filepath.Join(repo, "a/x"))
		}},
		{"tracked file turned into a directory", nil, func(t *testing.T, repo string) {
			os.Remove(filepath.Join(repo, "a/x"))
			mustWrite(t, filepath.Join(repo, "a/x/inner"), "i")
		}},
		{"ignored tracked file untracked", func(t *testing.T, repo string) {
			mustWrite(t, filepath.Join(repo, ".gitignore"), "*.log\n")
			mustWrite(t, filepath.Join(repo, "a/t.log"), "l")
			gitIn(t, repo, "add", "-f", "a/t.log", ".gitignore")
		}, func(t *testing.T, repo string) {
			gitIn(t, repo, "rm", "-q", "--cached", "a/t.log")
		}},
		{"index rewritten same size, nothing else", nil, func(t *testing.T, repo string) {
			gitIn(t, repo, "update-index", "--really-refresh")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
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
			s, err := Open(repo, filepath.Join(t.TempDir(), "store"))
			if err != nil {
				t.Fatal(err)
			}
			if !trustedHere(s) {
				t.Skip("the listing cache does not trust this file system")
			}
			defer func(cut func(time.Time, bool) time.Time) { dirRacyCut = cut }(dirRacyCut)
			dirRacyCut = func(start time.Time, _ bool) time.Time { return start.Add(-20 * time.Millisecond) }
			time.Sleep(40 * time.Millisecond)
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
			if made.Checkpoint.Tree != want.Checkpoint.Tree || !sameMeta(made.Checkpoint.meta, want.Checkpoint.meta) {
				got := gitIn(t, s.gitDir(), "ls-tree", "-r", "--name-only", made.Checkpoint.Tree)
				exp := gitIn(t, fresh.gitDir(), "ls-tree", "-r", "--name-only", want.Checkpoint.Tree)
				t.Fatalf("listed %s: with the cache\n%s\n%q\nwithout\n%s\n%q", how, got, made.Checkpoint.meta.trailers(), exp, want.Checkpoint.meta.trailers())
			}
		})
	}
}
