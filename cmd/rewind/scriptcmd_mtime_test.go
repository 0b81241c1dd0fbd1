package main

import (
	"os"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// mtime FILE TIME sets the modification time of FILE to TIME (RFC 3339), for
// scripts whose output depends on which file is newest.
func init() {
	scriptCmds["mtime"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg {
			ts.Fatalf("unsupported: ! mtime")
		}
		if len(args) != 2 {
			ts.Fatalf("usage: mtime FILE TIME")
		}
		t, err := time.Parse(time.RFC3339, args[1])
		if err != nil {
			ts.Fatalf("mtime: %v", err)
		}
		ts.Check(os.Chtimes(ts.MkAbs(args[0]), t, t))
	}
}
