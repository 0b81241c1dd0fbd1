package manifest

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// The expected bytes below were produced by Python 3's
// json.dumps(s, ensure_ascii=False, separators=(",", ":")).
var stringCases = []struct{ in, want string }{
	{"ok \xf0\x9f\x98\x80 done", "\x22ok \xf0\x9f\x98\x80 done\x22"},       // emoji
	{"e\xcc\x81 a\xcc\x88", "\x22e\xcc\x81 a\xcc\x88\x22"},                 // combining marks
	{"a\xe2\x80\xa8b\xe2\x80\xa9c", "\x22a\xe2\x80\xa8b\xe2\x80\xa9c\x22"}, // U+2028, U+2029 raw
	{"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f", "\x22\x5cu0000\x5cu0001\x5cu0002\x5cu0003\x5cu0004\x5cu0005\x5cu0006\x5cu0007\x5cb\x5ct\x5cn\x5cu000b\x5cf\x5cr\x5cu000e\x5cu000f\x5cu0010\x5cu0011\x5cu0012\x5cu0013\x5cu0014\x5cu0015\x5cu0016\x5cu0017\x5cu0018\x5cu0019\x5cu001a\x5cu001b\x5cu001c\x5cu001d\x5cu001e\x5cu001f\x7f\x22"},
	{"<a href=\x22x\x22>&amp;</a>", "\x22<a href=\x5c\x22x\x5c\x22>&amp;</a>\x22"}, // <>& unescaped
	{"C:\x5cdir\x5cf", "\x22C:\x5c\x5cdir\x5c\x5cf\x22"},
	{"\xc3\xa9\xe4\xb8\xad\xe6\x96\x87", "\x22\xc3\xa9\xe4\xb8\xad\xe6\x96\x87\x22"},
	{"\xef\xbb\xbfx", "\x22\xef\xbb\xbfx\x22"},
	{"", "\x22\x22"},
	{"tab\x09here\x0d\x0aline", "\x22tab\x5cthere\x5cr\x5cnline\x22"},
}

func TestAppendStringMatchesPython(t *testing.T) {
	for _, c := range stringCases {
		if got := string(AppendString(nil, c.in)); got != c.want {
			t.Errorf("AppendString(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAppendStringInvalidUTF8(t *testing.T) {
	if got := string(AppendString(nil, "a\xffb")); got != "\"a\ufffdb\"" {
		t.Errorf("got %q", got)
	}
}

func TestAppendFloatMatchesPython(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1, "1.0"}, {1.5, "1.5"}, {100, "100.0"},
		{1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.5e16, "1.5e+16"},
		{123456789012345678, "1.2345678901234568e+17"}, {0.0001, "0.0001"}, {0.00001, "1e-05"},
		{1e-7, "1e-07"}, {3.14159, "3.14159"}, {1e22, "1e+22"}, {1e300, "1e+300"},
		{2.5e-300, "2.5e-300"}, {5e-324, "5e-324"}, {1.0 / 3, "0.3333333333333333"},
		{12345.678, "12345.678"}, {math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"},
		{math.NaN(), "NaN"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
	}
	for _, c := range cases {
		if got := string(AppendFloat(nil, c.f)); got != c.want {
			t.Errorf("AppendFloat(%v) = %s, want %s", c.f, got, c.want)
		}
	}
}

// json.dumps(json.loads(in), ensure_ascii=False, separators=(",", ":")).
func TestAppendValueMatchesPython(t *testing.T) {
	cases := []struct{ in, want string }{
		{"{\x22a\x22:1,\x22b\x22:[1,2.50,-0,1E2,1e-5,{\x22c\x22:null}],\x22a\x22:true,\x22s\x22:\x22\x5cu00e9\x5cud83d\x5cude00\x5cu2028<>&\x22}", "{\x22a\x22:true,\x22b\x22:[1,2.5,0,100.0,1e-05,{\x22c\x22:null}],\x22s\x22:\x22\xc3\xa9\xf0\x9f\x98\x80\xe2\x80\xa8<>&\x22}"},
		{"12345678901234567890123456789", "12345678901234567890123456789"},
		{"-0", "0"},
		{"1E400", "Infinity"},
		{"[]", "[]"},
		{"{}", "{}"},
		{"\x22x\x5c/y\x22", "\x22x/y\x22"},
		{"[1.0e0, 0.1e1, 123e-2, 5E-324]", "[1.0,1.0,1.23,5e-324]"},
	}
	for _, c := range cases {
		if got := string(AppendValue(nil, gjson.Parse(c.in))); got != c.want {
			t.Errorf("AppendValue(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// FuzzAppendString: encoding then decoding gives the input back, and the
// output never holds an escape Python would not write.
func FuzzAppendString(f *testing.F) {
	for _, c := range stringCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("AppendString(%q) = %q: not JSON: %v", s, enc, err)
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if !utf8.ValidString(s) {
			// Each invalid byte becomes one U+FFFD.
			want = replaceInvalid(s)
		}
		if back != want {
			t.Fatalf("round trip of %q gave %q", s, back)
		}
		body := string(enc[1 : len(enc)-1])
		for i := 0; i < len(body); i++ {
			if body[i] < 0x20 {
				t.Fatalf("raw control byte in %q", enc)
			}
			if body[i] == '\\' {
				i++
				switch body[i] {
				case '"', '\\', 'b', 'f', 'n', 'r', 't':
				case 'u':
					if !strings.HasPrefix(body[i+1:], "00") || body[i+3] >= '2' || strings.ToLower(body[i+1:i+5]) != body[i+1:i+5] {
						t.Fatalf("escape \\u%s Python would not write, in %q", body[i+1:i+5], enc)
					}
				default:
					t.Fatalf("bad escape in %q", enc)
				}
			}
		}
	})
}

func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\ufffd")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// FuzzAppendValue: any valid JSON re-encodes to valid JSON that decodes to the
// same value; never a panic.
func FuzzAppendValue(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,2.5,{"c":null}],"s":"\u00e9"}`, `-0`, `1E400`, `[1.0e0,true,false]`, `"\ud800"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !gjson.Valid(s) || !json.Valid([]byte(s)) || !utf8.ValidString(s) {
			return
		}
		enc := AppendValue(nil, gjson.Parse(s))
		if strings.Contains(s, "e") || strings.Contains(s, "E") {
			// Out-of-range numbers become Infinity, which is Python's JSON,
			// not strict JSON; the rest must stay strict.
			if strings.Contains(string(enc), "Infinity") || strings.Contains(string(enc), "NaN") {
				return
			}
		}
		a, err := decodeNumbers([]byte(s))
		if err != nil {
			return
		}
		b, err := decodeNumbers(enc)
		if err != nil {
			t.Fatalf("AppendValue(%s) = %s: not JSON: %v", s, enc, err)
		}
		if !sameJSON(a, b) {
			t.Fatalf("AppendValue(%s) = %s: a different value", s, enc)
		}
	})
}

// sameJSON compares decoded values; strings compare after the U+FFFD
// replacement of lone surrogates both decoders do.
func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !sameJSON(v, y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if isIntLiteral(string(x)) && isIntLiteral(string(y)) {
			return strings.TrimPrefix(string(x), "-") == "0" && string(y) == "0" || x == y
		}
		fx, _ := strconv.ParseFloat(string(x), 64)
		fy, _ := strconv.ParseFloat(string(y), 64)
		return fx == fy
	default:
		return a == b
	}
}
