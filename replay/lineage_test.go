package replay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBlobID(t *testing.T) {
	// `printf 'hello\n' | git hash-object --stdin`, and with --object-format=sha256.
	if got := BlobID([]byte("hello\n"), 40); got != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Errorf("sha1 blob id = %s", got)
	}
	if got := BlobID([]byte("hello\n"), 64); got != "2cf8d83d9ee29543b34a87727421fdecb7e3f3a183d337639025de576db9ebb4" {
		t.Errorf("sha256 blob id = %s", got)
	}
}

func TestParseDiffTree(t *testing.T) {
	z := "0000000000000000000000000000000000000000"
	out := ":000000 100644 " + z + " ce013625030ba8dba906f756967f9e9ca394464a A\x00new file.go\x00" +
		":100644 000000 ce013625030ba8dba906f756967f9e9ca394464a " + z + " D\x00gone.go\x00"
	got, err := ParseDiffTree([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (FileChange{Path: "new file.go", Mode: "100644", Blob: "ce013625030ba8dba906f756967f9e9ca394464a"}) ||
		got[1] != (FileChange{Path: "gone.go", Mode: "000000", Blob: z}) {
		t.Errorf("%+v", got)
	}
	for _, bad := range []string{"garbage\x00x\x00", ":100644 100644 a b M\x00"} {
		if _, err := ParseDiffTree([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseDiffTree(f *testing.F) {
	f.Add([]byte(":000000 100644 0000 ce01 A\x00a.go\x00"))
	f.Add([]byte(":100644 000000 ce01 0000 D\x00\x00\x00"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, out []byte) {
		changes, err := ParseDiffTree(out)
		if err != nil && changes != nil {
			t.Errorf("changes returned with an error")
		}
		for _, c := range changes {
			if strings.ContainsRune(c.Path, 0) {
				t.Errorf("path %q holds a NUL", c.Path)
			}
		}
	})
}

// TestLineage checks the lineage rule: a redo that committed nothing is
// verified by the crashed attempt's commit only while that commit's changes
// are all in the work tree.
func TestLineage(t *testing.T) {
	top := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(top, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes := map[string][]FileChange{
		"aaaa1111": {{Path: "ast.go", Mode: "100644", Blob: BlobID([]byte("package p // ast\n"), 40)},
			{Path: "old.go", Mode: "000000", Blob: "0000000000000000000000000000000000000000"}},
	}
	ev := &LineageEvidence{Top: top, Changes: func(id string) ([]FileChange, error) {
		if c, ok := changes[id]; ok {
			return c, nil
		}
		return nil, errors.New("no such commit")
	}}
	dur := 60
	original := Attempt{Seq: 4, Role: "implementer", Task: intp(3), Status: "completed", Time: at(10), Duration: &dur, Summary: "Task 3 done: ast"}
	redo := Attempt{Seq: 6, Role: "implementer", Task: intp(3), Status: "completed", Time: at(60), Duration: &dur, ReplayOf: intp(4)}
	lineage := Dispatch{Attempts: []Attempt{original, redo}}
	v := &Verification{Kinds: DefaultRoleKinds(), Lineage: ev,
		Commits: []Commit{{ID: "aaaa1111", Time: at(11), Message: "task-3: add the ast"}}}

	write("ast.go", "package p // ast\n")
	f := v.Verify(lineage, redo)
	if want := "commit aaaa1111 names task 3 (seq 4, replayed by seq 6), and its changes are in the work tree"; !f.OK || f.Detail != want {
		t.Errorf("same content, nothing committed: %+v, want ok: %s", f, want)
	}
	if f := v.Verify(Dispatch{Attempts: []Attempt{redo}}, redo); f.OK {
		t.Errorf("a dispatch without an earlier attempt was verified by another's commit: %+v", f)
	}
	write("ast.go", "package p // something else\n")
	if f := v.Verify(lineage, redo); f.OK || !strings.HasPrefix(f.Detail, "no commit from") {
		t.Errorf("changed content: %+v, want not verified by the redo's own window", f)
	}
	write("ast.go", "package p // ast\n")
	write("old.go", "back again\n")
	if f := v.Verify(lineage, redo); f.OK {
		t.Errorf("a file the commit deleted is back: %+v, want not verified", f)
	}
	os.Remove(filepath.Join(top, "old.go"))
	os.Remove(filepath.Join(top, "ast.go"))
	if f := v.Verify(lineage, redo); f.OK {
		t.Errorf("the commit's file is gone (restored away): %+v, want not verified", f)
	}
	write("ast.go", "package p // ast\n")
	v.Commits = append(v.Commits, Commit{ID: "bbbb2222", Time: at(61), Message: "task 3: the ast again"})
	if f := v.Verify(lineage, redo); !f.OK || f.Detail != "commit bbbb2222 names task 3" {
		t.Errorf("the redo's own commit comes first: %+v", f)
	}
	v.Commits, v.Lineage = v.Commits[:1], nil
	if f := v.Verify(lineage, redo); f.OK {
		t.Errorf("without lineage evidence: %+v, want not verified", f)
	}
}
