package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// This file is `rewind dispatch`: crucible's scripts/dispatch.py, with its
// messages, plus an flock around every read-then-append and an fsync after it.

// FileName is the manifest's name in a dispatch directory.
const FileName = "manifest.jsonl"

// LedgerName is the receipt ledger beside the manifest.
const LedgerName = "receipt-ledger.jsonl"

// DispatchError is a refusal (exit 1) or a usage error (exit 2) of a dispatch
// command, with dispatch.py's own message.
type DispatchError struct {
	Usage bool
	Msg   string
	// DirMissing: the refusal is that the dispatch directory is gone.
	DirMissing bool
	// Inside: the refusal is that the copy target is the dispatch directory
	// or lies inside it.
	Inside bool
	// Foreign: the refusal is that another user owns the dispatch directory.
	Foreign bool
	// NoManifest: the refusal is that a dispatch directory holding files has
	// no manifest.jsonl (pipeline finish).
	NoManifest bool
}

func (e *DispatchError) Error() string { return e.Msg }

func dirMissing(dir string) error {
	return &DispatchError{Msg: "dispatch cleanup: dispatch dir missing: " + dir, DirMissing: true}
}

func refuse(format string, a ...any) error {
	return &DispatchError{Msg: fmt.Sprintf(format, a...)}
}

// seqScan finds the next seq to allocate: the highest seq + 1. Lines are read
// as dispatch.py's json.loads reads them (see parsePy): a Python int seq
// counts (true as 1, as Python's isinstance(seq, int) has it), a float or
// string seq does not. A line Python cannot read whose leading {"seq":N is
// still readable counts as seq N, the torn last line included: a seq a torn
// write may have used is never handed out again. Any other unreadable line is
// interior corruption, unless it is the last line (a torn write, ignored as
// dispatch.py ignores it). An int seq that does not fit 64 bits (or leaves no
// 64-bit seq after it) is returned in big: allocation cannot go on.
func seqScan(r io.Reader) (next int64, corrupt int, big *bigSeq, err error) {
	have := false
	var max int64
	var maxLine int
	count := func(seq int64, line int) {
		if !have || seq > max {
			max, maxLine, have = seq, line, true
		}
	}
	err = Scan(r, func(l *Line) error {
		v, perr := parsePy(l.Raw)
		if perr != nil {
			if seq, ok := leadingSeq(l.Raw); ok {
				count(seq, l.No)
			} else if !l.Last {
				corrupt++
			}
			return nil
		}
		n, ok, tooBig := v.get("seq").int64Value()
		switch {
		case ok:
			count(n, l.No)
		case tooBig && big == nil:
			big = &bigSeq{line: l.No, lit: v.get("seq").num}
		}
		return nil
	})
	if big == nil && have && max == math.MaxInt64 {
		big = &bigSeq{line: maxLine, lit: strconv.FormatInt(max, 10), last: true}
	}
	if !have {
		return 1, corrupt, big, err
	}
	return max + 1, corrupt, big, err
}

// bigSeq is a seq in the manifest beyond what a 64-bit seq can follow.
type bigSeq struct {
	line int
	lit  string
	last bool // the largest 64-bit seq: the next one does not fit
}

// allocErr is the refusal to allocate a seq: interior corruption first, as
// dispatch.py refuses it, then a seq beyond 64 bits, where Python would go on
// with a number rewind's --seq cannot take.
func allocErr(cmd string, corrupt int, big *bigSeq) error {
	switch {
	case corrupt > 0:
		return corruptMsg(cmd, corrupt)
	case big == nil:
		return nil
	case big.last:
		return refuse("dispatch %s: seq %s on line %d of manifest.jsonl is the largest 64-bit seq — no next seq, refusing to allocate", cmd, big.lit, big.line)
	}
	return refuse("dispatch %s: seq %s on line %d of manifest.jsonl does not fit 64 bits — refusing to allocate", cmd, big.lit, big.line)
}

func corruptMsg(cmd string, n int) error {
	return refuse("dispatch %s: %d interior corrupt line(s) in manifest.jsonl — seq recovery unsafe, refusing to allocate", cmd, n)
}

