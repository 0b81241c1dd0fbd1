package main

import "testing"

// TestCountedStdoutIsStillATerminal: counting stdout for --json must not hide
// that it is a terminal (colour, progress, prompts).
func TestCountedStdoutIsStillATerminal(t *testing.T) {
	_, term := openPTY(t)
	if !isTerminal(&countingWriter{w: term}) {
		t.Error("a terminal behind the counting writer is not taken for one")
	}
}
