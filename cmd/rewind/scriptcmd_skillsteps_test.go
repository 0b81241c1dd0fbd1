package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rewind-cli/rewind/skills"
)

// skillsteps SKILL.md DIR writes each step of a SKILL.md (its ```bash blocks,
// in order) to DIR/step-NN.sh and prints one line per step: the file, the
// section it is in, and its command. A script compares that listing with its
// own and runs the files in turn, as a model following the skill would, so a
// SKILL.md cannot drift from the binary: a changed step fails the listing,
// a command rewind no longer takes fails its run.
func init() {
	scriptCmds["skillsteps"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg {
			ts.Fatalf("unsupported: ! skillsteps")
		}
		if len(args) != 2 {
			ts.Fatalf("usage: skillsteps SKILL.md DIR")
		}
		data, err := os.ReadFile(ts.MkAbs(args[0]))
		ts.Check(err)
		steps, err := skills.Steps(data)
		ts.Check(err)
		dir := ts.MkAbs(args[1])
		ts.Check(os.MkdirAll(dir, 0o755))
		for i, s := range steps {
			name := fmt.Sprintf("step-%02d.sh", i+1)
			ts.Check(os.WriteFile(filepath.Join(dir, name), []byte(s.Command+"\n"), 0o644))
			fmt.Fprintf(ts.Stdout(), "%s (%s): %s\n", name, s.Section, strings.ReplaceAll(s.Command, "\n", "; "))
		}
	}
}
