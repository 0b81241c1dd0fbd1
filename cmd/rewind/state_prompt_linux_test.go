package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the master end, where the test types
// and reads, and the terminal end rewind sees.
func openPTY(t *testing.T) (master, term *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlock pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Skipf("pseudo-terminal number: %v", err)
	}
	term, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { term.Close() })
	return master, term
}

// TestStateCheckAsksWhichRun: on a terminal, a project root with several
// unfinished playbook runs lists them and asks for one; the answer is the run
// checked.
func TestStateCheckAsksWhichRun(t *testing.T) {
	root := t.TempDir()
	for _, f := range []struct{ dir, state string }{
		{"001-a", "status: IN_PROGRESS\nspec_hash:\ncurrent_stage: spec\n"},
		{"002-b", "status: ABORTED\nspec_hash:\ncurrent_stage: spec\n"},
	} {
		p := filepath.Join(root, "specs", f.dir, ".pipeline-state.md")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f.state), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	master, term := openPTY(t)
	if _, err := master.Write([]byte("2\n")); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	code := runWith([]string{"rewind", "--now", "2026-01-02T03:04:05Z", "state", "check", root}, term, &stdout, term)
	if code != 0 {
		t.Fatalf("exit %d; stdout:\n%s", code, stdout.String())
	}
	want := "state file: " + filepath.Join(root, "specs", "002-b", ".pipeline-state.md") + "\n"
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("the chosen run was not checked; stdout:\n%s", stdout.String())
	}
	// What the terminal showed: the typed answer's echo and the prompt.
	master.SetReadDeadline(time.Now().Add(2 * time.Second))
	var shown []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(shown, []byte("which one?")) {
		n, err := master.Read(buf)
		shown = append(shown, buf[:n]...)
		if err != nil {
			break
		}
	}
	for _, line := range []string{"2 unfinished runs in " + root, "1) " + filepath.Join(root, "specs", "001-a") + " (IN_PROGRESS at stage spec)", "which one? [1-2]"} {
		if !strings.Contains(string(shown), line) {
			t.Errorf("the prompt lacks %q:\n%s", line, shown)
		}
	}
}
