package manifest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

type seen struct {
	no    int
	off   int64
	raw   string
	kind  LineKind
	seq   int64
	seqOK bool
	last  bool
	nonl  bool
}

func scanAll(t *testing.T, data string) []seen {
	t.Helper()
	var out []seen
	err := Scan(strings.NewReader(data), func(l *Line) error {
		out = append(out, seen{l.No, l.Off, string(l.Raw), l.Kind, l.Seq, l.SeqOK, l.Last, l.NoNewline})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestScanClassifies(t *testing.T) {
	data := `{"seq":1,"status":"dispatched"}` + "\n" +
		"\n   \n" +
		`{"event":"timeout-override","value":3}` + "\n" +
		`[1,2]` + "\n" +
		`{"seq":"2"}` + "\n" +
		`{"seq":2,"file":"2-a.md","sta` + "\n" + // interior damage, seq readable
		`{"se` + "\n" + // interior damage, seq unreadable
		`{"seq":1.0}` + "\n" +
		"{\"seq\":3,\"x\":\"\xff\"}\n" +
		`{"seq":12` // torn inside the number: not seq 1 or 12
	got := scanAll(t, data)
	want := []struct {
		no    int
		kind  LineKind
		seq   int64
		seqOK bool
	}{
		{1, Entry, 1, true}, {4, Other, 0, false}, {5, Other, 0, false}, {6, Other, 0, false},
		{7, Bad, 2, true}, {8, Bad, 0, false}, {9, Other, 0, false}, {10, Bad, 3, true}, {11, Bad, 0, false},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines: %+v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.no != w.no || g.kind != w.kind || g.seq != w.seq || g.seqOK != w.seqOK {
			t.Errorf("line %d: got %+v, want %+v", i, g, w)
		}
		if g.last != (i == len(want)-1) {
			t.Errorf("line %d: last = %v", i, g.last)
		}
	}
	if !got[len(got)-1].nonl || got[0].nonl {
		t.Error("NoNewline wrong")
	}
	// Offsets point at the line in the data.
	for _, g := range got {
		if !strings.HasPrefix(data[g.off:], g.raw) {
			t.Errorf("line %d: offset %d does not hold %q", g.no, g.off, g.raw)
		}
	}
}

func TestScanLastIgnoresTrailingBlankLines(t *testing.T) {
	got := scanAll(t, "{\"seq\":1}\n{\"seq\n\n  \n")
	if len(got) != 2 || !got[1].last || got[1].kind != Bad || got[1].nonl {
		t.Fatalf("got %+v", got)
	}
}

func TestScanLongLines(t *testing.T) {
	long := `{"seq":7,"summary":"` + strings.Repeat("x", 3<<20) + `"}`
	got := scanAll(t, long+"\n"+long)
	if len(got) != 2 || got[0].kind != Entry || got[1].kind != Entry || len(got[1].raw) != len(long) {
		t.Fatalf("long lines: %d lines", len(got))
	}
}

// A torn line never swallows the next one (the gjson.ForEachLine trap).
func TestScanTornLineDoesNotSwallowNext(t *testing.T) {
	got := scanAll(t, `{"seq":1,"file":"a`+"\n"+`{"seq":2,"status":"completed"}`+"\n")
	if len(got) != 2 || got[0].kind != Bad || got[1].kind != Entry || got[1].seq != 2 {
		t.Fatalf("got %+v", got)
	}
}

func TestLeadingSeq(t *testing.T) {
	for in, want := range map[string]int64{`{"seq":5,`: 5, ` { "seq" : -3 }`: -3, `{"seq":42,"file`: 42} {
		if n, ok := leadingSeq([]byte(in)); !ok || n != want {
			t.Errorf("leadingSeq(%q) = %d, %v", in, n, ok)
		}
	}
	for _, in := range []string{`{"seq":5`, `{"seq":`, `{"file":"x","seq":5,`, `{"seq":"5",`, `{"seq":5.5,`, `x{"seq":1,`} {
		if n, ok := leadingSeq([]byte(in)); ok {
			t.Errorf("leadingSeq(%q) = %d, want unreadable", in, n)
		}
	}
}

// FuzzScan: the line reader never panics, hands over every non-blank line once
// with offsets that hold it, and only valid JSON objects with an integer seq
// are entries.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"seq":1,"status":"dispatched"}` + "\n" + `{"seq":1,"status":"completed"}` + "\n"))
	f.Add([]byte("{\"seq\":2,\"sum\n\n{\"event\":\"x\"}\r\n[1]\n{\"seq\":3"))
	f.Add([]byte("\xff\xfe{\"seq\":-0}\n\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		nonBlank := 0
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				nonBlank++
			}
		}
		n, last := 0, 0
		err := Scan(bytes.NewReader(data), func(l *Line) error {
			n++
			if l.No <= last {
				return fmt.Errorf("line numbers not increasing: %d after %d", l.No, last)
			}
			last = l.No
			if !bytes.HasPrefix(data[l.Off:], l.Raw) {
				return fmt.Errorf("offset %d does not hold line %d", l.Off, l.No)
			}
			if bytes.IndexByte(l.Raw, '\n') >= 0 {
				return fmt.Errorf("line %d holds a newline", l.No)
			}
			if l.Kind == Entry {
				if !utf8.Valid(l.Raw) || !gjson.ValidBytes(l.Raw) {
					return fmt.Errorf("line %d: an invalid entry", l.No)
				}
				if s := gjson.GetBytes(l.Raw, "seq"); s.Int() != l.Seq {
					return fmt.Errorf("line %d: seq %d, line says %s", l.No, l.Seq, s.Raw)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != nonBlank {
			t.Fatalf("%d lines handed over, %d non-blank", n, nonBlank)
		}
	})
}
