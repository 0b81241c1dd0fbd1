package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHookNeverExitsTwo: Claude Code reads a hook's exit 2 as "block the
// agent", so every usage error of `rewind hook ...` is exit 1, while other
// commands keep exit 2 for usage.
func TestHookNeverExitsTwo(t *testing.T) {
	t.Setenv("REWIND_NOW", "")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"rewind", "-C", dir, "hook", "post-tool-use", "--no-such-flag"},
		{"rewind", "--now", "not-a-time", "hook", "post-tool-use"},
		{"rewind", "hook", "post-tool-use", "extra-argument"},
		{"rewind", "-C", dir, "hook", "no-such-event"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runWith(args, strings.NewReader(`{"tool_name":"Bash"}`), &stdout, &stderr); code != exitFailure {
			t.Errorf("%v: exit %d, want 1 (stderr %q)", args[1:], code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := runWith([]string{"rewind", "checkpoint", "list", "--no-such-flag"}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != exitUsage {
		t.Errorf("checkpoint list with a bad flag: exit %d, want 2", code)
	}
}

func TestIsHookCall(t *testing.T) {
	for args, want := range map[string]bool{
		"rewind hook post-tool-use":               true,
		"rewind -C /p --now T hook post-tool-use": true,
		"rewind --json hook post-tool-use":        true,
		"rewind checkpoint create --reason hook":  false,
		"rewind -C hook checkpoint list":          false,
		"rewind hooks claude-code":                false,
		"rewind --store /s replay hook":           false,
	} {
		if got := isHookCall(strings.Fields(args)); got != want {
			t.Errorf("isHookCall(%q) = %v, want %v", args, got, want)
		}
	}
}
