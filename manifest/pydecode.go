package manifest

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the Python-compatible JSON decoder: a manifest line read as
// dispatch.py's json.loads reads it, where that differs from strict JSON (and
// from gjson): NaN, Infinity and -Infinity are numbers, a repeated key keeps
// its first position and its last value (a Python dict), integers have no size
// limit, and 1.0 equals 1. The `dispatch` commands read lines with it, so they
// take the same entries dispatch.py takes.

// pyKind is the Python type json.loads gives a JSON value.
type pyKind uint8

const (
	kindNone pyKind = iota
	kindBool
	kindInt
	kindFloat
	kindStr
	kindList
	kindDict
)

// pyValue is one decoded value.
type pyValue struct {
	kind  pyKind
	b     bool
	num   string  // kindInt: the literal, any size ("-0" kept as written)
	f     float64 // kindFloat
	s     string  // kindStr
	items []*pyValue
	keys  []string // kindDict: in first-appearance order
	vals  map[string]*pyValue
}

// get is d.get(key) of a dict: nil when absent (or when v is no dict).
func (v *pyValue) get(key string) *pyValue {
	if v == nil || v.kind != kindDict {
		return nil
	}
	return v.vals[key]
}

// isStr reports whether v is the string s (Python's v == s).
func (v *pyValue) isStr(s string) bool { return v != nil && v.kind == kindStr && v.s == s }

// int64Value is v as a Python int (bool included: True is 1) when it is one
// and fits 64 bits. big reports an int that does not fit.
func (v *pyValue) int64Value() (n int64, ok, big bool) {
	if v == nil {
		return 0, false, false
	}
	switch v.kind {
	case kindBool:
		if v.b {
			return 1, true, false
		}
		return 0, true, false
	case kindInt:
		n, err := strconv.ParseInt(v.num, 10, 64)
		if err != nil {
			return 0, false, true
		}
		return n, true, false
	}
	return 0, false, false
}

// equalsInt is Python's v == n for an int n: true for the int n, for True
// when n is 1 (False when 0), and for a float of exactly that value (1.0,
// 1e0); never for NaN, a string or None.
func (v *pyValue) equalsInt(n int64) bool {
	if v == nil {
		return false
	}
	if v.kind == kindFloat {
		f := v.f
		// float64(1<<63) is the first float beyond int64.
		if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return false
		}
		return int64(f) == n
	}
	m, ok, _ := v.int64Value()
	return ok && m == n
}

// errPyJSON is a line json.loads refuses (a JSONDecodeError).
var errPyJSON = errors.New("invalid JSON")

// maxPyDepth bounds nesting; deeper, Python itself fails (RecursionError).
const maxPyDepth = 1000

// parsePy decodes b as Python's json.loads(b.decode("utf-8")) does, or fails.
func parsePy(b []byte) (*pyValue, error) {
	if !utf8.Valid(b) {
		return nil, errPyJSON
	}
	d := pyDecoder{s: bstr(b)}
	d.ws()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i != len(d.s) {
		return nil, errPyJSON // "Extra data"
	}
	return v, nil
}

type pyDecoder struct {
	s string
	i int
}

// ws skips JSON whitespace: Python's [ \t\n\r]*.
func (d *pyDecoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *pyDecoder) lit(word string) bool {
	if strings.HasPrefix(d.s[d.i:], word) {
		d.i += len(word)
		return true
	}
	return false
}

// value decodes one value at d.i, in the order Python's scanner tries them.
func (d *pyDecoder) value(depth int) (*pyValue, error) {
	if d.i >= len(d.s) {
		return nil, errPyJSON
	}
	if depth > maxPyDepth {
		return nil, errPyJSON
	}
	switch c := d.s[d.i]; {
	case c == '"':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return &pyValue{kind: kindStr, s: s}, nil
	case c == '{':
		return d.dict(depth)
	case c == '[':
		return d.list(depth)
	case d.lit("null"):
		return &pyValue{kind: kindNone}, nil
	case d.lit("true"):
		return &pyValue{kind: kindBool, b: true}, nil
	case d.lit("false"):
		return &pyValue{kind: kindBool}, nil
	}
	if v := d.number(); v != nil {
		return v, nil
	}
	switch {
	case d.lit("NaN"):
		return &pyValue{kind: kindFloat, f: math.NaN()}, nil
	case d.lit("Infinity"):
		return &pyValue{kind: kindFloat, f: math.Inf(1)}, nil
	case d.lit("-Infinity"):
		return &pyValue{kind: kindFloat, f: math.Inf(-1)}, nil
	}
	return nil, errPyJSON
}

// number matches Python's -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)? at d.i, ASCII
// digits only (as the C scanner has it); nil when nothing matches.
func (d *pyDecoder) number() *pyValue {
	s, i := d.s, d.i
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	start := i
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return nil
	}
	isFloat := false
	if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
		i++
		digits()
		isFloat = true
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			i = j // the exponent is not part of the number
		} else {
			isFloat = true
		}
	}
	lit := s[start:i]
	d.i = i
	if !isFloat {
		return &pyValue{kind: kindInt, num: lit}
	}
	f, _ := strconv.ParseFloat(lit, 64) // out of range is ±Inf, as Python's float()
	return &pyValue{kind: kindFloat, f: f}
}

