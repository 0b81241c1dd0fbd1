package checkpoint

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// asUnprivileged runs the calling test as a user other than root, where
// permission bits hold (root opens an unreadable directory all the same).
// Run as root, it runs the test binary again, as the user nobody, for that
// test alone, fails t with its output if it fails, and returns true: the
// caller returns. Otherwise (not root, or that run) it returns false, and
// the caller goes on.
func asUnprivileged(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 || os.Getenv("REWIND_TEST_UNPRIVILEGED") == "1" {
		return false
	}
	// A directory nobody can use for its temporary files, and a copy of
	// the test binary it can run (go test's own is below a 0700 one).
	dir, err := os.MkdirTemp("", "rewind-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o1777); err != nil { // sticky: none but root replaces the binary
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "checkpoint.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REWIND_TEST_UNPRIVILEGED=1", "TMPDIR="+dir, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		// A temporary directory mounted noexec, or a root without the
		// right to change its user (a container's): not this test's fault.
		t.Skipf("cannot run the test as the user nobody here: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run as the user nobody: %v\n%s", err, out.String())
	}
	t.Logf("run as the user nobody:\n%s", out.String())
	return true
}
