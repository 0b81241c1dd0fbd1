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
