package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guardProject runs rewind as a script's `exec rewind` does, and fails the
// command (exit 98, naming the files) when the project's .git differs
// afterwards in any byte, mode or file: rewind reads the user's repository and
// must never write it. Every script gets this check on every rewind call; only
// calls that run a user's command (--exec, --verify), whose commits are the
// point, and `demo`, which makes its own project, are left out.
func guardProject(args []string, run func([]string) int) int {
	gitDir := projectGitDir(args)
	if gitDir == "" {
		return run(args)
	}
	before, err := treeListing(gitDir, true)
	code := run(args)
	after, err2 := treeListing(gitDir, true)
	if err == nil {
		err = err2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "script harness: cannot list the project's %s: %v\n", gitDir, err)
		return 98
	}
	if changed := changedLines(before, after); len(changed) > 0 {
		fmt.Fprintf(os.Stderr, "script harness: `rewind %s` changed the project's %s: %s\n",
			strings.Join(args[1:], " "), gitDir, strings.Join(changed, ", "))
		return 98
	}
	return code
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