// str decodes a string at d.i (on its opening quote) as Python's strict
// scanner does: no raw control characters, the JSON escapes, surrogate pairs
// joined. A lone surrogate, which Python keeps but cannot write as UTF-8,
// becomes U+FFFD.
func (d *pyDecoder) str() (string, error) {
	s := d.s
	i := d.i + 1
	var b strings.Builder
	for {
		j := i
		for j < len(s) && s[j] != '"' && s[j] != '\\' && s[j] >= 0x20 {
			j++
		}
		b.WriteString(s[i:j])
		if j >= len(s) || s[j] < 0x20 {
			return "", errPyJSON // unterminated, or a control character
		}
		if s[j] == '"' {
			d.i = j + 1
			return b.String(), nil
		}
		if j+1 >= len(s) {
			return "", errPyJSON
		}
		esc := s[j+1]
		i = j + 2
		switch esc {
		case '"', '\\', '/':
			b.WriteByte(esc)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s, i)
			if !ok {
				return "", errPyJSON
			}
			i += 4
			if utf16.IsSurrogate(r) && r < 0xdc00 && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if r2, ok := hex4(s, i+2); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
					r = utf16.DecodeRune(r, r2)
					i += 6
				}
			}
			if utf16.IsSurrogate(r) {
				r = utf8.RuneError
			}
			b.WriteRune(r)
		default:
			return "", errPyJSON
		}
	}
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s[i:i+4], 16, 32)
	if err != nil || strings.ContainsAny(s[i:i+4], "+-") {
		return 0, false
	}
	return rune(n), true
}

func (d *pyDecoder) dict(depth int) (*pyValue, error) {
	v := &pyValue{kind: kindDict, vals: map[string]*pyValue{}}
	d.i++ // {
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return v, nil
	}
	for {
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, errPyJSON
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.ws()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, errPyJSON
		}
		d.i++
		d.ws()
		e, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if _, seen := v.vals[k]; !seen {
			v.keys = append(v.keys, k)
		}
		v.vals[k] = e
		d.ws()
		if d.i >= len(d.s) {
			return nil, errPyJSON
		}
		switch d.s[d.i] {
		case '}':
			d.i++
			return v, nil
		case ',':
			d.i++
			d.ws()
		default:
			return nil, errPyJSON
		}
	}
}

func (d *pyDecoder) list(depth int) (*pyValue, error) {
	v := &pyValue{kind: kindList}
	d.i++ // [
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return v, nil
	}
	for {
		e, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.items = append(v.items, e)
		d.ws()
		if d.i >= len(d.s) {
			return nil, errPyJSON
		}
		switch d.s[d.i] {
		case ']':
			d.i++
			return v, nil
		case ',':
			d.i++
			d.ws()
		default:
			return nil, errPyJSON
		}
	}
}

// appendPy appends v as Python's json.dumps(ensure_ascii=False,
// separators=(",", ":")) writes it.
func appendPy(dst []byte, v *pyValue) []byte {
	switch v.kind {
	case kindNone:
		return append(dst, "null"...)
	case kindBool:
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kindInt:
		return appendNumber(dst, v.num)
	case kindFloat:
		return AppendFloat(dst, v.f)
	case kindStr:
		return AppendString(dst, v.s)
	case kindList:
		dst = append(dst, '[')
		for i, e := range v.items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPy(dst, e)
		}
		return append(dst, ']')
	}
	dst = append(dst, '{')
	for i, k := range v.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		dst = appendPy(dst, v.vals[k])
	}
	return append(dst, '}')
}

// pyStrOf is Python's str() of v, as dispatch.py's f-strings print values.
func pyStrOf(v *pyValue) string {
	if v == nil {
		return "None"
	}
	if v.kind == kindStr {
		return v.s
	}
	return pyRepr(v)
}

// pyRepr is Python's repr() of v.
func pyRepr(v *pyValue) string {
	switch v.kind {
	case kindNone:
		return "None"
	case kindBool:
		if v.b {
			return "True"
		}
		return "False"
	case kindInt:
		return string(appendNumber(nil, v.num))
	case kindFloat:
		switch {
		case math.IsNaN(v.f):
			return "nan"
		case math.IsInf(v.f, 1):
			return "inf"
		case math.IsInf(v.f, -1):
			return "-inf"
		}
		return string(AppendFloat(nil, v.f))
	case kindStr:
		return PyRepr(v.s)
	case kindList:
		parts := make([]string, len(v.items))
		for i, e := range v.items {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	parts := make([]string, len(v.keys))
	for i, k := range v.keys {
		parts[i] = PyRepr(k) + ": " + pyRepr(v.vals[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
