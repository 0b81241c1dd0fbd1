package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rewind-cli/rewind/gitexec"
)

// guardProject runs rewind as a script's `exec rewind` does, and fails the
// command (exit 98, naming the files) when the project's .git differs
// afterwards in any byte, mode or file: rewind reads the user's repository and
// must never write it. Every script gets this check on every rewind call; only
// calls that run a user's command (--exec, --verify), whose commits are the
// point, and `demo`, which makes its own project, are left out. The one write
// allowed is a confirmed replay's move of the branch back to the restored
// checkpoint's commit, and only exactly that (see checkBranchMove).
func guardProject(args []string, run func([]string) int) int {
	gitDir := projectGitDir(args)
	if gitDir == "" {
		return run(args)
	}
	before, err := treeListing(gitDir, true)
	var refs *refState
	if err == nil && mayMoveBranch(args) {
		refs, err = readRefState(gitDir)
	}
	code := run(args)
	after, err2 := treeListing(gitDir, true)
	if err == nil {
		err = err2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "script harness: cannot list the project's %s: %v\n", gitDir, err)
		return 98
	}
	changed := changedLines(before, after)
	if len(changed) > 0 && refs != nil {
		if err := checkBranchMove(gitDir, refs, before, after); err != nil {
			fmt.Fprintf(os.Stderr, "script harness: `rewind %s` changed the project's %s beyond a branch move: %v\n",
				strings.Join(args[1:], " "), gitDir, err)
			return 98
		}
		return code
	}
	if len(changed) > 0 {
		fmt.Fprintf(os.Stderr, "script harness: `rewind %s` changed the project's %s: %s\n",
			strings.Join(args[1:], " "), gitDir, strings.Join(changed, ", "))
		return 98
	}
	return code
}

// mayMoveBranch reports whether a call may move the project's branch: a
// replay that restores for real (not --dry-run), confirmed (scripts have no
// terminal to answer on, so --yes), and not told --keep-head.
func mayMoveBranch(args []string) bool {
	cmd, confirmed := "", false
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--dry-run" || a == "--keep-head" || strings.HasPrefix(a, "--dry-run=") || strings.HasPrefix(a, "--keep-head="):
			return false
		case a == "--yes" || a == "-y" || a == "--yes=true":
			confirmed = true
		case cmd == "" && (a == "-C" || a == "--work-tree" || a == "--store" || a == "--now" || a == "--color"):
			i++
		case cmd == "" && !strings.HasPrefix(a, "-"):
			cmd = a
		}
	}
	return cmd == "replay" && confirmed
}

// refState is what a branch move starts from: the branch HEAD names, its
// commit, and the reflogs the move appends to.
type refState struct {
	head    string // .git/HEAD
	branch  string // "refs/heads/<name>"; "" when HEAD is detached
	commit  string // the branch's commit
	reflogs map[string]string
}

func readRefState(gitDir string) (*refState, error) {
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return nil, err
	}
	st := &refState{head: string(head), reflogs: map[string]string{}}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !ok || !strings.HasPrefix(ref, "refs/heads/") {
		return st, nil
	}
	st.branch = ref
	if st.commit, err = refValue(gitDir, ref); err != nil {
		return nil, err
	}
	for _, log := range []string{"logs/HEAD", "logs/" + ref} {
		data, err := os.ReadFile(filepath.Join(gitDir, log))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		st.reflogs[log] = string(data)
	}
	return st, nil
}

// refValue reads a ref's commit id from its loose file, else packed-refs.
func refValue(gitDir, ref string) (string, error) {
	if data, err := os.ReadFile(filepath.Join(gitDir, ref)); err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	packed, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	if err != nil {
		return "", fmt.Errorf("ref %s: %w", ref, err)
	}
	for _, l := range strings.Split(string(packed), "\n") {
		if id, name, ok := strings.Cut(l, " "); ok && name == ref {
			return id, nil
		}
	}
	return "", fmt.Errorf("ref %s not found", ref)
}

