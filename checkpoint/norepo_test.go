package checkpoint

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-cli/rewind/gitexec"
)

// TestNoRepositoryAgreesWithGit checks the shortcut that spares the project's
// git processes: wherever noRepository says git finds no repository, git
// (run as rewind runs it on the project) says "not a git repository"; and in
// plain directories outside every repository the shortcut is taken.
func TestNoRepositoryAgreesWithGit(t *testing.T) {
	root := t.TempDir()
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").CombinedOutput(); err == nil {
		t.Skipf("the temporary directory is inside a repository (%s)", strings.TrimSpace(string(out)))
	}
	git := func(dir string, args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	dir := func(p string) string {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		return full
	}
	plain := []string{dir("plain"), dir("plain/a/b")}

	git(dir("repo"), "init", "-q")
	dir("repo/src/deep")
	git(root, "init", "-q", "--bare", "bare.git")
	git(dir("gitfile-target"), "init", "-q", "--separate-git-dir", filepath.Join(root, "separate.git"))
	mustWrite(t, filepath.Join(dir("broken-gitfile"), ".git"), "not a gitdir line\n")
	mustWrite(t, filepath.Join(dir("head-file"), "HEAD"), "ref: refs/heads/main\n")
	dir("head-file/below")
	if err := os.Symlink(filepath.Join(root, "repo", "src"), filepath.Join(root, "plain", "link-into-repo")); err != nil {
		t.Fatal(err)
	}
	cases := append([]string{
		filepath.Join(root, "repo"), filepath.Join(root, "repo/src/deep"),
		filepath.Join(root, "bare.git"), filepath.Join(root, "bare.git/refs"),
		filepath.Join(root, "gitfile-target"), filepath.Join(root, "broken-gitfile"),
		filepath.Join(root, "head-file/below"), filepath.Join(root, "plain/link-into-repo"),
		filepath.Join(root, "does-not-exist"),
	}, plain...)
	for _, d := range cases {
		_, err := gitexec.Project{Dir: d}.Run(context.Background(), "rev-parse", "--git-dir")
		gitFinds := err == nil || !strings.Contains(err.Error(), "not a git repository")
		if noRepository(d) && gitFinds {
			t.Errorf("%s: noRepository says none, git says %v", d, err)
		}
	}
	for _, d := range plain {
		if !noRepository(d) {
			t.Errorf("%s: outside every repository, but noRepository says there may be one", d)
		}
	}
	for _, d := range []string{filepath.Join(root, "repo/src/deep"), filepath.Join(root, "bare.git/refs"), filepath.Join(root, "plain/link-into-repo")} {
		if noRepository(d) {
			t.Errorf("%s: in a repository, but noRepository says none", d)
		}
	}
}

// TestTopLevelAgreesWithGit: wherever TopLevel answers without git, its
// answer is the work tree git gives (its top level, or the directory itself
// where git finds none), and it answers at the top of a plain repository
// and outside every repository.
func TestTopLevelAgreesWithGit(t *testing.T) {
	root := t.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	if _, err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").CombinedOutput(); err == nil {
		t.Skip("the temporary directory is inside a repository")
	}
	git := func(dir string, args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	mk := func(p string) string {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		return full
	}
	plain, repo := mk("plain/a"), mk("repo")
	git(repo, "init", "-q")
	mk("repo/sub")
	moved := mk("moved")
	git(moved, "init", "-q")
	git(moved, "config", "core.worktree", mk("elsewhere"))
	including := mk("including")
	git(including, "init", "-q")
	mustWrite(t, filepath.Join(root, "extra.config"), "[core]\n\tworktree = "+mk("elsewhere2")+"\n")
	git(including, "config", "include.path", filepath.Join(root, "extra.config"))
	bare := filepath.Join(root, "bare.git")
	git(root, "init", "-q", "--bare", bare)
	for _, d := range []string{plain, repo, filepath.Join(repo, "sub"), moved, including, bare} {
		want := d
		out, err := gitexec.Project{Dir: d}.Run(context.Background(), "rev-parse", "--show-toplevel")
		if top := strings.TrimSuffix(string(out), "\n"); err == nil && top != "" {
			want = top
		}
		top, ok := TopLevel(d)
		if ok && top != want {
			t.Errorf("%s: TopLevel %s, git %s", d, top, want)
		}
		if !ok && (d == plain || d == repo) {
			t.Errorf("%s: TopLevel asks git where it need not", d)
		}
	}
}

// TestPlainRevParseAgreesWithGit: at the top of a plain repository, what the
// files tell is byte for byte what hold's rev-parse prints (with HEAD, else
// without it), through a repository's life: no commit yet, a commit, a
// branch with a slash, packed refs, a loose ref newer than its packed line,
// a detached HEAD, an orphan branch; and a ref naming another ref, or a
// config naming another work tree, goes to git.
func TestPlainRevParseAgreesWithGit(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	where := []string{"rev-parse", "--is-inside-work-tree", "--git-path", "index", "--git-path", "info/exclude", "--show-toplevel"}
	check := func(what string, wantOK bool) {
		t.Helper()
		project := gitexec.Project{Dir: dir}
		want, err := project.Run(context.Background(), append(where, "HEAD", "--symbolic-full-name", "HEAD")...)
		if err != nil {
			want, err = project.Run(context.Background(), where...)
		}
		if err != nil {
			t.Fatalf("%s: git: %v", what, err)
		}
		got, ok := plainRevParse(dir)
		if ok != wantOK {
			t.Fatalf("%s: told by the files: %v, want %v", what, ok, wantOK)
		}
		if ok && string(got) != string(want) {
			t.Fatalf("%s: the files tell\n%s\ngit prints\n%s", what, got, want)
		}
	}
	git("init", "-q", "-b", "main")
	check("no commit yet", true)
	git("commit", "-q", "--allow-empty", "-m", "one")
	check("a commit", true)
	git("checkout", "-q", "-b", "feature/x")
	check("a branch with a slash", true)
	git("pack-refs", "--all")
	check("packed refs", true)
	git("commit", "-q", "--allow-empty", "-m", "two")
	check("a loose ref newer than its packed line", true)
	git("checkout", "-q", "--detach")
	check("a detached HEAD", true)
	git("checkout", "-q", "--orphan", "fresh")
	check("an orphan branch", true)
	git("checkout", "-q", "main")
	git("symbolic-ref", "refs/heads/alias", "refs/heads/main")
	git("symbolic-ref", "HEAD", "refs/heads/alias")
	check("a ref naming another ref", false)
	git("symbolic-ref", "HEAD", "refs/heads/main")
	check("back on main", true)
	mustWrite(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main \r\n")
	check("a HEAD with trailing blanks", false)
	git("symbolic-ref", "HEAD", "refs/heads/main")
	git("config", "core.worktree", dir)
	check("a config naming a work tree", false)
}
