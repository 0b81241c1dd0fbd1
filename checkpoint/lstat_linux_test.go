package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDirStatIsLstat checks that a stat through a directory's descriptor says
// what os.Lstat says, for every kind of entry, and errs the same way.
func TestDirStatIsLstat(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "file"), "content")
	os.Chmod(filepath.Join(dir, "file"), 0o4751)
	os.Mkdir(filepath.Join(dir, "sub"), 0o1700)
	os.Symlink("file", filepath.Join(dir, "link"))
	os.Symlink("sub", filepath.Join(dir, "dirlink"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	ds := openDirStat(dir)
	defer ds.close()
	if ds.fd < 0 {
		t.Fatal("the directory was not opened")
	}
	for _, name := range []string{"file", "sub", "link", "dirlink", "fifo"} {
		full := filepath.Join(dir, name)
		want, err := os.Lstat(full)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ds.lstat(full, name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name() != want.Name() || got.Mode() != want.Mode() || got.Size() != want.Size() || !got.ModTime().Equal(want.ModTime()) ||
			got.IsDir() != want.IsDir() || !ctime(got).Equal(ctime(want)) || keyOf(got) != keyOf(want) || keyOf(got) == (statKey{}) {
			t.Errorf("%s: %v %v %d %v, os.Lstat %v %v %d %v", name, got.Name(), got.Mode(), got.Size(), got.ModTime(), want.Name(), want.Mode(), want.Size(), want.ModTime())
		}
	}
	_, err := ds.lstat(filepath.Join(dir, "gone"), "gone")
	var pe *os.PathError
	if !errors.Is(err, os.ErrNotExist) || !errors.As(err, &pe) || errText(err) != "no such file or directory" {
		t.Errorf("a missing file: %v", err)
	}
	// A directory that cannot be opened falls back to lstat of the path.
	missing := openDirStat(filepath.Join(dir, "nothing"))
	if _, err := missing.lstat(filepath.Join(dir, "nothing", "x"), "x"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("below a missing directory: %v", err)
	}
}
