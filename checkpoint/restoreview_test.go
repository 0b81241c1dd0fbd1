package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseRawDiff(t *testing.T) {
	z := strings.Repeat("0", 40)
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	out := ":100644 100755 " + a + " " + b + " M\x00x y\x00" +
		":040000 000000 " + a + " " + z + " D\x00dir\x00" +
		":000000 120000 " + z + " " + b + " A\x00new\nline\x00"
	got, err := parseRawDiff([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []rawChange{
		{oldMode: "100644", newMode: "100755", newID: b, status: "M", path: "x y"},
		{oldMode: "040000", newMode: "000000", newID: z, status: "D", path: "dir"},
		{oldMode: "000000", newMode: "120000", newID: b, status: "A", path: "new\nline"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{":100644 100644 x M\x00p\x00", ":100644 100644 " + a + " " + b + " M\x00", "100644 100644 " + a + " " + b + " M\x00p\x00"} {
		if _, err := parseRawDiff([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseRawDiff(f *testing.F) {
	f.Add([]byte(":100644 100644 " + strings.Repeat("a", 40) + " " + strings.Repeat("b", 40) + " M\x00p\x00"))
	f.Add([]byte(":\x00\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		changes, err := parseRawDiff(out)
		if err != nil {
			return
		}
		for _, c := range changes {
			if c.path == "" || c.status == "" {
				t.Fatalf("empty field in %+v", c)
			}
		}
	})
}

// batchCheck gives the same answer whatever pieces the output comes in, and
// keeps the content asked for, within its room.
func FuzzBatchCheck(f *testing.F) {
	f.Add("abc blob 3\nxyz\ndef missing\nghi blob 0\n\n", 1)
	f.Add("abc blob 10\n0123456789\n", 4)
	f.Add("ghi blob 0\n\nabc blob 3\nxyz\nabc blob 3\nxyz\n", 2)
	f.Fuzz(func(t *testing.T, out string, piece int) {
		keep := func() map[string][]byte { return map[string][]byte{"abc": nil, "ghi": nil} }
		whole := &batchCheck{keep: keep(), room: 5}
		_, werr := whole.Write([]byte(out))
		if piece <= 0 || piece > len(out) {
			piece = 1
		}
		parts := &batchCheck{keep: keep(), room: 5}
		var perr error
		for rest := out; len(rest) > 0 && perr == nil; {
			n := min(piece, len(rest))
			_, perr = parts.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		if (werr == nil) != (perr == nil) || (werr == nil && (whole.missing != parts.missing || !reflect.DeepEqual(whole.keep, parts.keep))) {
			t.Fatalf("whole: %q %q %v; in pieces of %d: %q %q %v", whole.missing, whole.keep, werr, piece, parts.missing, parts.keep, perr)
		}
	})
}

// batchCheck keeps the content of the objects asked for, the first time each
// comes, while room lasts.
func TestBatchCheckKeeps(t *testing.T) {
	b := &batchCheck{keep: map[string][]byte{"abc": nil, "ghi": nil, "big": nil}, room: 4}
	out := "ghi blob 0\n\nabc blob 3\nxyz\nnot blob 2\nno\nabc blob 3\nxyz\nbig blob 2\nab\ndef missing\n"
	if _, err := b.Write([]byte(out)); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"abc": []byte("xyz"), "ghi": {}, "big": nil}
	if !reflect.DeepEqual(b.keep, want) || b.missing != "def" {
		t.Errorf("kept %q, missing %q; want %q, def", b.keep, b.missing, want)
	}
}

// A restore whose object is gone from the store fails before its first write,
// naming the object.
func TestRestoreMissingObject(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a.txt"), "a\n")
	mustWrite(t, filepath.Join(wt, "b.txt"), "b\n")
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	out, err := s.git().Run(ctx, "rev-parse", "HEAD:b.txt")
	if err != nil {
		out, err = s.git().Run(ctx, "rev-parse", refName(1)+":b.txt")
	}
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	if err := os.Remove(filepath.Join(s.Dir, "objects", id[:2], id[2:])); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "b.txt"), "changed\n")
	_, err = s.Restore(ctx, "target", RestoreOptions{})
	if want := fmt.Sprintf("object %s is missing", id); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore: %v; want an error with %q", err, want)
	}
	if data, _ := os.ReadFile(filepath.Join(wt, "b.txt")); string(data) != "changed\n" {
		t.Errorf("b.txt is %q", data)
	}
	// Nothing was changed: no restore is left under way.
	if err := s.Interrupted(); err != nil {
		t.Errorf("after a restore that changed nothing: %v", err)
	}
}
