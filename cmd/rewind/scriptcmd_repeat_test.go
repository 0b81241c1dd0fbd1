package main

import (
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// repeat NAME TEXT N sets the environment variable NAME to TEXT repeated N
// times, for arguments too long to write in a script (a 4100-character model
// label, an 8000-character summary).
func init() {
	scriptCmds["repeat"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg {
			ts.Fatalf("unsupported: ! repeat")
		}
		if len(args) != 3 {
			ts.Fatalf("usage: repeat NAME TEXT N")
		}
		n, err := strconv.Atoi(args[2])
		if err != nil || n < 0 {
			ts.Fatalf("repeat: bad count %q", args[2])
		}
		ts.Setenv(args[0], strings.Repeat(args[1], n))
	}
}
