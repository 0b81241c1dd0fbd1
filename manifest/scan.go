package manifest

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// LineKind classifies a manifest line.
type LineKind uint8

const (
	// Entry is a JSON object with an integer seq: a dispatch entry.
	Entry LineKind = iota
	// Other is valid JSON that is not a dispatch entry: another schema's row
	// (an {"event": ...} line, a receipt fixture) or a value that is not an object.
	Other
	// Bad is a line that is not valid JSON (or not UTF-8): a torn or corrupt write.
	Bad
)

// Line is one non-blank line of a manifest, as Scan hands it over.
type Line struct {
	No   int    // 1-based line number in the file
	Off  int64  // byte offset of the line's first byte
	Raw  []byte // the line without its newline; valid only during the callback
	Kind LineKind
	// Seq is an Entry's seq. For a Bad line, SeqOK tells whether a complete
	// leading {"seq":N is still readable, and Seq is that N.
	Seq   int64
	SeqOK bool
	Why   string // for Other and Bad lines: why it is not an entry
	// Last is set on a Bad line that is the last non-blank line of the file
	// (a torn write). It is not set on other lines.
	Last bool
	// NoNewline is set when the file ends inside this line (no final newline).
	NoNewline bool
}

// Torn reports whether the line is a bad last line: a write cut short.
func (l *Line) Torn() bool { return l.Kind == Bad && l.Last }

// bstr views b as a string without copying. The string must not outlive the
// next change of b.
func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Scan reads a manifest line by line and calls fn for every non-blank line,
// classified. It never uses gjson.ForEachLine: that runs a torn line into the
// next one. Lines may be of any length. Blank (whitespace-only) lines are
// skipped, as dispatch.py skips them, but they still count in line numbers.
// An error returned by fn stops the scan and is returned.
//
// A bad line is handed over only once it is known whether another non-blank
// line follows (Last); good lines are handed over at once, straight from the
// read buffer, so reading costs no copy per line.
func Scan(r io.Reader, fn func(*Line) error) error {
	br := bufio.NewReaderSize(r, 256<<10)
	var long []byte   // a line longer than the read buffer, assembled
	var badBuf []byte // the held bad line's bytes
	var held Line     // a bad line waiting to learn whether it is the last
	holding := false
	var off int64
	no := 0
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], b...)
			for err == bufio.ErrBufferFull {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if err != nil && err != io.EOF {
			return err
		}
		if len(b) == 0 && err == io.EOF {
			break
		}
		no++
		start := off
		off += int64(len(b))
		noNewline := true
		if b[len(b)-1] == '\n' {
			b = b[:len(b)-1]
			noNewline = false
		}
		if len(bytes.TrimSpace(b)) > 0 {
			if holding {
				holding = false
				if e := fn(&held); e != nil {
					return e
				}
			}
			l := Line{No: no, Off: start, Raw: b, NoNewline: noNewline}
			classify(&l)
			if l.Kind == Bad {
				badBuf = append(badBuf[:0], b...)
				l.Raw = badBuf
				held, holding = l, true
			} else {
				// Last is only known for bad lines; no caller needs it for good ones.
				if e := fn(&l); e != nil {
					return e
				}
			}
		}
		if err == io.EOF {
			break
		}
	}
	if holding {
		held.Last = true
		return fn(&held)
	}
	return nil
}

// classify sets Kind, Seq, SeqOK and Why.
func classify(l *Line) {
	raw := l.Raw
	if !utf8.Valid(raw) {
		l.Kind, l.Why = Bad, "not valid UTF-8"
		l.Seq, l.SeqOK = leadingSeq(raw)
		return
	}
	if !gjson.ValidBytes(raw) {
		l.Kind, l.Why = Bad, "invalid JSON"
		l.Seq, l.SeqOK = leadingSeq(raw)
		return
	}
	s := bstr(raw)
	if first := firstByte(raw); first != '{' {
		l.Kind, l.Why = Other, "not a JSON object"
		return
	}
	seq := gjson.Get(s, "seq")
	n, ok := intValue(seq)
	if !ok {
		l.Kind = Other
		switch {
		case !seq.Exists():
			l.Why = `not a dispatch entry (no "seq")`
		default:
			l.Why = `not a dispatch entry ("seq" is not an integer)`
		}
		return
	}
	l.Kind, l.Seq, l.SeqOK = Entry, n, true
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// intValue returns a JSON integer (no fraction, no exponent, within int64).
// Python's dispatch.py takes `true` as 1 too (bool is an int there); rewind
// does not.
func intValue(r gjson.Result) (int64, bool) {
	if r.Type != gjson.Number || !isIntLiteral(r.Raw) {
		return 0, false
	}
	n, err := strconv.ParseInt(r.Raw, 10, 64)
	return n, err == nil
}

// leadingSeq reads a complete leading {"seq":N from a damaged line: N must be
// followed by a comma or a closing brace, so a line torn inside the number is
// not mistaken for a shorter seq.
func leadingSeq(b []byte) (int64, bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skipWS(b, i+1)
	const key = `"seq"`
	if !bytes.HasPrefix(b[i:], []byte(key)) {
		return 0, false
	}
	i = skipWS(b, i+len(key))
	if i >= len(b) || b[i] != ':' {
		return 0, false
	}
	i = skipWS(b, i+1)
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	digits := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == digits {
		return 0, false
	}
	k := skipWS(b, j)
	if k >= len(b) || (b[k] != ',' && b[k] != '}') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
