package node

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A JSON value as JavaScript holds it after JSON.parse: nil, bool, float64,
// string, []any or *Object. Strings are UTF-8, except that a lone UTF-16
// surrogate (JSON "\ud800", which JavaScript keeps) is stored as its 3-byte
// WTF-8 form, so it survives to the encoder, which writes it back as
// JSON.stringify does ("\ud800").

// Object is a JSON object. Keys keep their first position and their last
// value, as JSON.parse leaves them.
type Object struct {
	Keys []string
	Vals map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{Vals: map[string]any{}} }

// Set adds key or replaces its value, keeping its position.
func (o *Object) Set(key string, v any) {
	if _, ok := o.Vals[key]; !ok {
		o.Keys = append(o.Keys, key)
	}
	o.Vals[key] = v
}

// Get returns key's value; ok is false when the key is absent.
func (o *Object) Get(key string) (v any, ok bool) {
	v, ok = o.Vals[key]
	return v, ok
}

// ownKeys lists the keys in JavaScript's property order, which JSON.stringify
// and Object.keys follow: array-index keys ("0" to "4294967294") first, in
// numeric order, then the others in insertion order.
func (o *Object) ownKeys() []string {
	var index, other []string
	for _, k := range o.Keys {
		if isArrayIndex(k) {
			index = append(index, k)
		} else {
			other = append(other, k)
		}
	}
	if len(index) == 0 {
		return o.Keys
	}
	sort.Slice(index, func(i, j int) bool {
		if len(index[i]) != len(index[j]) {
			return len(index[i]) < len(index[j])
		}
		return index[i] < index[j]
	})
	return append(index, other...)
}

func isArrayIndex(k string) bool {
	if k == "0" {
		return true
	}
	if k == "" || len(k) > 10 || k[0] < '1' || k[0] > '9' {
		return false
	}
	n, err := strconv.ParseUint(k, 10, 64)
	return err == nil && n < 1<<32-1
}

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("invalid JSON")

// DecodeUTF8 decodes bytes as Node's Buffer.toString("utf8") does (the WHATWG
// decoder): each maximal invalid subpart becomes one U+FFFD. A BOM is kept.
func DecodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			sb.WriteByte(c)
			i++
			continue
		}
		// The WHATWG decoder's bounds for the second byte of each lead byte;
		// later bytes are always 80..BF.
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c == 0xED:
			need, hi = 2, 0x9F
		case c >= 0xE1 && c <= 0xEF:
			need = 2
		case c == 0xF0:
			need, lo = 3, 0x90
		case c == 0xF4:
			need, hi = 3, 0x8F
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		default:
			sb.WriteRune(utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(b) {
				ok = false
				break
			}
			l, h := byte(0x80), byte(0xBF)
			if k == 0 {
				l, h = lo, hi
			}
			if b[j] < l || b[j] > h {
				ok = false
				break
			}
			j++
		}
		if ok {
			sb.Write(b[i:j])
		} else {
			sb.WriteRune(utf8.RuneError)
		}
		i = j
	}
	return sb.String()
}

// ParseJSON parses data as Node's JSON.parse(fs.readFileSync(f, "utf8"))
// does: invalid UTF-8 is replaced first, numbers become float64 (a number too
// large for one is Infinity, which JSON.stringify writes as null), duplicate
// keys keep the last value.
func ParseJSON(data []byte) (any, error) {
	p := &parser{s: DecodeUTF8(data)}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i < len(p.s) {
		return nil, p.errorf("unexpected %s after the value", p.near())
	}
	return v, nil
}

// maxDepth bounds nesting, so hostile input cannot exhaust the stack.
const maxDepth = 10000

type parser struct {
	s string
	i int
}

func (p *parser) errorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s at offset %d", ErrSyntax, fmt.Sprintf(format, a...), p.i)
}

