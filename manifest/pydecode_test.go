package manifest

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParsePyReadsAsPython(t *testing.T) {
	// What json.loads gives, re-encoded as json.dumps(ensure_ascii=False,
	// separators=(",", ":")) writes it.
	cases := map[string]string{
		`{"seq":1,"seq":2}`:                          `{"seq":2}`,
		`{"a":1,"b":2,"a":3}`:                        `{"a":3,"b":2}`,
		`{"x":NaN,"y":Infinity,"z":-Infinity}`:       `{"x":NaN,"y":Infinity,"z":-Infinity}`,
		`{"seq":1.0,"n":1E2,"m":-0,"k":-0.0}`:        `{"seq":1.0,"n":100.0,"m":0,"k":-0.0}`,
		`{"big":123456789012345678901234567890}`:     `{"big":123456789012345678901234567890}`,
		`{"f":1e400,"g":2.5e-3}`:                     `{"f":Infinity,"g":0.0025}`,
		` {"s":"\u00e9\ud83d\ude00\/\t<&>"} ` + "\r": `{"s":"é😀/\t<&>"}`,
		`{"lone":"\ud800x"}`:                         `{"lone":"` + "\ufffd" + `x"}`,
		`[1,[],{},"a",true,false,null]`:              `[1,[],{},"a",true,false,null]`,
	}
	for in, want := range cases {
		v, err := parsePy([]byte(in))
		if err != nil {
			t.Errorf("parsePy(%s): %v", in, err)
			continue
		}
		if got := string(appendPy(nil, v)); got != want {
			t.Errorf("parsePy(%s) = %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{``, `{`, `{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `-`, `+1`, `nan`, `-NaN`, `infinity`,
		`{"a":1}x`, `"a` + "\x01" + `"`, `"\x"`, `"\u12"`, `"\u+123"`, `{'a':1}`, `{"a" 1}`, "\"\xff\"", `[` + strings.Repeat("[", 1001) + strings.Repeat("]", 1002)} {
		if v, err := parsePy([]byte(in)); err == nil {
			t.Errorf("parsePy(%q) = %s, want an error", in, appendPy(nil, v))
		}
	}
}

func TestPyEquality(t *testing.T) {
	line := mustPy(t, `[1,1.0,1e0,true,"1",null,NaN,1.5,9223372036854775807,9223372036854775808,9.223372036854775807e18,-9223372036854775808,-9.223372036854775808e18,false,0.0]`)
	want := []struct {
		n  int64
		eq bool
	}{{1, true}, {1, true}, {1, true}, {1, true}, {1, false}, {1, false}, {1, false}, {1, false},
		{9223372036854775807, true}, {9223372036854775807, false},
		// 9.223372036854775807e18 is the float 2**63: no int64 equals it.
		{9223372036854775807, false}, {-9223372036854775808, true}, {-9223372036854775808, true}, {0, true}, {0, true}}
	for i, w := range want {
		if got := line.items[i].equalsInt(w.n); got != w.eq {
			t.Errorf("item %d (%s) == %d: %v, want %v", i, appendPy(nil, line.items[i]), w.n, got, w.eq)
		}
	}
	if _, ok, big := line.items[9].int64Value(); ok || !big {
		t.Errorf("2**63 as int64: ok %v, big %v", ok, big)
	}
}

// FuzzParsePy checks the decoder against encoding/json: it accepts every valid
// JSON text in UTF-8, and, NaN and Infinity aside, nothing else; what it reads it
// writes back in a form it reads again to the same bytes.
func FuzzParsePy(f *testing.F) {
	for _, s := range []string{`{"seq":1,"file":"a.md","status":"dispatched"}`, `{"seq":1.0}`, `{"a":NaN,"a":-Infinity}`,
		`[1,"\ud83d\ude00",{"k":[true,null]}]`, `"\u0000"`, `-0.0e-0`, `{"x":1e999}`, `{"s":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parsePy(b)
		special := strings.Contains(string(b), "NaN") || strings.Contains(string(b), "Infinity")
		// Go's json.Valid takes invalid UTF-8 in strings; Python never sees a
		// line that is not UTF-8 (it fails decoding the file).
		valid := json.Valid(b) && utf8.Valid(b)
		if valid && err != nil && depth(b) <= maxPyDepth {
			t.Fatalf("valid JSON refused: %q", b)
		}
		if !valid && err == nil && !special {
			t.Fatalf("invalid JSON accepted: %q", b)
		}
		if err != nil {
			return
		}
		out := appendPy(nil, v)
		v2, err := parsePy(out)
		if err != nil {
			t.Fatalf("re-encoded %q does not read back: %q", b, out)
		}
		if out2 := appendPy(nil, v2); string(out2) != string(out) {
			t.Fatalf("not stable: %q -> %q -> %q", b, out, out2)
		}
	})
}

// depth is the deepest nesting of brackets in b, strings aside (roughly: for
// telling the decoder's depth limit from a bug).
func depth(b []byte) int {
	d, max, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '[' || c == '{'):
			d++
			if d > max {
				max = d
			}
		case !inStr && (c == ']' || c == '}'):
			d--
		}
	}
	return max
}
