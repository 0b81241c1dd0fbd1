package main

import (
	"errors"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// exitcode N PROG [ARGS...] runs PROG like exec and fails unless it exits with
// status N; stdout and stderr are kept for the next stdout/stderr/cmp checks.
// testscript's `! exec` only tells zero from non-zero, and rewind's exit codes are
// part of its interface.
func init() {
	scriptCmds["exitcode"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg {
			ts.Fatalf("unsupported: ! exitcode")
		}
		if len(args) < 2 {
			ts.Fatalf("usage: exitcode N PROG [ARGS...]")
		}
		want, err := strconv.Atoi(args[0])
		if err != nil {
			ts.Fatalf("exitcode: bad status %q", args[0])
		}
		got := 0
		if err := ts.Exec(args[1], args[2:]...); err != nil {
			var exitErr interface{ ExitCode() int }
			if !errors.As(err, &exitErr) {
				ts.Fatalf("exitcode: %v", err)
			}
			got = exitErr.ExitCode()
		}
		if got != want {
			ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
		}
	}
}
