package main

import (
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	cands := []string{"checkpoint", "dispatch", "manifest", "pipeline", "replay", "node", "state", "demo", "version"}
	for word, want := range map[string]string{
		"chekpoint":  "checkpoint",
		"checkpiont": "checkpoint",
		"replya":     "replay",
		"stat":       "state",
		"chec":       "checkpoint", // a prefix
		"zzzz":       "",
		"x":          "",
		"dmeo":       "demo",
	} {
		if got := nearest(word, cands); got != want {
			t.Errorf("nearest(%q) = %q, want %q", word, got, want)
		}
	}
}

func TestWrapIndented(t *testing.T) {
	text := strings.Repeat("word ", 40)
	for _, line := range strings.Split(wrapIndented(text, 3, 10), "\n") {
		if len(line) > helpWidth {
			t.Errorf("line of %d columns: %q", len(line), line)
		}
	}
	if got := wrapIndented("a b", 2, 4); got != "  a b" {
		t.Errorf("short text: %q", got)
	}
}

func TestReflowKeepsListsAndParagraphs(t *testing.T) {
	got := reflow("first line\ncontinues here\n\n- item one\n  more of one\n- item two", 3)
	want := []string{"   first line continues here", "", "   - item one more of one", "   - item two"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("reflow:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
