package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestFileGoneBeforeHashNotCached: a changed file the walk saw, removed
// before update-index hashes it (which then drops it from the index), must
// not stay in the stat cache as the index holding it: else, once it is back,
// every later capture takes it as unchanged (git's diff-files cannot name a
// path the index lacks) and no checkpoint holds it.
func TestFileGoneBeforeHashNotCached(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := settledStore(t, tenFiles(t))
	defer func(n int64) { heldBytesMax = n }(heldBytesMax)
	heldBytesMax = 0 // the files are hashed by update-index, not held
	p := filepath.Join(wt, "d1/f4.txt")
	mustWrite(t, p, "changed\n")
	nextSecond()
	s.Progress = func(step string, done, total int) {
		if step == "hashing files" {
			os.Remove(p) // after the walk, before update-index reads the path
		}
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "gone meanwhile", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	s.Progress = nil
	s.cacheWrites.Wait()
	mustWrite(t, p, "back again\n")
	nextSecond()
	made, err := s.Create(ctx, CreateOptions{Reason: "back", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if want := freshTree(t, wt); made.Checkpoint.Tree != want {
		t.Fatalf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
	}
}
