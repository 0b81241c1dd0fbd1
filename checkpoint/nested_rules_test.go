package checkpoint

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNestedOuterRulesMatchGit: for a nested repository, a restore's rules
// (its .gitignore files, then its own info/exclude and core.excludesFile)
// judge random paths, files and directories, as git check-ignore in that
// repository does, over random patterns (negations, directory patterns,
// anchored ones, wildcards) in each source.
func TestNestedOuterRulesMatchGit(t *testing.T) {
	words := []string{"a", "b", "log", "x.log", "keep.log", "d", "d/", "/a", "*.log", "!keep.log", "!*.tmp", "*.tmp", "d/*.log", "**/b", "!d/", "a/", "!a"}
	names := []string{"a", "b", "x.log", "keep.log", "y.tmp", "d/x.log", "d/keep.log", "d/a", "d/b", "c/x.tmp", "e/d/x.log"}
	ctx := context.Background()
	for seed := int64(1); seed <= int64(envInt("REWIND_RULE_SEEDS", 40)); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			s, wt := newStore(t)
			sub := filepath.Join(wt, "sub")
			if out, err := exec.Command("git", "init", "-q", sub).CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			patterns := func() string {
				var b strings.Builder
				for range r.Intn(4) {
					b.WriteString(words[r.Intn(len(words))] + "\n")
				}
				return b.String()
			}
			mustWrite(t, filepath.Join(sub, ".gitignore"), patterns())
			mustWrite(t, filepath.Join(sub, "d", ".gitignore"), patterns())
			mustWrite(t, filepath.Join(sub, ".git", "info", "exclude"), patterns())
			excludes := filepath.Join(t.TempDir(), "excludes")
			mustWrite(t, excludes, patterns())
			if r.Intn(2) == 0 {
				if out, err := exec.Command("git", "-C", sub, "config", "core.excludesFile", excludes).CombinedOutput(); err != nil {
					t.Fatalf("%v %s", err, out)
				}
			}
			for _, n := range names {
				if r.Intn(2) == 0 {
					mustWrite(t, filepath.Join(sub, n), "x")
				} else {
					os.MkdirAll(filepath.Join(sub, n), 0o755)
				}
			}
			rules := &targetRules{gitignore: map[string]ignorePatterns{}, repos: []string{"", "sub"},
				nested: map[string][]outerRules{"sub": s.nestedOuterRules(ctx, "sub")}}
			rules.gitignore["sub"] = readIgnoreFile(filepath.Join(sub, ".gitignore"))
			rules.gitignore["sub/d"] = readIgnoreFile(filepath.Join(sub, "d", ".gitignore"))
			for _, n := range names {
				fi, err := os.Lstat(filepath.Join(sub, n))
				if err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command("git", "check-ignore", "--no-index", "-q", n)
				cmd.Dir = sub
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+t.TempDir())
				gitSays := cmd.Run() == nil
				if got := rules.ignores("sub/"+n, fi.IsDir()); got != gitSays {
					data := func(f string) string { b, _ := os.ReadFile(f); return strings.ReplaceAll(string(b), "\n", " ") }
					t.Errorf("sub/%s (dir %v): rules say ignored %v, git %v\n.gitignore: %s\nd/.gitignore: %s\ninfo/exclude: %s\nexcludes: %s",
						n, fi.IsDir(), got, gitSays, data(filepath.Join(sub, ".gitignore")), data(filepath.Join(sub, "d", ".gitignore")),
						data(filepath.Join(sub, ".git", "info", "exclude")), data(excludes))
				}
			}
		})
	}
}
