package replay

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo runs git in dir as a user would, for fixtures.
func gitRepo(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func commitFile(t *testing.T, dir, path, msg string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, path), []byte(msg), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRepo(t, dir, "add", path)
	gitRepo(t, dir, "commit", "-q", "-m", msg)
	return gitRepo(t, dir, "rev-parse", "HEAD")
}

func TestPlanHeadMove(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	gitRepo(t, dir, "init", "-q", "-b", "main")
	base := commitFile(t, dir, "sub/a.go", "base")
	inSub := commitFile(t, dir, "sub/b.go", "task 3: in sub")
	outside := commitFile(t, dir, "top.go", "task 4: at the top")

	if m, err := PlanHeadMove(ctx, dir, "main", ""); m != nil || err != nil {
		t.Errorf("no recorded HEAD: %+v, %v; want nothing to move", m, err)
	}
	if m, err := PlanHeadMove(ctx, dir, "main", outside); m != nil || err != nil {
		t.Errorf("HEAD unchanged: %+v, %v; want nothing to move", m, err)
	}
	if m, err := PlanHeadMove(ctx, t.TempDir(), "main", base); m != nil || err != nil {
		t.Errorf("not a repository: %+v, %v; want nothing to move", m, err)
	}

	m, err := PlanHeadMove(ctx, dir, "main", base)
	if err != nil || m == nil || m.Refused != nil {
		t.Fatalf("plain move back: %+v, %v", m, err)
	}
	if m.Branch != "main" || m.From != outside || m.To != base || m.Undo != "git reset --mixed "+outside ||
		len(m.Leaving) != 2 || m.Leaving[0] != (LogCommit{outside, "task 4: at the top"}) || m.Leaving[1] != (LogCommit{inSub, "task 3: in sub"}) {
		t.Errorf("plain move back: %+v", m)
	}

	refused := func(name, wd, branch, head, want string) {
		t.Helper()
		m, err := PlanHeadMove(ctx, wd, branch, head)
		if err != nil || m == nil || m.Refused == nil || !strings.Contains(m.Refused.Message, want) {
			t.Errorf("%s: %+v, %v; want refused with %q", name, m, err, want)
		}
	}
	refused("another branch", dir, "feature", base, "on branch feature, and HEAD is on branch main")
	refused("a missing commit", dir, "main", strings.Repeat("1", 40), "is not in the repository")
	side := gitRepo(t, dir, "commit-tree", "-m", "elsewhere", gitRepo(t, dir, "rev-parse", base+"^{tree}"))
	refused("not an ancestor", dir, "main", side, "is not in the history of branch main")
	// From the subdirectory, the move past top.go would leave it unrestored.
	refused("changes outside the work tree", filepath.Join(dir, "sub"), "main", base, "change files outside the work tree, which the restore does not put back: top.go")
	if m, err := PlanHeadMove(ctx, filepath.Join(dir, "sub"), "main", outside); m != nil || err != nil {
		t.Errorf("from the subdirectory, HEAD unchanged: %+v, %v", m, err)
	}
	gitRepo(t, dir, "reset", "-q", "--hard", inSub)
	if m, err := PlanHeadMove(ctx, filepath.Join(dir, "sub"), "main", base); err != nil || m == nil || m.Refused != nil {
		t.Errorf("from the subdirectory, changes inside it only: %+v, %v; want a move", m, err)
	}
	gitRepo(t, dir, "checkout", "-q", "--detach")
	refused("detached HEAD", dir, "", base, "HEAD is detached")
}

func TestParseLogCommits(t *testing.T) {
	got := ParseLogCommits([]byte("aaaa task 4: wip\x00\nbbbb task-3: add the ast\x00cccc\x00"))
	want := []LogCommit{{"aaaa", "task 4: wip"}, {"bbbb", "task-3: add the ast"}, {"cccc", ""}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func FuzzParseLogCommits(f *testing.F) {
	f.Add([]byte("aaaa task 4: wip\x00bbbb x\x00"))
	f.Add([]byte("\x00\x00 \n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, c := range ParseLogCommits(out) {
			if c.ID == "" || strings.ContainsAny(c.ID, " \x00") || strings.ContainsRune(c.Subject, 0) {
				t.Errorf("bad record %+v", c)
			}
		}
	})
}