// checkBranchMove accepts the changes a replay's branch move makes, and only
// those: the branch now points at an ancestor of its old commit; ORIG_HEAD is
// the old commit; the reflogs of HEAD and of the branch gained exactly one
// entry each, old -> new (created, with their directories, when reflogs were
// off); the index holds exactly the new commit's tree. Any other path of .git
// that changed, or a move that is not back along the branch, is an error.
func checkBranchMove(gitDir string, st *refState, before, after []string) error {
	if st.branch == "" {
		return fmt.Errorf("HEAD was detached: nothing may move; changed: %s", strings.Join(changedLines(before, after), ", "))
	}
	allowed := map[string]bool{st.branch: true, "ORIG_HEAD": true, "index": true, "logs/HEAD": true, "logs/" + st.branch: true}
	for d := filepath.Dir("logs/" + st.branch); d != "."; d = filepath.Dir(d) {
		allowed[d] = true // the reflog directories, created when reflogs were off
	}
	b, a := byPath(before), byPath(after)
	for p, line := range a {
		if b[p] != line && !allowed[p] {
			return fmt.Errorf("%s changed", p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			return fmt.Errorf("%s was removed", p)
		}
	}
	if b[st.branch] == a[st.branch] {
		return fmt.Errorf("the branch did not move, yet %s", strings.Join(changedLines(before, after), ", "))
	}
	moved, err := refValue(gitDir, st.branch)
	if err != nil {
		return err
	}
	if err := exec.Command("git", "--git-dir="+gitDir, "merge-base", "--is-ancestor", moved, st.commit).Run(); err != nil {
		return fmt.Errorf("%s moved from %s to %s, which is not an ancestor of it", st.branch, st.commit, moved)
	}
	if moved == st.commit {
		return fmt.Errorf("%s was rewritten with the same commit", st.branch)
	}
	if orig, err := os.ReadFile(filepath.Join(gitDir, "ORIG_HEAD")); err != nil || strings.TrimSpace(string(orig)) != st.commit {
		return fmt.Errorf("ORIG_HEAD is not the old HEAD %s", st.commit)
	}
	for log, old := range st.reflogs {
		now, err := os.ReadFile(filepath.Join(gitDir, log))
		added, ok := strings.CutPrefix(string(now), old)
		if err != nil || !ok || strings.Count(added, "\n") != 1 || !strings.HasPrefix(added, st.commit+" "+moved+" ") {
			return fmt.Errorf("%s did not gain exactly one entry %s -> %s: %q", log, st.commit, moved, added)
		}
	}
	cmd := exec.Command("git", "--git-dir="+gitDir, "diff-index", "--cached", "--quiet", moved, "--")
	cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+filepath.Join(gitDir, "index"), "GIT_OPTIONAL_LOCKS=0")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the index is not the tree of %s", moved)
	}
	return nil
}

// byPath keys a treeListing by the quoted path that ends each line.
func byPath(lines []string) map[string]string {
	m := map[string]string{}
	for _, l := range lines {
		i := strings.LastIndex(l, ` "`)
		if p, err := strconv.Unquote(l[i+1:]); i >= 0 && err == nil {
			m[p] = l
		}
	}
	return m
}

// projectGitDir finds the .git of the repository holding the work tree (-C,
// --work-tree, REWIND_WORK_TREE or the current directory), without looking
// above the script's $WORK; "" when there is none or the call is left out.
func projectGitDir(args []string) string {
	wt := os.Getenv("REWIND_WORK_TREE")
	for i, a := range args {
		switch {
		case a == "--exec" || a == "--verify" || strings.HasPrefix(a, "--exec=") || strings.HasPrefix(a, "--verify="):
			return ""
		case a == "demo" && i == 1:
			return ""
		case (a == "-C" || a == "--work-tree") && i+1 < len(args):
			wt = args[i+1]
		case strings.HasPrefix(a, "--work-tree="):
			wt = strings.TrimPrefix(a, "--work-tree=")
		}
	}
	if wt == "" {
		wt = "."
	}
	dir, err := filepath.Abs(wt)
	work := os.Getenv("WORK")
	if err != nil || work == "" {
		return ""
	}
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return filepath.Join(dir, ".git")
		}
		if dir == work || !strings.HasPrefix(dir, work+string(filepath.Separator)) {
			return ""
		}
		dir = filepath.Dir(dir)
	}
}

// changedLines lists the lines of one listing that the other lacks, marked
// - (gone or changed) and + (new or changed).
func changedLines(before, after []string) []string {
	in := func(list []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range list {
			m[l] = true
		}
		return m
	}
	b, a := in(before), in(after)
	var changed []string
	for _, l := range before {
		if !a[l] {
			changed = append(changed, "-"+l)
		}
	}
	for _, l := range after {
		if !b[l] {
			changed = append(changed, "+"+l)
		}
	}
	return changed
}

