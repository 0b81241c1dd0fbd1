package main

import (
	"bytes"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// linemax FILE N fails unless every line of FILE, its newline included, is at
// most N bytes (the manifest's PIPE_BUF bound); `! linemax` fails unless one is
// longer.
func init() {
	scriptCmds["linemax"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 {
			ts.Fatalf("usage: linemax FILE N")
		}
		max, err := strconv.Atoi(args[1])
		if err != nil {
			ts.Fatalf("linemax: bad N %q", args[1])
		}
		longest := 0
		for _, l := range bytes.SplitAfter([]byte(ts.ReadFile(args[0])), []byte("\n")) {
			if len(l) > longest {
				longest = len(l)
			}
		}
		if over := longest > max; over != neg {
			ts.Fatalf("%s: longest line %d bytes, limit %d", args[0], longest, max)
		}
	}
}
