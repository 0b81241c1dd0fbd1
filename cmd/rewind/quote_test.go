package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestGitQuotePath(t *testing.T) {
	for in, want := range map[string]string{
		"plain.go":        "plain.go",
		"with space.go":   "with space.go",
		"café.txt":        "café.txt",
		"tab\there":       `"tab\there"`,
		"new\nline":       `"new\nline"`,
		"esc\x1b[31m.txt": `"esc\033[31m.txt"`,
		`quote".txt`:      `"quote\".txt"`,
		`back\slash`:      `"back\\slash"`,
		"bad\xffutf8":     "bad\xffutf8",
		"del\x7f":         `"del\177"`,
	} {
		if got := gitQuotePath(in); got != want {
			t.Errorf("gitQuotePath(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestGitQuotePathAsGit compares with git's own quoting (core.quotePath=false)
// of the same names, in ls-files -o.
func TestGitQuotePathAsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("no git on PATH: rewind needs it")
	}
	dir := t.TempDir()
	names := []string{"tab\there", "new\nline", "esc\x1b.txt", `quote".txt`, `back\slash`, "bad\xffutf8", "café", "bell\a", "cr\r"}
	for _, n := range names {
		writeFile(t, dir+"/"+n)
	}
	cmd := exec.Command("git", "-c", "core.quotePath=false", "init", "-q", dir)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", dir, "-c", "core.quotePath=false", "ls-files", "-o").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		got[line] = true
	}
	for _, n := range names {
		if !got[gitQuotePath(n)] {
			t.Errorf("git writes %q otherwise than %s; git's: %q", n, gitQuotePath(n), out)
		}
	}
}

func FuzzGitQuotePath(f *testing.F) {
	for _, s := range []string{"a", "tab\t", "\xff", `"\`, "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		q := gitQuotePath(p)
		if strings.ContainsAny(q, "\n\r\t\x1b") {
			t.Errorf("control character left in %q", q)
		}
		if q != p && (!strings.HasPrefix(q, `"`) || !strings.HasSuffix(q, `"`)) {
			t.Errorf("changed but not quoted: %q", q)
		}
	})
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
