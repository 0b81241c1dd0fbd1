package manifest

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

func TestCountChars(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		data string
		want int64
	}{
		{"", 0},
		{"hello\n", 6},
		{"a\r\nb\rc\n\xef\xbb\xbfd", 8}, // \r\n and lone \r count 1; BOM counts 1 (Python: 8)
		{"é😀e\u0301", 4},
		{"\r\r\n\n", 3},
	}
	for i, c := range cases {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := CountChars(p)
		if err != nil || got != c.want {
			t.Errorf("case %d %q: got %d, %v; want %d", i, c.data, got, err, c.want)
		}
	}
}

// The messages are Python's, for the same files.
func TestCountCharsErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ data, want string }{
		{"\xff", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"},
		{"ab\xe2\x82", "'utf-8' codec can't decode bytes in position 2-3: unexpected end of data"},
		{"\xe2\x82A", "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte"},
		{"\xe2A", "'utf-8' codec can't decode byte 0xe2 in position 0: invalid continuation byte"},
		{"\xe2", "'utf-8' codec can't decode byte 0xe2 in position 0: unexpected end of data"},
		{"\xed\xa0\x80", "'utf-8' codec can't decode byte 0xed in position 0: invalid continuation byte"},
		{"\xf0\x9f\x98", "'utf-8' codec can't decode bytes in position 0-2: unexpected end of data"},
		{"\xc0\x80", "'utf-8' codec can't decode byte 0xc0 in position 0: invalid start byte"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := CountChars(p)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: got %v, want %s", c.data, err, c.want)
		}
	}
	_, err := CountChars(filepath.Join(dir, "nonexistent"))
	if want := "[Errno 2] No such file or directory: '" + filepath.Join(dir, "nonexistent") + "'"; err == nil || err.Error() != want {
		t.Errorf("missing: got %v, want %s", err, want)
	}
	_, err = CountChars(dir)
	if want := "[Errno 21] Is a directory: '" + dir + "'"; err == nil || err.Error() != want {
		t.Errorf("directory: got %v, want %s", err, want)
	}
}

func TestPyRepr(t *testing.T) {
	for in, want := range map[string]string{"a": "'a'", "it's": `"it's"`, `'"`: `'\'"'`, "a\nb": `'a\nb'`, `c:\x`: `'c:\\x'`, "é": "'é'"} {
		if got := PyRepr(in); got != want {
			t.Errorf("PyRepr(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzFirstInvalidUTF8: the decoder's verdict agrees with utf8.Valid, and never
// panics.
func FuzzFirstInvalidUTF8(f *testing.F) {
	for _, s := range []string{"ok", "\xff", "ab\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", "é😀"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, bad := firstInvalidUTF8(data)
		if bad == utf8.Valid(data) {
			t.Fatalf("firstInvalidUTF8(%q) = %v, utf8.Valid = %v", data, bad, utf8.Valid(data))
		}
	})
}
