package main

// Progress: one line on stderr, redrawn in place, for the operations that can
// take more than a second (a first checkpoint of a large tree, a restore
// writing many files, prune, replay's agents). Only when stderr is a terminal
// and not under --json; a pipe or a log never sees it.
//
// Written here rather than with a progress-bar library (github.com/vbauerster/mpb
// was weighed): rewind's line is its usual "rewind: " line with a count and a
// rate, which needs no bars, widths or decorators, and mpb would add four
// modules to a binary that has few. What the line needs, and mpb would have
// given, is here: in-place redraw, a rate, throttling, clearing at the end, and
// stepping aside for the other lines rewind prints meanwhile.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rewind-cli/rewind/checkpoint"
)

// The progress line's timing: it appears only once an operation has run this
// long (a fast one never flickers), and is redrawn at most this often. Tests
// set both to 0.
var (
	progressDelay    = 500 * time.Millisecond
	progressInterval = 100 * time.Millisecond
)

// progressLine is the in-place line. The zero of what it shows is "nothing
// yet"; a nil *progressLine (no terminal, --json) does nothing.
type progressLine struct {
	mu    sync.Mutex
	out   io.Writer // the terminal
	what  string    // "checkpoint", "restore", ...
	step  string
	done  int
	total int
	// stepStart is when the current step began: the rate is the step's.
	stepStart time.Time
	start     time.Time
	drawn     bool // the line is on the screen now
	lastDraw  time.Time
	ended     bool
	ticker    *time.Ticker
	quit      chan struct{}
	now       func() time.Time // the clock; tests set it
}

// startProgress begins a progress line for the operation what, or returns nil
// when progress is not shown. Its stderr writer takes the line off the screen
// before any other line rewind prints, so call it before printing on stderr.
func (o *options) startProgress(what string) *progressLine {
	if !o.progress {
		return nil
	}
	p := &progressLine{out: o.rawStderr, what: what, start: time.Now(), stepStart: time.Now(), quit: make(chan struct{}), now: time.Now}
	o.Stderr = &progressAware{p: p, w: o.rawStderr}
	if progressInterval > 0 {
		// Keep the elapsed time moving while a step reports nothing (git
		// repacking, an agent at work).
		p.ticker = time.NewTicker(progressInterval)
		go func() {
			for {
				select {
				case <-p.ticker.C:
					p.mu.Lock()
					p.draw(false)
					p.mu.Unlock()
				case <-p.quit:
					return
				}
			}
		}()
	}
	return p
}

// update sets the current step and its count (total 0: not counted). Safe from
// several goroutines.
func (p *progressLine) update(step string, done, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if done < p.done && step == p.step && total == p.total {
		return // a late report from a reader that ran ahead
	}
	if step != p.step {
		// (After the check above: a new step's first count is below the
		// last step's, and is no late report.)
		p.step, p.stepStart = step, p.now()
	}
	p.done, p.total = done, total
	p.draw(false)
}

// end clears the line for good and gives stderr back.
func (p *progressLine) end(o *options) {
	if p == nil {
		return
	}
	if p.ticker != nil {
		p.ticker.Stop()
		close(p.quit)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	p.ended = true
	o.Stderr = o.rawStderr
}

// draw redraws the line, unless it was drawn less than progressInterval ago
// (force ignores that) or the operation is younger than progressDelay.
func (p *progressLine) draw(force bool) {
	now := p.now()
	if p.ended || now.Sub(p.start) < progressDelay || (!force && p.drawn && now.Sub(p.lastDraw) < progressInterval) {
		return
	}
	line := "rewind: " + p.what
	if p.step != "" {
		line += ": " + p.step
	}
	if p.total > 0 {
		line += fmt.Sprintf(" %s/%s", thousands(p.done), thousands(p.total))
		if secs := now.Sub(p.stepStart).Seconds(); secs >= 0.05 && p.done > 0 {
			if rate := float64(p.done) / secs; rate >= 1 {
				line += fmt.Sprintf(", %s/s", thousands(int(rate)))
			} else {
				line += fmt.Sprintf(", %.1f/min", rate*60)
			}
		}
	} else if p.done > 0 {
		line += " " + thousands(p.done)
	}
	line += fmt.Sprintf(" (%s)", now.Sub(p.start).Truncate(time.Second/10))
	if w := terminalWidth(p.out); w > 0 && len(line) >= w {
		line = line[:w-1]
	}
	fmt.Fprintf(p.out, "\r\x1b[K%s", line)
	p.drawn, p.lastDraw = true, now
}

func (p *progressLine) clear() {
	if p.drawn {
		fmt.Fprint(p.out, "\r\x1b[K")
		p.drawn = false
	}
}

// progressAware is stderr while a progress line is up: each write first takes
// the line off the screen; the next redraw puts it back under what was written.
type progressAware struct {
	p *progressLine
	w io.Writer
}

func (a *progressAware) Write(b []byte) (int, error) {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	a.p.clear()
	return a.w.Write(b)
}

// Fd lets isTerminal see the terminal under the wrapper.
func (a *progressAware) Fd() uintptr {
	if f, ok := a.w.(*os.File); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

// trackProgress shows the progress s reports as the operation what, until
// the returned function is called.
func trackProgress(o *options, s *checkpoint.Store, what string) func() {
	p := o.startProgress(what)
	if p == nil {
		return func() {}
	}
	s.Progress = p.update
	return func() {
		s.Progress = nil
		p.end(o)
	}
}

// thousands writes n with commas: 12,345.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
