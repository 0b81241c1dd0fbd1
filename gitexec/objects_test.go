package gitexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScrubbedEnvSetsMallocTrim checks that every git child gets rewind's
// malloc trim threshold exactly once, whatever the caller's environment says.
func TestScrubbedEnvSetsMallocTrim(t *testing.T) {
	t.Setenv("MALLOC_TRIM_THRESHOLD_", "1")
	var found []string
	for _, kv := range scrubbedEnv("LC_ALL=C") {
		if strings.HasPrefix(kv, "MALLOC_TRIM_THRESHOLD_=") {
			found = append(found, kv)
		}
	}
	if len(found) != 1 || found[0] != mallocTrim {
		t.Errorf("MALLOC_TRIM_THRESHOLD_ in the environment: %q, want only %q", found, mallocTrim)
	}
}

// TestPackBlobsSetting checks that PackBlobs asks git for the bulk check-in
// only where update-index gathers it into one pack.
func TestPackBlobsSetting(t *testing.T) {
	for _, pack := range []bool{false, true} {
		args := strings.Join(Shadow{PackBlobs: pack}.overrides(), " ")
		want := pack && BulkCheckinPacks()
		if got := strings.Contains(args, "core.bigFileThreshold=1"); got != want {
			t.Errorf("PackBlobs %v on git %s: bigFileThreshold set %v, want %v", pack, gitVersion, got, want)
		}
		if got := strings.Contains(args, "pack.packSizeLimit=16777216"); got != want {
			t.Errorf("PackBlobs %v on git %s: packSizeLimit set %v, want %v", pack, gitVersion, got, want)
		}
	}
	if atLeast("2.36.9", bulkCheckinVersion) || !atLeast("2.37.0", bulkCheckinVersion) {
		t.Errorf("the bulk check-in version boundary is not 2.37")
	}
}

func TestLineSplitter(t *testing.T) {
	var got []string
	l := &lineSplitter{emit: func(s string) { got = append(got, s) }}
	for _, chunk := range []string{"Counting objects:   0% (1/3)\rCount", "ing objects: 100% (3/3), done.\r\n", "error: x\r\n", "tail"} {
		l.Write([]byte(chunk))
	}
	l.flush()
	want := []string{"Counting objects:   0% (1/3)", "Counting objects: 100% (3/3), done.", "error: x", "tail"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
	if l.text.String() != "Counting objects: 100% (3/3), done.\nerror: x\ntail\n" {
		t.Errorf("kept text %q", l.text.String())
	}
}

// TestRunProgress: git draws its progress for RunProgress (on a
// pseudo-terminal where one can be opened) and a failure still carries
// git's message.
func TestRunProgress(t *testing.T) {
	ctx := context.Background()
	store := t.TempDir()
	wt := t.TempDir()
	s := Shadow{GitDir: filepath.Join(store, "git"), WorkTree: wt, IndexFile: filepath.Join(store, "index"), ConfigHome: filepath.Join(store, "home")}
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := os.WriteFile(filepath.Join(wt, fmt.Sprintf("f%d", i)), []byte(strings.Repeat("y", i+3)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Run(ctx, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	tree, err := s.Run(ctx, "write-tree")
	if err != nil {
		t.Fatal(err)
	}
	commit, err := s.RunInput(ctx, strings.NewReader("m"), "commit-tree", strings.TrimSpace(string(tree)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, "update-ref", "refs/heads/x", strings.TrimSpace(string(commit))); err != nil {
		t.Fatal(err)
	}
	var lines []string
	if _, err := s.RunProgress(ctx, func(l string) { lines = append(lines, l) }, "repack", "-a", "-d"); err != nil {
		t.Fatal(err)
	}
	if r, term, err := openTerminal(); err == nil {
		r.Close()
		term.Close()
		if !strings.Contains(strings.Join(lines, "\n"), "Writing objects: 100% (7/7)") {
			t.Errorf("git's progress on the terminal: %q", lines)
		}
	}
	_, err = s.RunProgress(ctx, func(string) {}, "cat-file", "-t", strings.Repeat("0", 40))
	var gitErr *Error
	if !errors.As(err, &gitErr) || !strings.Contains(gitErr.Stderr, "could not get object info") {
		t.Errorf("a failure's message: %v", err)
	}
}
