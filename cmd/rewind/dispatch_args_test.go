package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDispatchOptionPrefixes checks the command line dispatch.py's argparse
// would take: abbreviations of the subcommand's own long options become those
// options; an ambiguous one is argparse's usage error; other commands take no
// abbreviation.
func TestDispatchOptionPrefixes(t *testing.T) {
	for line, want := range map[string]string{
		"dispatch after --di d --se 1 --stat failed": "rewind dispatch after --dir d --seq 1 --status failed",
		"dispatch after --sum=a=b --dir d":           "rewind dispatch after --summary=a=b --dir d",
		"dispatch cleanup --fail --scr s":            "rewind dispatch cleanup --failed --scratch s",
		"dispatch before --replay-o 3":               "rewind dispatch before --replay-of 3",
		"dispatch seq --he":                          "rewind dispatch seq --help",
	} {
		var stderr bytes.Buffer
		app := newApp(strings.NewReader(""), &bytes.Buffer{}, &stderr)
		args, err := reorderArgs(app, append([]string{"rewind"}, strings.Fields(line)...))
		if err != nil || strings.Join(args, " ") != want {
			t.Errorf("%s: %q, %v; want %s", line, args, err, want)
		}
	}
	// --s is ambiguous in after: --seq, --status, --summary.
	var stderr bytes.Buffer
	app := newApp(strings.NewReader(""), &bytes.Buffer{}, &stderr)
	_, err := reorderArgs(app, []string{"rewind", "dispatch", "after", "--di", "d", "--s=1"})
	if report(&countingWriter{w: &bytes.Buffer{}}, &bytes.Buffer{}, false, err, false) != exitUsage ||
		stderr.String() != "rewind dispatch after: error: ambiguous option: --s=1 could match --seq, --status, --summary\n" {
		t.Errorf("ambiguous: %v, stderr %q", err, stderr.String())
	}
	// Not for rewind's own commands, nor for an option of another command.
	for _, line := range []string{"checkpoint list --lim 3", "dispatch seq --scr s", "dispatch before --rep x"} {
		var stderr bytes.Buffer
		app := newApp(strings.NewReader(""), &bytes.Buffer{}, &stderr)
		if _, err := reorderArgs(app, append([]string{"rewind"}, strings.Fields(line)...)); err == nil {
			t.Errorf("%s: taken", line)
		}
	}
}