// TestGuardProject checks the check: a call that writes the project's .git
// fails, one that does not keeps its exit code, and calls that run a user's
// command are not checked.
func TestGuardProject(t *testing.T) {
	work := t.TempDir()
	t.Setenv("WORK", work)
	t.Setenv("REWIND_WORK_TREE", "")
	proj := filepath.Join(work, "proj")
	if err := os.MkdirAll(filepath.Join(proj, ".git", "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(proj, ".git", "config")
	if err := os.WriteFile(config, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writes := func(args []string) int {
		os.WriteFile(config, []byte("[core]\n\tbare = true\n"), 0o644)
		return 0
	}
	reads := func(args []string) int { return 3 }
	if code := guardProject([]string{"rewind", "-C", proj, "checkpoint", "list"}, reads); code != 3 {
		t.Errorf("a call that reads: exit %d, want its own 3", code)
	}
	if code := guardProject([]string{"rewind", "--work-tree=" + filepath.Join(proj, "sub"), "checkpoint", "list"}, writes); code != 98 {
		t.Errorf("a call that writes .git/config: exit %d, want 98", code)
	}
	if code := guardProject([]string{"rewind", "-C", proj, "replay", ".", "--exec", "sh agent.sh"}, writes); code != 0 {
		t.Errorf("an --exec call: exit %d, want 0 (not checked)", code)
	}
	if code := guardProject([]string{"rewind", "-C", work, "checkpoint", "list"}, writes); code != 0 {
		t.Errorf("no repository up to $WORK: exit %d, want 0", code)
	}
}

// TestGuardBranchMove checks the one allowance: a confirmed replay may move
// the branch back exactly as gitexec.ProjectBranch does, and nothing more, and
// no other call may move it at all.
func TestGuardBranchMove(t *testing.T) {
	work := t.TempDir()
	t.Setenv("WORK", work)
	t.Setenv("REWIND_WORK_TREE", "")
	proj := filepath.Join(work, "proj")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = proj
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	var commits []string
	for _, f := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(proj, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", f)
		git("commit", "-q", "-m", f)
		commits = append(commits, git("rev-parse", "HEAD"))
	}
	reset := func() { git("reset", "-q", "--mixed", commits[2]) }
	moveBack := func(args []string) int {
		if _, err := (gitexec.ProjectBranch{Dir: proj}).MoveBack(context.Background(), "main", commits[2], commits[1], "replay"); err != nil {
			t.Errorf("MoveBack: %v", err)
		}
		return 0
	}
	cases := []struct {
		name string
		args []string
		run  func([]string) int
		want int
	}{
		{"a replay's move back", []string{"rewind", "-C", proj, "replay", "s", "--yes"}, moveBack, 0},
		{"the move from a dry run", []string{"rewind", "-C", proj, "replay", "s", "--dry-run"}, moveBack, 98},
		{"the move from an unconfirmed replay", []string{"rewind", "-C", proj, "replay", "s"}, moveBack, 98},
		{"the move with --keep-head", []string{"rewind", "-C", proj, "replay", "--keep-head", "s", "--yes"}, moveBack, 98},
		{"the move from a checkpoint restore", []string{"rewind", "-C", proj, "checkpoint", "restore", "x", "--yes"}, moveBack, 98},
		{"the move and a config write", []string{"rewind", "-C", proj, "replay", "s", "--yes"}, func(a []string) int {
			moveBack(a)
			os.WriteFile(filepath.Join(proj, ".git", "config"), []byte("[core]\n"), 0o644)
			return 0
		}, 98},
		{"the ref moved without the index", []string{"rewind", "-C", proj, "replay", "s", "--yes"}, func([]string) int {
			git("update-ref", "refs/heads/main", commits[1])
			return 0
		}, 98},
		{"a move two back that names the wrong ORIG_HEAD", []string{"rewind", "-C", proj, "replay", "s", "--yes"}, func([]string) int {
			git("reset", "-q", "--mixed", commits[0])
			git("update-ref", "ORIG_HEAD", commits[1])
			return 0
		}, 98},
		{"a new commit", []string{"rewind", "-C", proj, "replay", "s", "--yes"}, func([]string) int {
			git("commit", "-q", "--allow-empty", "-m", "more")
			return 0
		}, 98},
	}
	for _, tc := range cases {
		reset()
		if code := guardProject(tc.args, tc.run); code != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, code, tc.want)
		}
	}
	// Moving forward again (git reset to the old HEAD) is not a move back.
	reset()
	git("reset", "-q", "--mixed", commits[0])
	forward := func([]string) int { git("reset", "-q", "--mixed", commits[2]); return 0 }
	if code := guardProject([]string{"rewind", "-C", proj, "replay", "s", "--yes"}, forward); code != 98 {
		t.Errorf("a move forward: exit %d, want 98", code)
	}
}
