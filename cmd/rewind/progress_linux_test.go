package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readTerminal collects what the terminal shows; get closes the terminal end
// (the master's read then ends) and returns it all.
func readTerminal(master, term *os.File) (get func() string) {
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			buf.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	return func() string {
		term.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			panic("the terminal's reader did not end")
		}
		return buf.String()
	}
}

// TestProgressOnTerminalOnly: checkpoint create, restore and prune draw a
// progress line (counts and a rate, redrawn in place with \r, cleared at the
// end) on stderr when stderr is a terminal; nothing of it reaches a pipe, nor
// the terminal under --json.
func TestProgressOnTerminalOnly(t *testing.T) {
	oldDelay, oldInterval := progressDelay, progressInterval
	progressDelay, progressInterval = 0, 0
	t.Cleanup(func() { progressDelay, progressInterval = oldDelay, oldInterval })
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "1")
	t.Setenv("REWIND_NOW", "")

	wt, store := t.TempDir(), filepath.Join(t.TempDir(), "store")
	for i := range 300 {
		if err := os.WriteFile(filepath.Join(wt, fmt.Sprintf("f%03d.txt", i)), []byte(strings.Repeat("x", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"rewind", "--work-tree", wt, "--store", store, "--now", "2026-01-02T03:04:05Z"}
	run := func(stderr io.Writer, args ...string) (string, int) {
		var stdout bytes.Buffer
		code := runWith(append(append([]string{}, base...), args...), strings.NewReader(""), &stdout, stderr)
		return stdout.String(), code
	}

	// On a terminal.
	master, term := openPTY(t)
	get := readTerminal(master, term)
	if out, code := run(term, "checkpoint", "create", "--reason", "first"); code != 0 {
		t.Fatalf("create: exit %d: %s", code, out)
	}
	for i := range 300 {
		os.Remove(filepath.Join(wt, fmt.Sprintf("f%03d.txt", i)))
	}
	if out, code := run(term, "--yes", "checkpoint", "restore", "first"); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	if out, code := run(term, "--yes", "checkpoint", "prune", "--keep", "1"); code != 0 {
		t.Fatalf("prune: exit %d: %s", code, out)
	}
	shown := get()
	for _, want := range []*regexp.Regexp{
		// (The rate shows once a step has run 50ms: see TestProgressLine.)
		regexp.MustCompile(`\r\x1b\[Krewind: checkpoint: hashing files 300/300(, [0-9,]+/s)? \([0-9.]+m?s\)`),
		regexp.MustCompile(`\r\x1b\[Krewind: restore: writing files 300/300(, [0-9,]+/s)? \(`),
		regexp.MustCompile(`\r\x1b\[Krewind: prune: repacking objects \(`),
	} {
		if !want.MatchString(shown) {
			t.Errorf("the terminal did not show %q:\n%q", want, shown)
		}
	}
	// Each operation ends with its line cleared: what follows the last
	// progress line is the clearing sequence, then only whole lines.
	last := strings.LastIndex(shown, "rewind: prune:")
	rest := shown[last:]
	clearAt := strings.Index(rest, "\r\x1b[K")
	if clearAt < 0 || strings.Contains(rest[clearAt+4:], "rewind: prune:") {
		t.Errorf("the progress line was not cleared at the end:\n%q", rest)
	}

	// In a pipe: nothing of it.
	var pipe bytes.Buffer
	if out, code := run(&pipe, "checkpoint", "create", "--reason", "second"); code != 0 {
		t.Fatalf("create in a pipe: exit %d: %s", code, out)
	}
	if strings.Contains(pipe.String(), "\r") || strings.Contains(pipe.String(), "hashing") {
		t.Errorf("progress in a pipe: %q", pipe.String())
	}

	// Under --json on a terminal: nothing either.
	master2, term2 := openPTY(t)
	get2 := readTerminal(master2, term2)
	os.WriteFile(filepath.Join(wt, "new.txt"), []byte("new"), 0o644)
	if out, code := run(term2, "--json", "checkpoint", "create", "--reason", "third"); code != 0 {
		t.Fatalf("create --json: exit %d: %s", code, out)
	}
	if s := get2(); strings.Contains(s, "hashing") || strings.Contains(s, "\r\x1b[K") {
		t.Errorf("progress under --json: %q", s)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestProgressLine: the line's counts, rate and elapsed time, on a fake clock.
func TestProgressLine(t *testing.T) {
	oldDelay, oldInterval := progressDelay, progressInterval
	progressDelay, progressInterval = 0, 0
	t.Cleanup(func() { progressDelay, progressInterval = oldDelay, oldInterval })
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := t0
	var out bytes.Buffer
	p := &progressLine{out: &out, what: "checkpoint", start: t0, stepStart: t0, now: func() time.Time { return clock }}
	p.update("hashing files", 0, 12000)
	clock = t0.Add(2 * time.Second)
	p.update("hashing files", 5000, 12000)
	clock = t0.Add(3 * time.Second)
	p.update("writing files", 10, 0) // a new step: its own rate
	clock = t0.Add(63 * time.Second)
	p.update("dispatches ended", 1, 4)
	p.clear()
	want := "\r\x1b[Krewind: checkpoint: hashing files 0/12,000 (0s)" +
		"\r\x1b[Krewind: checkpoint: hashing files 5,000/12,000, 2,500/s (2s)" +
		"\r\x1b[Krewind: checkpoint: writing files 10 (3s)" +
		"\r\x1b[Krewind: checkpoint: dispatches ended 1/4 (1m3s)" +
		"\r\x1b[K"
	if out.String() != want {
		t.Errorf("got  %q\nwant %q", out.String(), want)
	}
	p.stepStart = t0
	out.Reset()
	p.draw(true)
	if !strings.Contains(out.String(), "1/4, 1.0/min (1m3s)") {
		t.Errorf("a slow rate is per minute: %q", out.String())
	}
}

// TestColourFollowsStderr: on a terminal stderr, an error is red and its hint
// label cyan, even with stdout in a pipe; a warning is yellow; in a pipe, or
// with NO_COLOR, nothing is coloured.
func TestColourFollowsStderr(t *testing.T) {
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	t.Setenv("REWIND_COLOR", "")
	t.Setenv("REWIND_NOW", "")
	master, term := openPTY(t)
	get := readTerminal(master, term)
	var stdout bytes.Buffer
	if code := runWith([]string{"rewind", "chekpoint"}, strings.NewReader(""), &stdout, term); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	wt := t.TempDir()
	os.WriteFile(filepath.Join(wt, "big.txt"), []byte("more than one byte"), 0o644)
	if code := runWith([]string{"rewind", "-C", wt, "--store", filepath.Join(t.TempDir(), "s"), "checkpoint", "create", "--reason", "a", "--max-file-size", "1"}, strings.NewReader(""), &stdout, term); code != 0 {
		t.Fatalf("create: exit %d", code)
	}
	shown := get()
	for _, want := range []string{
		"rewind: \x1b[31munknown command \"chekpoint\"",
		"rewind: \x1b[36mhint:\x1b[0m did you mean rewind checkpoint?",
		"rewind: \x1b[33mwarning:\x1b[0m skipped big.txt",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the terminal lacks %q:\n%q", want, shown)
		}
	}

	var pipe bytes.Buffer
	runWith([]string{"rewind", "chekpoint"}, strings.NewReader(""), &stdout, &pipe)
	if strings.Contains(pipe.String(), "\x1b") {
		t.Errorf("colour in a pipe: %q", pipe.String())
	}
	t.Setenv("NO_COLOR", "1")
	master2, term2 := openPTY(t)
	get2 := readTerminal(master2, term2)
	runWith([]string{"rewind", "chekpoint"}, strings.NewReader(""), &stdout, term2)
	if s := get2(); strings.Contains(s, "\x1b") {
		t.Errorf("colour with NO_COLOR: %q", s)
	}
}

// TestProgressTicker: with the redraw ticker running (as on a real terminal),
// the line still ends cleared; run under -race it checks the ticker's drawing
// against the steps' updates and the other lines on stderr.
func TestProgressTicker(t *testing.T) {
	oldDelay, oldInterval := progressDelay, progressInterval
	progressDelay, progressInterval = 0, time.Millisecond
	t.Cleanup(func() { progressDelay, progressInterval = oldDelay, oldInterval })
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "1")
	t.Setenv("REWIND_NOW", "")
	wt := t.TempDir()
	for i := range 200 {
		os.WriteFile(filepath.Join(wt, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644)
	}
	os.WriteFile(filepath.Join(wt, "big"), []byte("more than one byte"), 0o644)
	master, term := openPTY(t)
	get := readTerminal(master, term)
	var stdout bytes.Buffer
	code := runWith([]string{"rewind", "-C", wt, "--store", filepath.Join(t.TempDir(), "s"), "checkpoint", "create", "--reason", "a", "--max-file-size", "2"}, strings.NewReader(""), &stdout, term)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	shown := get()
	last := strings.LastIndex(shown, "rewind: checkpoint:")
	if last < 0 {
		t.Fatalf("no progress line: %q", shown)
	}
	if rest := shown[last:]; !strings.Contains(rest, "\r\x1b[K") {
		t.Errorf("not cleared at the end: %q", rest)
	}
	// The warning about the big file stands on a line of its own.
	if !regexp.MustCompile(`(^|\n|\x1b\[K)rewind: warning: skipped big`).MatchString(shown) {
		t.Errorf("the warning is not on a line of its own: %q", shown)
	}
}
