package main

import (
	"io"

	"github.com/urfave/cli/v2"
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

// TestExamplesNameTheirCommand: every command the examples table names exists,
// and each of its examples runs it. (Commands without examples are allowed, so
// that a command added elsewhere does not break this test; their help simply
// has no EXAMPLES section.)
func TestExamplesNameTheirCommand(t *testing.T) {
	app := newApp(strings.NewReader(""), io.Discard, io.Discard)
	for name, ex := range examples {
		if name == "" {
			continue
		}
		if path := pathTo(app, strings.Fields(name)); len(path) != len(strings.Fields(name)) {
			t.Errorf("examples for %q: no such command", name)
		}
		if len(ex) == 0 || len(ex) > 3 {
			t.Errorf("%s: %d examples", name, len(ex))
		}
		for _, e := range ex {
			if !strings.Contains(e, name) || !strings.Contains(e, "rewind ") {
				t.Errorf("%s: the example %q does not run it", name, e)
			}
		}
	}
	// Today's commands all have theirs.
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			switch name {
			case "version", "checkpoint", "dispatch", "manifest", "pipeline", "replay", "node", "state", "demo", "completion":
				if len(examples[name]) == 0 {
					t.Errorf("%s has no examples", name)
				}
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", app.Commands)
}
