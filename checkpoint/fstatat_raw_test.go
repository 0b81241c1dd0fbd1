//go:build linux && (amd64 || arm64)

package checkpoint

import (
	"path/filepath"
	"testing"
)

// TestFstatatWaits checks that the lstat calls become ordinary ones once
// lstatWaitsMax of them waited (an ordinary one is not counted), and that
// both kinds say what os.Lstat says.
func TestFstatatWaits(t *testing.T) {
	waited := lstatWaited
	t.Cleanup(func() { lstatWaited = waited; lstatWaits.Store(0) })
	lstatWaits.Store(0)
	checkDirStatIsLstat(t) // raw calls (unless this machine made them wait)

	lstatWaited = 0 // every call waited
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "file"), "content")
	ds := openDirStat(dir)
	defer ds.close()
	for range 2 * lstatWaitsMax {
		if _, err := ds.look(dir, "file"); err != nil {
			t.Fatal(err)
		}
	}
	if got := lstatWaits.Load(); got != lstatWaitsMax+1 {
		t.Fatalf("%d calls counted as waits, want %d: the ordinary ones after the first %d are not counted", got, lstatWaitsMax+1, lstatWaitsMax+1)
	}
	checkDirStatIsLstat(t) // ordinary calls
}
