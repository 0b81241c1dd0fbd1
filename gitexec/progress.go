package gitexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
)

// RunProgress is Run for a long command whose progress rewind shows: git's
// own progress lines ("Writing objects:  45% (9000/20000)") go to progress,
// one at a time, as git draws them. git draws them only on a terminal (repack
// has no --progress of its own, and tells pack-objects to show progress only
// when its stderr is one), so its stderr is a pseudo-terminal that rewind
// reads. Where none can be opened the command runs as Run does and progress
// is never called.
func (s Shadow) RunProgress(ctx context.Context, progress func(line string), args ...string) ([]byte, error) {
	reader, terminal, err := openTerminal()
	if err != nil {
		return s.Run(ctx, args...)
	}
	defer reader.Close()
	lines := &lineSplitter{emit: progress}
	var done sync.WaitGroup
	done.Add(1)
	go func() {
		defer done.Done()
		// The read ends with an error (EIO) once every process holding the
		// terminal end has exited.
		io.Copy(lines, reader)
	}()
	var out bytes.Buffer
	_, err = runWithStderr(ctx, s.WorkTree, s.env(), nil, &out, terminal, append(s.overrides(), args...))
	terminal.Close()
	done.Wait()
	lines.flush()
	var gitErr *Error
	if errors.As(err, &gitErr) {
		gitErr.Stderr = lines.text.String()
	}
	return out.Bytes(), err
}

// lineSplitter cuts a terminal's output into lines at each carriage return
// or line feed (git redraws a progress line after a carriage return; the
// terminal sends a line feed as both) and keeps the lines a line feed ended,
// for an error message.
type lineSplitter struct {
	emit    func(string)
	partial []byte
	current string       // the line last drawn, until a line feed ends it
	text    bytes.Buffer // every line a line feed ended
}

func (l *lineSplitter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b != '\r' && b != '\n' {
			l.partial = append(l.partial, b)
			continue
		}
		if len(l.partial) > 0 {
			l.current = string(l.partial)
			l.partial = l.partial[:0]
			l.emit(l.current)
		}
		if b == '\n' && l.current != "" {
			l.text.WriteString(l.current + "\n")
			l.current = ""
		}
	}
	return len(p), nil
}

// flush ends the last line, when git ended without a line feed.
func (l *lineSplitter) flush() {
	l.Write([]byte{'\n'})
}
