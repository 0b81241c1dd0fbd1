package checkpoint

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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

// TestPackIndexHasDamagedFanout: a pack index whose fan-out table counts more
// ids than the file holds (damaged, or cut short by a crash) says no without
// reserving memory for the ids it claims: with the counts near 2^32 that
// reservation (85 GB) ends the process. git checks the file's size against
// the last count before it reads an index.
func TestPackIndexHasDamagedFanout(t *testing.T) {
	head := append([]byte(nil), packIndexV2...)
	for b := 0; b < 256; b++ {
		head = append(head, 0x04, 0, 0, 0) // 2^26 ids by each count: 1.3 GB of ids
	}
	head[8], head[9], head[10], head[11] = 0, 0, 0, 0 // no id starts with 0x00
	name := filepath.Join(t.TempDir(), "pack-damaged.idx")
	if err := os.WriteFile(name, head, 0o644); err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 20)
	id[0] = 0x01
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	found := packIndexHas(name, id)
	runtime.ReadMemStats(&after)
	if found {
		t.Fatal("found an id in an index that holds none")
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Fatalf("looking up one id in a %d-byte index allocated %d bytes", len(head), grown)
	}
}
