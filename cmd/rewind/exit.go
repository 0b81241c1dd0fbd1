package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fatih/color"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/gitexec"
)

// The exit codes, in one place. Scripts branch on them, so they never change
// meaning.
const (
	exitOK          = 0
	exitFailure     = 1   // failure, or a refusal to act on bad state
	exitUsage       = 2   // unknown command or flag, bad argument value
	exitConfirm     = 3   // destructive action without --yes and no terminal
	exitGuard       = 4   // fail-closed guard: branch mismatch, stale snapshot, ...
	exitBusy        = 5   // another rewind holds the lock past the wait time
	exitInterrupted = 130 // SIGINT/SIGTERM, as a shell reports it
)

// cliError carries an exit code and hints up to run, which prints it once.
type cliError struct {
	code   int // 0: let classify decide
	err    error
	hints  []string
	silent bool   // the command already printed its own message
	name   string // the code in the --json error document ("": errorCode decides)
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// usageErrorf is a bad command line: exit 2.
func usageErrorf(format string, a ...any) error {
	return &cliError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// exitErrorf is an error with a fixed exit code.
func exitErrorf(code int, format string, a ...any) error {
	return &cliError{code: code, err: fmt.Errorf(format, a...)}
}

// withCode gives err a fixed exit code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &cliError{code: code, err: err}
}

// withHint adds `rewind: hint:` lines to err and keeps its exit code.
func withHint(err error, hints ...string) error {
	if err == nil {
		return nil
	}
	var ce *cliError
	if errors.As(err, &ce) && ce == err {
		ce.hints = append(ce.hints, hints...)
		return ce
	}
	return &cliError{err: err, hints: hints}
}

// silentExit ends the command with code and prints nothing more on stderr: for
// commands that print their own messages (rewind dispatch keeps dispatch.py's).
// msg is that message, for the --json error document.
func silentExit(code int, msg string) error {
	return &cliError{code: code, err: errors.New(msg), silent: true}
}

// classify maps the domain packages' sentinel and typed errors to an exit code and
// hints. Errors it does not know are failures (1).
func classify(err error) (int, []string) {
	var verr *gitexec.VersionError
	var busy *checkpoint.BusyError
	var refErr *checkpoint.RefError
	var interrupted *checkpoint.InterruptedError
	var failed *checkpoint.RestoreFailedError
	var readOnly *checkpoint.ReadOnlyError
	var foreign *checkpoint.ForeignStoreError
	var adopt *checkpoint.AdoptError
	switch {
	case errors.As(err, &adopt):
		return exitGuard, nil
	case errors.As(err, &busy):
		return exitBusy, []string{"wait for it to finish, or pass a longer --wait"}
	case errors.As(err, &readOnly):
		return exitGuard, []string{fmt.Sprintf("if the project moved here from %s, make the store this work tree's: %s", readOnly.Recorded, adoptCommand(readOnly.Store, readOnly.Recorded))}
	case errors.As(err, &foreign):
		return exitGuard, []string{"each work tree needs its own store: unset REWIND_STORE or pass another --store",
			fmt.Sprintf("if the project moved here from %s, make the store this work tree's: %s", foreign.Recorded, adoptCommand(foreign.Store, foreign.Recorded)),
			"its checkpoints can be read meanwhile: rewind checkpoint list --store " + shellArg(foreign.Store)}
	case errors.Is(err, checkpoint.ErrBadLabel), errors.Is(err, checkpoint.ErrBadPath):
		return exitUsage, nil
	case errors.Is(err, checkpoint.ErrStoreInGitDir):
		return exitUsage, []string{"put the store outside the project's .git: unset REWIND_STORE, or pass another --store"}
	case errors.Is(err, checkpoint.ErrRefusedWorkTree):
		return exitFailure, []string{"run rewind in a project directory, or pass one with --work-tree"}
	case errors.As(err, &interrupted):
		return exitFailure, interrupted.Hints()
	case errors.As(err, &refErr):
		var hints []string
		if n := len(refErr.Ref); n > 0 && n < 4 && strings.Trim(refErr.Ref, "0123456789abcdef") == "" && errors.Is(err, checkpoint.ErrUnknownRef) {
			hints = append(hints, "an id prefix needs at least 4 characters")
		}
		if len(refErr.Candidates) > 0 {
			hints = append(hints, "candidates:")
			for _, c := range refErr.Candidates {
				hints = append(hints, fmt.Sprintf("  %s %s (%s)", c.Short(), c.Reason, c.Time.Format(time.RFC3339)))
			}
		} else {
			hints = append(hints, "create one with: rewind checkpoint create --reason REASON")
		}
		return exitFailure, hints
	case errors.Is(err, context.Canceled):
		if errors.As(err, &failed) {
			return exitInterrupted, failed.Hints()
		}
		return exitInterrupted, nil
	case errors.As(err, &failed):
		return exitFailure, failed.Hints()
	case errors.Is(err, gitexec.ErrGitNotFound):
		return exitFailure, []string{"install git " + gitexec.MinVersion + " or newer and make sure it is on PATH"}
	case errors.As(err, &verr):
		return exitFailure, []string{"install git " + gitexec.MinVersion + " or newer and make sure it comes first on PATH"}
	}
	return exitFailure, nil
}

// restoreHintsRunAs has the hints of an interrupted or failed restore run
// rewind as options.hintCommand says (setHintCommand), so that they reach
// the same work tree and store from any directory.
func restoreHintsRunAs(err error, rewind string) {
	var interrupted *checkpoint.InterruptedError
	if errors.As(err, &interrupted) {
		interrupted.Rewind = rewind
	}
	var failed *checkpoint.RestoreFailedError
	if errors.As(err, &failed) {
		failed.Restore.Rewind = rewind
	}
}

// notBlocking turns a hook's failure into exit 1, keeping its code and hints:
// Claude Code reads a hook's exit 2 as "block the agent", and the hook's
// contract is exit 1 for every failure but busy (5) and interrupted (130), a
// guard's 4 included. The error document says the exit code the hook really
// ends with.
func notBlocking(err error) error {
	if err == nil {
		return nil
	}
	code, _ := classify(err)
	var ce *cliError
	if errors.As(err, &ce) && ce.code != 0 {
		code = ce.code
	}
	if code == exitFailure || code == exitBusy || code == exitInterrupted {
		return err
	}
	name := errorCode(err, code)
	if ce != nil {
		// Change the cliError report will read, so its hints and silence stay.
		ce.code, ce.name = exitFailure, name
		return err
	}
	return &cliError{code: exitFailure, err: err, name: name}
}

// report prints err once on stderr, the error in red and the hints' label in
// cyan when colour is on (and, under --json, its error document on stdout when
// the command printed no document), and returns the exit code.
func report(stdout *countingWriter, stderr io.Writer, jsonOut bool, err error, colour bool) int {
	if err == nil {
		return exitOK
	}
	code, hints := classify(err)
	var ce *cliError
	silent := false
	if errors.As(err, &ce) {
		silent = ce.silent
		if ce.code != 0 {
			code = ce.code
		}
		hints = append(append([]string{}, ce.hints...), hints...)
	}
	if jsonOut && stdout.n == 0 {
		writeErrorJSON(stdout, err, code, hints)
	}
	if silent {
		return code
	}
	msg := err.Error()
	if code == exitInterrupted {
		msg = "interrupted"
	}
	hintLabel := "hint:"
	if colour {
		hintLabel = colourOn(color.FgCyan).Sprint(hintLabel)
	}
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		if colour {
			line = colourOn(color.FgRed).Sprint(line)
		}
		fmt.Fprintf(stderr, "rewind: %s\n", line)
	}
	for _, h := range hints {
		fmt.Fprintf(stderr, "rewind: %s %s\n", hintLabel, h)
	}
	return code
}
