package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEShowsTheDemo keeps the README's copy of `rewind demo`'s output true:
// the demo's times are fixed, so only the temporary directory and the path of
// the binary differ from run to run.
func TestREADMEShowsTheDemo(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const intro = "the same on every run):\n\n```\n"
	start := strings.Index(string(readme), intro)
	if start < 0 {
		t.Fatal("README has no demo output block")
	}
	want := string(readme)[start+len(intro):]
	want = want[:strings.Index(want, "```\n")]

	// The demo runs its stand-in agent as `<its own binary> demo agent`, so it
	// needs a real rewind binary.
	bin := filepath.Join(t.TempDir(), "rewind")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "demo")
	cmd.Env = append(os.Environ(), "REWIND_NOW=", "REWIND_STORE=", "REWIND_WORK_TREE=", "NO_COLOR=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rewind demo: %v", err)
	}
	got := regexp.MustCompile(`/[^ ]*rewind-demo-[0-9]+`).ReplaceAllString(string(out), "/tmp/rewind-demo-123")
	got = strings.ReplaceAll(got, "'"+bin+"'", "'/usr/local/bin/rewind'")
	if got != want {
		t.Errorf("the README's demo output is stale; regenerate it from `rewind demo`.\n--- got\n%s\n--- README\n%s", got, want)
	}
}
