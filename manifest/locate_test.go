package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mkManifest(t *testing.T, dir string, mtime time.Time) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, FileName)
	if err := os.WriteFile(p, []byte(wantBefore1+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLocate(t *testing.T) {
	root := t.TempDir()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	file := mkManifest(t, filepath.Join(root, "d"), t0)
	for _, c := range []struct{ path, want, how string }{
		{file, file, "file"},
		{filepath.Join(root, "d"), file, "dispatch-dir"},
	} {
		l, err := Locate(c.path)
		if err != nil || l.Path != c.want || l.How != c.how {
			t.Errorf("Locate(%s) = %+v, %v", c.path, l, err)
		}
	}

	parent := filepath.Join(root, "parent")
	old := mkManifest(t, filepath.Join(parent, "crucible-dispatch-100"), t0)
	newer := mkManifest(t, filepath.Join(parent, "dispatch-200"), t0.Add(time.Hour))
	l, err := Locate(parent)
	if err != nil || l.Path != newer || l.How != "parent" || len(l.Candidates) != 2 || l.Candidates[1] != old || len(l.Notes) != 1 {
		t.Errorf("parent: %+v, %v", l, err)
	}

	if _, err := Locate(filepath.Join(root, "d", "nothing")); !os.IsNotExist(err) {
		t.Errorf("missing: %v", err)
	}
	os.MkdirAll(filepath.Join(root, "empty"), 0o755)
	if _, err := Locate(filepath.Join(root, "empty")); !errors.Is(err, ErrNoManifest) {
		t.Errorf("empty: %v", err)
	}
}

func TestLocateScratch(t *testing.T) {
	root := t.TempDir()
	scratch := filepath.Join(root, "scratch")
	tmp := filepath.Join(root, "tmp", "crucible-dispatch-42")
	os.MkdirAll(scratch, 0o755)
	m := &Marker{PipelineID: "42", Skill: "build", DispatchDir: tmp + "/"}
	if err := WriteMarker(scratch, m); err != nil {
		t.Fatal(err)
	}
	if _, err := Locate(scratch); !errors.Is(err, ErrNoManifest) {
		t.Errorf("neither copy: %v", err)
	}
	live := mkManifest(t, tmp, time.Now())
	l, err := Locate(scratch)
	if err != nil || l.Path != filepath.Join(tmp, FileName) || l.How != "scratch" || !strings.Contains(l.Notes[0], "no durable copy") {
		t.Errorf("live only: %+v, %v (%s)", l, err, live)
	}
	durable := mkManifest(t, filepath.Join(scratch, "crucible-dispatch-42"), time.Now())
	l, err = Locate(scratch)
	if err != nil || l.Path != durable || !strings.Contains(l.Notes[0], "durable copy") {
		t.Errorf("durable wins: %+v, %v", l, err)
	}
}
