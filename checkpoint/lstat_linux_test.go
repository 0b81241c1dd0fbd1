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
func TestDirStatIsLstat(t *testing.T) { checkDirStatIsLstat(t) }

func checkDirStatIsLstat(t *testing.T) {
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
		want, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ds.look(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		if got.mode != want.Mode() || got.size != want.Size() || got.key != keyOf(want) || got.key == (statKey{}) {
			t.Errorf("%s: %v %d %v, os.Lstat %v %d %v", name, got.mode, got.size, got.key, want.Mode(), want.Size(), keyOf(want))
		}
	}
	_, err := ds.look(dir, "gone")
	var pe *os.PathError
	if !errors.Is(err, os.ErrNotExist) || !errors.As(err, &pe) || errText(err) != "no such file or directory" {
		t.Errorf("a missing file: %v", err)
	}
	// A directory that cannot be opened falls back to lstat of the path.
	missing := openDirStat(filepath.Join(dir, "nothing"))
	if _, err := missing.look(filepath.Join(dir, "nothing"), "x"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("below a missing directory: %v", err)
	}
}
