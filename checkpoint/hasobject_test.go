package checkpoint

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHasObject: every object git lists in the store is found, loose or
// packed (before and after a repack into one pack), and ids it does not hold
// are not; a pack index that is not git's version 2 says no.
func TestHasObject(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	for step := 0; step < 4; step++ {
		for i := 0; i < 30; i++ {
			mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%d.txt", i%5, i)), fmt.Sprintf("step %d file %d\n", step, i*step))
		}
		if _, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("step ", step), Source: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	all := func() []string {
		out, err := s.git().Run(ctx, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(out))
	}
	absent := make([]string, 200)
	for i := range absent {
		sum := sha1.Sum([]byte(fmt.Sprint("no such object ", i)))
		absent[i] = hex.EncodeToString(sum[:])
	}
	check := func(when string) {
		ids := all()
		if len(ids) < 50 {
			t.Fatalf("%s: only %d objects", when, len(ids))
		}
		for _, id := range ids {
			if !s.hasObject(id) {
				t.Fatalf("%s: %s not found", when, id)
			}
		}
		for _, id := range absent {
			if s.hasObject(id) {
				t.Fatalf("%s: %s found, and the store does not hold it", when, id)
			}
		}
	}
	check("loose and packed")
	if _, err := s.git().Run(ctx, "repack", "-a", "-d", "-q"); err != nil {
		t.Fatal(err)
	}
	idxs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.idx"))
	loose, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "??", "*"))
	if len(idxs) != 1 || len(loose) != 0 {
		t.Fatalf("after repack -a -d: %d packs, %d loose objects; want 1 and 0", len(idxs), len(loose))
	}
	check("one pack")
	id := all()[0]
	data, err := os.ReadFile(idxs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[7] = 3 // an index version rewind does not read
	os.Chmod(idxs[0], 0o644)
	if err := os.WriteFile(idxs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	if s.hasObject(id) {
		t.Fatalf("%s found through a pack index of an unknown version", id)
	}
}
