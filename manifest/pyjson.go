package manifest

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// This file is the Python-compatible JSON encoder: the bytes Python's
// json.dumps(obj, ensure_ascii=False, separators=(",", ":")) writes. Go's
// encoding/json differs (it escapes <, >, &, U+2028 and U+2029, and formats
// floats its own way), so manifest lines are written by hand.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string the way Python writes it with
// ensure_ascii=False: non-ASCII characters (U+2028 and U+2029 included) raw,
// <, > and & unescaped, \b \f \n \r \t as short escapes, other control
// characters as lowercase \u00XX, DEL raw. Invalid UTF-8 is replaced by U+FFFD
// (Python cannot write it at all: it fails encoding the line).
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendFloat appends f as Python's repr(float) writes it (json.dumps uses
// float.__repr__): the shortest digits that round-trip, fixed notation when
// the decimal exponent is in [-4, 16), else d.ddde+XX; a fixed number always
// has a ".0"; NaN and the infinities as Python's json writes them.
func AppendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // "-d.ddde+XX"
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	if neg {
		dst = append(dst, '-')
	}
	if exp < -4 || exp >= 16 {
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	point := exp + 1 // digits before the decimal point
	switch {
	case point <= 0:
		dst = append(dst, '0', '.')
		for i := 0; i < -point; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	case point >= len(digits):
		dst = append(dst, digits...)
		for i := len(digits); i < point; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, '.', '0')
	default:
		dst = append(dst, digits[:point]...)
		dst = append(dst, '.')
		dst = append(dst, digits[point:]...)
	}
	return dst
}

// AppendValue appends a JSON value read by gjson the way Python writes it
// after json.loads: strings re-escaped, integers as integers (of any size),
// other numbers as Python floats, objects with a repeated key keeping the first
// position and the last value, as a Python dict does. The value must be valid
// JSON (check with gjson.Valid first).
func AppendValue(dst []byte, v gjson.Result) []byte {
	switch v.Type {
	case gjson.Null:
		return append(dst, "null"...)
	case gjson.False:
		return append(dst, "false"...)
	case gjson.True:
		return append(dst, "true"...)
	case gjson.String:
		return AppendString(dst, v.Str)
	case gjson.Number:
		return appendNumber(dst, v.Raw)
	}
	if v.IsArray() {
		dst = append(dst, '[')
		first := true
		v.ForEach(func(_, e gjson.Result) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = AppendValue(dst, e)
			return true
		})
		return append(dst, ']')
	}
	if v.IsObject() {
		var keys []string
		vals := map[string]gjson.Result{}
		v.ForEach(func(k, e gjson.Result) bool {
			if _, seen := vals[k.Str]; !seen {
				keys = append(keys, k.Str)
			}
			vals[k.Str] = e
			return true
		})
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			dst = AppendValue(dst, vals[k])
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

// appendNumber writes a JSON number literal as Python re-writes it: an integer
// literal stays as it is (Python ints have no size limit; -0 becomes 0), any
// other becomes a Python float.
func appendNumber(dst []byte, raw string) []byte {
	if isIntLiteral(raw) {
		if raw == "-0" {
			return append(dst, '0')
		}
		return append(dst, raw...)
	}
	f, _ := strconv.ParseFloat(raw, 64) // out of range gives ±Inf, as in Python
	return AppendFloat(dst, f)
}

// isIntLiteral reports whether a JSON number literal has neither a fraction nor
// an exponent, which is what makes json.loads return an int.
func isIntLiteral(raw string) bool {
	return raw != "" && !strings.ContainsAny(raw, ".eE")
}

// Record is one manifest line under construction: keys in the order they are
// set, each value already encoded as Python writes it.
type Record struct {
	keys []string
	vals [][]byte
}

// Set sets key to the encoded value v, in place when the key exists, else at
// the end.
func (r *Record) Set(key string, v []byte) {
	for i, k := range r.keys {
		if k == key {
			r.vals[i] = v
			return
		}
	}
	r.keys = append(r.keys, key)
	r.vals = append(r.vals, v)
}

// Get returns the encoded value of key.
func (r *Record) Get(key string) ([]byte, bool) {
	for i, k := range r.keys {
		if k == key {
			return r.vals[i], true
		}
	}
	return nil, false
}

// Keys lists the keys in order.
func (r *Record) Keys() []string { return append([]string(nil), r.keys...) }

// Bytes is the record as one compact JSON object, without a newline.
func (r *Record) Bytes() []byte {
	n := 2
	for i := range r.keys {
		n += len(r.keys[i]) + len(r.vals[i]) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range r.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = append(b, ':')
		b = append(b, r.vals[i]...)
	}
	return append(b, '}')
}

// Encoded values for Record.Set.

// Null is JSON null.
func Null() []byte { return []byte("null") }

// Str encodes s.
func Str(s string) []byte { return AppendString(nil, s) }

// Int encodes n.
func Int(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// StrPtr encodes *s, or null.
func StrPtr(s *string) []byte {
	if s == nil {
		return Null()
	}
	return Str(*s)
}

// IntPtr encodes *n, or null.
func IntPtr(n *int64) []byte {
	if n == nil {
		return Null()
	}
	return Int(*n)
}
