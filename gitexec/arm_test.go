package gitexec

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Cloning an arm writes nothing in the source repository, and the arm has no
// remote to push to.
func TestArmCloneLeavesSourceAlone(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	run(src, "init", "-q")
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	run(src, "add", "f")
	run(src, "commit", "-q", "-m", "one")
	before := snapshot(t, filepath.Join(src, ".git"))

	arm := Arm{Dir: filepath.Join(t.TempDir(), "arm"), ConfigHome: t.TempDir()}
	if err := arm.Clone(ctx, src); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, filepath.Join(src, ".git")); after != before {
		t.Errorf("cloning wrote the source's .git")
	}
	out, err := arm.Run(ctx, "remote")
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("remotes %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(arm.Dir, "f")); !os.IsNotExist(err) {
		t.Errorf("the clone checked files out: %v", err)
	}
	if _, err := os.Stat(filepath.Join(arm.Dir, ".git", "objects", "info", "alternates")); !os.IsNotExist(err) {
		t.Errorf("the clone borrows the source's objects")
	}
}

func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String() + " " + fi.ModTime().String() + "\n")
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
