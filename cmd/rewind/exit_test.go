package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/rewind-cli/rewind/checkpoint"
)

// A restore that failed as it wrote, or was interrupted then, says how to
// finish or undo it: the commands with its target and safety checkpoint.
func TestClassifyFailedRestoreHints(t *testing.T) {
	restore := checkpoint.InterruptedError{Target: "1a2b3c4d", Safety: "5e6f7a8b", Reason: "pre-wave-2"}
	want := []string{
		"finish it: rewind checkpoint restore 1a2b3c4d --yes",
		"or undo it: rewind checkpoint restore 5e6f7a8b --yes (the safety checkpoint taken before it)",
	}
	for _, tc := range []struct {
		err  error
		exit int
	}{
		{&checkpoint.RestoreFailedError{Err: errors.New("restore the permissions of run.sh: operation not permitted"), Restore: restore}, exitFailure},
		{&checkpoint.RestoreFailedError{Err: fmt.Errorf("checkout-index: %w", context.Canceled), Restore: restore}, exitInterrupted},
	} {
		exit, hints := classify(tc.err)
		if exit != tc.exit || !slices.Equal(hints, want) {
			t.Errorf("%v: exit %d, hints %q; want %d, %q", tc.err, exit, hints, tc.exit, want)
		}
		code, wantCode := errorCode(tc.err, exit), "restore_failed"
		if tc.exit == exitInterrupted {
			wantCode = "interrupted"
		}
		if code != wantCode {
			t.Errorf("%v: error code %q, want %q", tc.err, code, wantCode)
		}
	}
	// Run with -C and --store, the hints run rewind as the command did.
	err := &checkpoint.RestoreFailedError{Err: errors.New("checkout-index: exit status 128"), Restore: restore}
	restoreHintsRunAs(err, "rewind -C /w --store '/s t'")
	if _, hints := classify(err); !slices.Equal(hints, []string{
		"finish it: rewind -C /w --store '/s t' checkpoint restore 1a2b3c4d --yes",
		"or undo it: rewind -C /w --store '/s t' checkpoint restore 5e6f7a8b --yes (the safety checkpoint taken before it)",
	}) {
		t.Errorf("hints %q", hints)
	}
}