func (p *parser) near() string {
	if p.i >= len(p.s) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return strconv.QuoteRune(r)
}

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errorf("nesting deeper than %d", maxDepth)
	}
	if p.i >= len(p.s) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return false, nil
	case strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
		return nil, nil
	}
	return nil, p.errorf("unexpected %s", p.near())
}

func (p *parser) object(depth int) (any, error) {
	p.i++ // {
	o := NewObject()
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return o, nil
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.errorf("expected a string key, found %s", p.near())
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.errorf("expected ':', found %s", p.near())
		}
		p.i++
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		o.Set(k, v)
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return o, nil
		}
		return nil, p.errorf("expected ',' or '}', found %s", p.near())
	}
}

func (p *parser) array(depth int) (any, error) {
	p.i++ // [
	a := []any{}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return a, nil
		}
		return nil, p.errorf("expected ',' or ']', found %s", p.near())
	}
}

func (p *parser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, p.errorf("bad number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errorf("bad number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errorf("bad number")
		}
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, p.errorf("bad number")
	}
	return f, nil // out of range: ±Inf or 0, as JavaScript rounds it
}

func (p *parser) str() (string, error) {
	p.i++ // "
	var sb strings.Builder
	var pendingHigh rune = -1 // a \uD800-\uDBFF escape waiting for its low half
	flushHigh := func() {
		if pendingHigh >= 0 {
			sb.WriteString(encodeSurrogate(pendingHigh))
			pendingHigh = -1
		}
	}
	for {
		if p.i >= len(p.s) {
			return "", p.errorf("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			flushHigh()
			return sb.String(), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", p.errorf("unterminated string")
			}
			e := p.s[p.i+1]
			p.i += 2
			if e == 'u' {
				if p.i+4 > len(p.s) {
					return "", p.errorf("bad \\u escape")
				}
				n, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
				if err != nil {
					return "", p.errorf("bad \\u escape")
				}
				p.i += 4
				r := rune(n)
				switch {
				case r >= 0xDC00 && r <= 0xDFFF && pendingHigh >= 0:
					sb.WriteRune(0x10000 + (pendingHigh-0xD800)<<10 + (r - 0xDC00))
					pendingHigh = -1
				case r >= 0xD800 && r <= 0xDBFF:
					flushHigh()
					pendingHigh = r
				case r >= 0xDC00 && r <= 0xDFFF:
					sb.WriteString(encodeSurrogate(r))
				default:
					flushHigh()
					sb.WriteRune(r)
				}
				continue
			}
			flushHigh()
			switch e {
			case '"', '\\', '/':
				sb.WriteByte(e)
			case 'b':
				sb.WriteByte('\b')
			case 'f':
				sb.WriteByte('\f')
			case 'n':
				sb.WriteByte('\n')
			case 'r':
				sb.WriteByte('\r')
			case 't':
				sb.WriteByte('\t')
			default:
				p.i -= 2
				return "", p.errorf("bad escape")
			}
		default:
			flushHigh()
			j := p.i + 1
			for j < len(p.s) && p.s[j] != '"' && p.s[j] != '\\' && p.s[j] >= 0x20 {
				j++
			}
			sb.WriteString(p.s[p.i:j])
			p.i = j
		}
	}
}

// encodeSurrogate is the WTF-8 form of a lone surrogate code unit.
func encodeSurrogate(r rune) string {
	return string([]byte{0xE0 | byte(r>>12), 0x80 | byte(r>>6)&0x3F, 0x80 | byte(r)&0x3F})
}

// decodeUnit reads one character of a WTF-8 string: a rune, or a lone
// surrogate (returned as its code unit, with surrogate set).
func decodeUnit(s string) (r rune, size int, surrogate bool) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF {
		return rune(s[0]&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3, true
	}
	r, size = utf8.DecodeRuneInString(s)
	return r, size, false
}