// NextSeq is `dispatch seq`: the seq the next dispatch takes, 1 for a missing
// or empty manifest. It differs from dispatch.py v2, which takes the last
// line's seq + 1, in taking the highest: the two agree while seqs are appended
// in increasing order, and the highest never hands out a number twice when
// parallel dispatches complete out of order.
func NextSeq(dir string) (int64, error) {
	if err := checkOwner("seq", dir); err != nil {
		return 0, err
	}
	f, err := os.Open(filepath.Join(dir, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, refuse("dispatch seq: %v", err)
	}
	defer f.Close()
	// A shared lock: never read a line a writer is half-way through.
	if err := lockFile(f, false); err != nil {
		return 0, refuse("dispatch seq: lock %s: %v", f.Name(), bareErr(err))
	}
	next, corrupt, big, err := seqScan(f)
	if err != nil {
		// err is a *PathError that names the path already: say it once.
		return 0, refuse("dispatch seq: read %s: %v", f.Name(), bareErr(err))
	}
	if err := allocErr("seq", corrupt, big); err != nil {
		return 0, err
	}
	return next, nil
}

// appender is an open, exclusively locked manifest.
type appender struct {
	f    *os.File
	size int64
}

func openAppend(cmd, dir string) (*appender, error) {
	if err := checkOwner(cmd, dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		return nil, refuse("dispatch %s: cannot open %s: %v", cmd, path, bareErr(err))
	}
	if err := lockFile(f, true); err != nil {
		f.Close()
		return nil, refuse("dispatch %s: lock %s: %v", cmd, path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, refuse("dispatch %s: %v", cmd, err)
	}
	return &appender{f: f, size: fi.Size()}, nil
}

func (a *appender) close() { a.f.Close() } // closing releases the flock

// reader reads the manifest as it was when the lock was taken.
func (a *appender) reader() io.Reader { return io.NewSectionReader(a.f, 0, a.size) }

// append writes line and its newline in one write, first ending a torn last
// line (one without its newline) so the torn line stays a separate, skipped
// line and the new entry is intact; then fsyncs.
func (a *appender) append(line []byte) error {
	buf := make([]byte, 0, len(line)+2)
	if a.size > 0 {
		var last [1]byte
		if _, err := a.f.ReadAt(last[:], a.size-1); err != nil {
			return err
		}
		if last[0] != '\n' {
			buf = append(buf, '\n')
		}
	}
	buf = append(buf, line...)
	buf = append(buf, '\n')
	if _, err := a.f.Write(buf); err != nil {
		return err
	}
	if err := a.f.Sync(); err != nil {
		return err
	}
	if a.size == 0 {
		// A new file: make its directory entry durable too.
		return syncDir(filepath.Dir(a.f.Name()))
	}
	return nil
}

// Before is `dispatch before`: it appends d's dispatched entry and returns the
// seq it got. With auto, the seq is allocated (highest + 1) and appended in one
// locked step, so parallel dispatches never collide. warn receives dispatch.py's
// [dispatch WARN] lines.
func Before(dir string, d Dispatched, auto bool, warn io.Writer) (int64, error) {
	a, err := openAppend("before", dir)
	if err != nil {
		return 0, err
	}
	defer a.close()
	if auto {
		next, corrupt, big, err := seqScan(a.reader())
		if err != nil {
			return 0, refuse("dispatch before: read %s: %v", a.f.Name(), bareErr(err))
		}
		if err := allocErr("before", corrupt, big); err != nil {
			return 0, err
		}
		d.Seq = next
	}
	line := Fit(d.Record(), nil, warn)
	if err := a.append(line); err != nil {
		return 0, refuse("dispatch before: write %s: %v", a.f.Name(), bareErr(err))
	}
	return d.Seq, nil
}

// After is `dispatch after`: it appends the completion of seq c.Seq, copying
// the dispatch's fields from the last dispatched entry for that seq, and
// returns that entry's file as dispatch.py prints it. It refuses to fabricate a
// completion when there is no dispatched entry. Damaged lines are skipped.
func After(dir string, c Completion, warn io.Writer) (string, error) {
	if !contains(AfterStatuses, c.Status) {
		return "", &DispatchError{Usage: true, Msg: fmt.Sprintf("dispatch after: status must be one of %s", pyList(AfterStatuses))}
	}
	if err := checkOwner("after", dir); err != nil {
		return "", err
	}
	noPrev := refuse("dispatch after: no dispatched entry for seq %d — refusing to fabricate a completion record", c.Seq)
	if _, err := os.Stat(filepath.Join(dir, FileName)); errors.Is(err, fs.ErrNotExist) {
		return "", noPrev
	}
	a, err := openAppend("after", dir)
	if err != nil {
		return "", err
	}
	defer a.close()
	// The last line dispatch.py's `r.get("seq") == seq and r.get("status") ==
	// "dispatched"` picks: read as Python reads it, so "seq":1.0 and a line
	// with NaN count, and a repeated key counts by its last value.
	var prev *pyValue
	err = Scan(a.reader(), func(l *Line) error {
		v, perr := parsePy(l.Raw)
		if perr != nil {
			return nil
		}
		if v.get("seq").equalsInt(c.Seq) && v.get("status").isStr("dispatched") {
			prev = v
		}
		return nil
	})
	if err != nil {
		return "", refuse("dispatch after: read %s: %v", a.f.Name(), bareErr(err))
	}
	if prev == nil {
		return "", noPrev
	}
	line := Fit(c.Record(prev), c.Summary, warn)
	if err := a.append(line); err != nil {
		return "", refuse("dispatch after: write %s: %v", a.f.Name(), bareErr(err))
	}
	return pyStrOf(prev.get("file")), nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// pyList renders a list of strings as Python prints it: ['a', 'b'].
func pyList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = PyRepr(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// pyJoin is os.path.join(a, b).
func pyJoin(a, b string) string {
	switch {
	case strings.HasPrefix(b, "/"):
		return b
	case a == "" || strings.HasSuffix(a, "/"):
		return a + b
	}
	return a + "/" + b
}

// PyBasename is os.path.basename: the part after the last slash.
func PyBasename(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// pyNormpath is os.path.normpath for the cases that matter here.
func pyNormpath(p string) string {
	if p == "" {
		return "."
	}
	return filepath.Clean(p)
}

// bareErr drops the *PathError wrapping, for messages that name the path.
func bareErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// unwrapPath drops the *PathError wrapping so messages name the path once.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
