package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
)

// CountChars returns the length of the file at path in characters, as
// dispatch.py measures it: len(open(path, encoding="utf-8").read()). Python's
// text mode turns "\r\n" and a lone "\r" into "\n", so each counts as one
// character; a BOM counts as one. The error text is what Python would say
// (for dispatch.py's "[dispatch WARN] cannot read dispatch file" message).
func CountChars(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, &CharsError{msg: pyOSError(err, path), Err: err}
	}
	if pos, msg, bad := firstInvalidUTF8(data); bad {
		return 0, &CharsError{msg: fmt.Sprintf("'utf-8' codec can't decode %s in position %s", msg, pos)}
	}
	n := int64(utf8.RuneCount(data))
	// "\r\n" is one character after newline translation.
	for i := 0; i+1 < len(data); i++ {
		if data[i] == '\r' && data[i+1] == '\n' {
			n--
			i++
		}
	}
	return n, nil
}

// CharsError is a dispatch file that cannot be measured; its message is the one
// Python would print for the same failure.
type CharsError struct {
	msg string
	Err error // the underlying I/O error, nil for a decoding error
}

func (e *CharsError) Error() string { return e.msg }
func (e *CharsError) Unwrap() error { return e.Err }

// pyOSError renders an open/read error as Python's OSError str():
// "[Errno 2] No such file or directory: 'path'".
func pyOSError(err error, path string) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fmt.Sprintf("[Errno %d] %s: %s", int(errno), pyStrerror(errno), PyRepr(path))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s: %s", pe.Err, PyRepr(path))
	}
	return err.Error()
}

// pyStrerror is the C library's message for errno, as Python prints it (Go's
// own texts are lower case).
func pyStrerror(e syscall.Errno) string {
	s := e.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// PyRepr is Python's repr() of a str: single quotes unless the text holds a
// single quote and no double quote, with backslash escapes for quotes,
// backslashes and non-printable characters.
func PyRepr(s string) string {
	quote := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// firstInvalidUTF8 finds the first byte sequence Python's strict UTF-8 decoder
// rejects and describes it as Python does ("byte 0xff", "position 3: invalid
// start byte").
func firstInvalidUTF8(data []byte) (pos, msg string, bad bool) {
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r != utf8.RuneError || size > 1 {
			i += size
			continue
		}
		var need int
		lo, hi := byte(0x80), byte(0xbf)
		switch {
		case c >= 0xc2 && c <= 0xdf:
			need = 1
		case c >= 0xe0 && c <= 0xef:
			need = 2
			if c == 0xe0 {
				lo = 0xa0
			} else if c == 0xed {
				hi = 0x9f
			}
		case c >= 0xf0 && c <= 0xf4:
			need = 3
			if c == 0xf0 {
				lo = 0x90
			} else if c == 0xf4 {
				hi = 0x8f
			}
		default:
			return fmt.Sprintf("%d: invalid start byte", i), fmt.Sprintf("byte 0x%02x", c), true
		}
		// Count the valid continuation bytes that follow.
		j := 1
		for j <= need && i+j < len(data) {
			b := data[i+j]
			if j == 1 && (b < lo || b > hi) || j > 1 && (b < 0x80 || b > 0xbf) {
				break
			}
			j++
		}
		if i+j >= len(data) && j <= need {
			// The data ends inside the sequence.
			if j == 1 {
				return fmt.Sprintf("%d: unexpected end of data", i), fmt.Sprintf("byte 0x%02x", c), true
			}
			return fmt.Sprintf("%d-%d: unexpected end of data", i, i+j-1), "bytes", true
		}
		if j == 1 {
			return fmt.Sprintf("%d: invalid continuation byte", i), fmt.Sprintf("byte 0x%02x", c), true
		}
		return fmt.Sprintf("%d-%d: invalid continuation byte", i, i+j-1), "bytes", true
	}
	return "", "", false
}