// CompareUTF16 orders strings as JavaScript's default sort does: by UTF-16
// code units (so U+10000 and above sort before U+E000..U+FFFF).
func CompareUTF16(a, b string) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na, _ := decodeUnit(a)
		rb, nb, _ := decodeUnit(b)
		if ra != rb {
			ua, la := utf16Units(ra)
			ub, lb := utf16Units(rb)
			if ua != ub {
				return cmpRune(ua, ub)
			}
			return cmpRune(la, lb)
		}
		a, b = a[na:], b[nb:]
	}
	return cmpRune(rune(len(a)), rune(len(b)))
}

func utf16Units(r rune) (first, second rune) {
	if r < 0x10000 {
		return r, -1
	}
	r -= 0x10000
	return 0xD800 + r>>10, 0xDC00 + r&0x3FF
}

func cmpRune(a, b rune) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AppendString appends s as JSON.stringify writes a string: only '"', '\\'
// and control characters are escaped (\b \f \n \r \t short, the rest as
// lowercase \u00XX), and lone surrogates as \udXXX.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			dst = append(dst, c)
			i++
			continue
		}
		if c < 0x80 {
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
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			continue
		}
		r, n, surrogate := decodeUnit(s[i:])
		switch {
		case surrogate:
			dst = append(dst, '\\', 'u', hexDigits[r>>12], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
		case r == utf8.RuneError && n == 1:
			dst = utf8.AppendRune(dst, utf8.RuneError) // not from ParseJSON; Node would read U+FFFD
		default:
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// NumberString formats f as JavaScript's Number.prototype.toString does.
func NumberString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// Shortest round-trip digits and the decimal exponent n (value = 0.d * 10^n).
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	k, n := len(digits), exp+1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	es := "+"
	if n-1 < 0 {
		es = "-"
	}
	m := digits[:1]
	if k > 1 {
		m += "." + digits[1:]
	}
	return sign + m + "e" + es + strconv.Itoa(abs(n-1))
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// ToString is JavaScript's String(v) for a JSON value.
func ToString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		return NumberString(x)
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if e != nil {
				parts[i] = ToString(e)
			}
		}
		return strings.Join(parts, ",")
	case *Object:
		return "[object Object]"
	}
	return fmt.Sprint(v)
}

// truthy is JavaScript's Boolean(v) for a JSON value.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	}
	return true
}

// AppendCompact appends v as JSON.stringify(v) writes it (keys in the
// object's order).
func AppendCompact(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		if x {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return append(dst, "null"...)
		}
		return append(dst, NumberString(x)...)
	case string:
		return AppendString(dst, x)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendCompact(dst, e)
		}
		return append(dst, ']')
	case *Object:
		dst = append(dst, '{')
		for i, k := range x.ownKeys() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			dst = AppendCompact(dst, x.Vals[k])
		}
		return append(dst, '}')
	}
	panic(fmt.Sprintf("node: not a JSON value: %T", v))
}

// Pretty is JSON.stringify(v, null, 2) + "\n": the bytes cool-workflow writes
// and prints.
func Pretty(v any) []byte {
	return append(appendPretty(nil, v, ""), '\n')
}

func appendPretty(dst []byte, v any, indent string) []byte {
	inner := indent + "  "
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return append(dst, "[]"...)
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '\n')
			dst = append(dst, inner...)
			dst = appendPretty(dst, e, inner)
		}
		dst = append(dst, '\n')
		dst = append(dst, indent...)
		return append(dst, ']')
	case *Object:
		if len(x.Keys) == 0 {
			return append(dst, "{}"...)
		}
		dst = append(dst, '{')
		for i, k := range x.ownKeys() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '\n')
			dst = append(dst, inner...)
			dst = AppendString(dst, k)
			dst = append(dst, ": "...)
			dst = appendPretty(dst, x.Vals[k], inner)
		}
		dst = append(dst, '\n')
		dst = append(dst, indent...)
		return append(dst, '}')
	}
	return AppendCompact(dst, v)
}
