package gitexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// userGit runs git in dir as a user would (the test's own process, not a
// runner), for building fixtures and reading the result.
func userGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(scrubbedEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// branchRepo is a repository on branch main with three commits (a.txt, then
// b.txt, then c.txt) and a side branch off the first; it returns the directory
// and the three commit ids.
func branchRepo(t *testing.T) (dir string, commits []string) {
	t.Helper()
	dir = t.TempDir()
	userGit(t, dir, "init", "-q", "-b", "main")
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		mustWrite(t, filepath.Join(dir, f), f+"\n", 0o644)
		userGit(t, dir, "add", f)
		userGit(t, dir, "commit", "-q", "-m", "add "+f)
		commits = append(commits, userGit(t, dir, "rev-parse", "HEAD"))
	}
	userGit(t, dir, "branch", "side", commits[0])
	return dir, commits
}

// changedPaths lists the paths whose listing differs between before and after.
func changedPaths(before, after map[string]string) []string {
	var out []string
	for k, v := range before {
		if after[k] != v {
			out = append(out, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func TestMoveBackWritesOnlyTheBranchMove(t *testing.T) {
	dir, c := branchRepo(t)
	// Reflogs off: the move must still keep the old HEAD reachable.
	userGit(t, dir, "config", "core.logAllRefUpdates", "false")
	os.RemoveAll(filepath.Join(dir, ".git", "logs"))
	// The restore has already put the target's files back: c.txt is gone, and
	// a file the move must not touch is there untracked.
	os.Remove(filepath.Join(dir, "c.txt"))
	mustWrite(t, filepath.Join(dir, "notes.txt"), "mine\n", 0o644)
	t.Setenv("GIT_DIR", filepath.Join(t.TempDir(), "decoy")) // scrubbed, never followed
	m, err := ProjectBranch{Dir: dir}.MoveBack(context.Background(), "main", c[2], c[1], "rewind replay: back to checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("GIT_DIR")
	if m.Branch != "main" || m.From != c[2] || m.To != c[1] {
		t.Errorf("move = %+v", m)
	}
	if got, want := m.Undo(), "git reset --mixed "+c[2]; got != want {
		t.Errorf("Undo() = %q, want %q", got, want)
	}
	if got := userGit(t, dir, "rev-parse", "main"); got != c[1] {
		t.Errorf("main = %s, want %s", got, c[1])
	}
	if got := userGit(t, dir, "rev-parse", "ORIG_HEAD"); got != c[2] {
		t.Errorf("ORIG_HEAD = %s, want the old HEAD %s", got, c[2])
	}
	for _, ref := range []string{"main@{1}", "HEAD@{1}"} {
		if got := userGit(t, dir, "rev-parse", ref); got != c[2] {
			t.Errorf("%s = %s, want the old HEAD %s", ref, got, c[2])
		}
	}
	if got := userGit(t, dir, "reflog", "-1", "--format=%gs", "main"); got != "rewind replay: back to checkpoint" {
		t.Errorf("reflog message = %q", got)
	}
	// The index is the target's tree; git status sees only the untracked file.
	if got := userGit(t, dir, "ls-files"); got != "a.txt\nb.txt" {
		t.Errorf("index = %q, want a.txt and b.txt", got)
	}
	if got := userGit(t, dir, "status", "--porcelain"); got != "?? notes.txt" {
		t.Errorf("status = %q, want only the untracked notes.txt", got)
	}
}

func TestMoveBackTouchesNothingElse(t *testing.T) {
	dir, c := branchRepo(t)
	os.Remove(filepath.Join(dir, "c.txt"))
	mustWrite(t, filepath.Join(dir, "notes.txt"), "mine\n", 0o644)
	gitBefore := listing(t, filepath.Join(dir, ".git"))
	treeBefore := listing(t, dir)
	if _, err := (ProjectBranch{Dir: dir}).MoveBack(context.Background(), "main", c[2], c[1], "m"); err != nil {
		t.Fatal(err)
	}
	gitAfter := listing(t, filepath.Join(dir, ".git"))
	got := changedPaths(gitBefore, gitAfter)
	want := []string{"ORIG_HEAD", "index", "logs/HEAD", "logs/refs/heads/main", "refs/heads/main"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf(".git changed at %v, want only %v", got, want)
	}
	treeAfter := listing(t, dir)
	for p, v := range treeBefore {
		if !strings.HasPrefix(p, ".git") && treeAfter[p] != v {
			t.Errorf("work tree path %s changed", p)
		}
	}
}

func TestMoveBackRefuses(t *testing.T) {
	ctx := context.Background()
	dir, c := branchRepo(t)
	side := userGit(t, dir, "rev-parse", "side")
	userGit(t, dir, "checkout", "-q", "side")
	mustWrite(t, filepath.Join(dir, "s.txt"), "s\n", 0o644)
	userGit(t, dir, "add", "s.txt")
	userGit(t, dir, "commit", "-q", "-m", "side work")
	sideTip := userGit(t, dir, "rev-parse", "HEAD")
	userGit(t, dir, "checkout", "-q", "main")
	before := listing(t, filepath.Join(dir, ".git"))
	b := ProjectBranch{Dir: dir}
	cases := []struct {
		name             string
		branch, from, to string
		want             error
	}{
		{"not an ancestor", "main", c[2], sideTip, ErrNotAncestor},
		{"HEAD moved since the plan", "main", c[1], c[0], ErrHeadMoved},
		{"another branch", "side", c[2], side, ErrNotOnBranch},
	}
	for _, tc := range cases {
		if _, err := b.MoveBack(ctx, tc.branch, tc.from, tc.to, "m"); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, bad := range [][3]string{{"main", "HEAD", c[0]}, {"main", c[2], "HEAD~1"}, {"main", c[2], c[2]}, {"--force", c[2], c[0]}, {"", c[2], c[0]}} {
		if _, err := b.MoveBack(ctx, bad[0], bad[1], bad[2], "m"); err == nil {
			t.Errorf("MoveBack(%q, %q, %q) succeeded", bad[0], bad[1], bad[2])
		}
	}
	if after := listing(t, filepath.Join(dir, ".git")); !equalMaps(before, after) {
		t.Errorf("a refused move changed the project's .git: %v", changedPaths(before, after))
	}

	detached, c := branchRepo(t)
	userGit(t, detached, "checkout", "-q", "--detach", "HEAD")
	if _, err := (ProjectBranch{Dir: detached}).MoveBack(ctx, "main", c[2], c[1], "m"); !errors.Is(err, ErrNotOnBranch) {
		t.Errorf("detached HEAD: err = %v, want ErrNotOnBranch", err)
	}
}

// TestMoveBackRunsNoFsmonitor: read-tree runs a configured core.fsmonitor
// command when it writes the index; the move turns it off, as every runner does.
func TestMoveBackRunsNoFsmonitor(t *testing.T) {
	dir, c := branchRepo(t)
	marker := filepath.Join(t.TempDir(), "fsmonitor-ran")
	hook := filepath.Join(t.TempDir(), "fsmonitor.sh")
	mustWrite(t, hook, "#!/bin/sh\ntouch '"+marker+"'\n", 0o755)
	userGit(t, dir, "config", "core.fsmonitor", hook)
	if _, err := (ProjectBranch{Dir: dir}).MoveBack(context.Background(), "main", c[2], c[1], "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the repository's core.fsmonitor command ran")
	}
}
