package checkpoint

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

// looseObjects lists the types of the store's loose objects.
func looseObjects(t *testing.T, s *Store) map[string]int {
	t.Helper()
	types := map[string]int{}
	dirs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "[0-9a-f][0-9a-f]"))
	for _, dir := range dirs {
		names, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			out, err := s.git().Run(context.Background(), "cat-file", "-t", filepath.Base(dir)+n.Name())
			if err != nil {
				t.Fatal(err)
			}
			types[strings.TrimSpace(string(out))]++
		}
	}
	return types
}

// TestPrewritePacksBlobs checks that a large capture's blobs land in packs
// (one per prewrite share), not as one loose file each, where git can do so;
// that the checkpoint names only objects the store has; and that a later
// small capture and a prune leave a sound store with the same trees.
func TestPrewritePacksBlobs(t *testing.T) {
	if !gitexec.BulkCheckinPacks() {
		t.Skip("this git writes the blobs of a bulk check-in loose")
	}
	ctx := context.Background()
	s, wt := newStore(t)
	const files = 60
	for i := 0; i < files; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%02d.txt", i%6, i)), strings.Repeat(fmt.Sprintf("file %d\n", i), i+1))
	}
	prewriteMin = 1
	defer func() { prewriteMin = 2000 }()
	first, err := s.Create(ctx, CreateOptions{Reason: "first", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if loose := looseObjects(t, s); loose["blob"] != 0 {
		t.Errorf("a prewritten capture left %d loose blobs (%v), want them packed", loose["blob"], loose)
	}
	packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "*.pack"))
	if len(packs) == 0 || len(packs) > files {
		t.Errorf("%d packs after the first capture", len(packs))
	}
	if out, err := s.git().Run(ctx, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v %s", err, out)
	}
	// The checkpoint's tree names only objects the store holds.
	if _, err := s.git().Run(ctx, "rev-list", "--objects", "--missing=error", first.Checkpoint.ID); err != nil {
		t.Fatalf("the first checkpoint names a missing object: %v", err)
	}

	// A small change, under the prewrite threshold: hashed by update-index
	// alone, as before.
	prewriteMin = 2000
	mustWrite(t, filepath.Join(wt, "d1/f01.txt"), "changed")
	mustWrite(t, filepath.Join(wt, "new.txt"), "new")
	second, err := s.Create(ctx, CreateOptions{Reason: "second", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Prune(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if out, err := s.git().Run(ctx, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck after prune: %v %s", err, out)
	}
	if _, err := s.git().Run(ctx, "rev-list", "--objects", "--missing=error", second.Checkpoint.ID); err != nil {
		t.Fatalf("the kept checkpoint names a missing object after prune: %v", err)
	}
	// The index still names only objects the store has: the next capture
	// of the same files gives the same tree.
	third, err := s.Create(ctx, CreateOptions{Reason: "third", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if third.Checkpoint.Tree != second.Checkpoint.Tree {
		t.Errorf("tree after prune %s, before %s", third.Checkpoint.Tree, second.Checkpoint.Tree)
	}
}

// TestPrewritePackLimit: a large capture's blobs go into packs of at most
// gitexec.BulkPackLimit bytes (git compares each new object of a pack with
// every one before it, so one pack of many files is quadratic), and the
// later captures' pack merges leave those packs as they are while they
// merge their own: a first checkpoint's packs are never rewritten by a
// small one, however many there are. An import as large as those packs is
// merged all the same.
func TestPrewritePackLimit(t *testing.T) {
	if !gitexec.BulkCheckinPacks() {
		t.Skip("this git writes the blobs of a bulk check-in loose")
	}
	needPreimport(t)
	ctx := context.Background()
	s, wt := newStore(t)
	defer func(limit int64, n int) { gitexec.BulkPackLimit, packsMax, prewriteMin = limit, n, 2000 }(gitexec.BulkPackLimit, packsMax)
	gitexec.BulkPackLimit, packsMax, prewriteMin = 16<<10, 2, 1
	rnd := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		data := make([]byte, 1024) // random: it does not compress
		rnd.Read(data)
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%03d.bin", i%5, i)), string(data))
	}
	// past the second the files were written in: none is racy, and the
	// next capture reads none of them again
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.Create(ctx, CreateOptions{Reason: "first", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	prewriteMin = 2000
	packDir := filepath.Join(s.gitDir(), "objects", "pack")
	first, _ := filepath.Glob(filepath.Join(packDir, "pack-*.pack"))
	var large []string
	for _, p := range first {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > gitexec.BulkPackLimit {
			t.Errorf("%s: %d bytes, over the limit of %d", filepath.Base(p), fi.Size(), gitexec.BulkPackLimit)
		}
		if fi.Size() >= gitexec.BulkPackLimit/2 {
			large = append(large, p)
		}
	}
	// 200 KiB of blobs in packs of 16 KiB: a dozen, one per CPU not full
	if len(large) < 8 {
		t.Fatalf("%d packs of at least half the limit after the first checkpoint (%d packs), want the blobs spread over many", len(large), len(first))
	}
	if bulk := s.bulkPacks(); len(bulk) != len(first) {
		t.Fatalf("%d of the first checkpoint's %d packs listed as a bulk check-in's", len(bulk), len(first))
	}
	trees := map[string]string{}
	var bigImport []string // the packs of an import of 12 KiB
	for step := 0; step < 10; step++ {
		time.Sleep(10 * time.Millisecond)
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%03d.bin", step%5, step)), fmt.Sprint("step ", step))
		before := s.packNames()
		packsMax = 2
		if step == 0 {
			data := make([]byte, 12<<10)
			rnd.Read(data)
			mustWrite(t, filepath.Join(wt, "big.bin"), string(data))
			packsMax = 100 // no merge yet: its pack alone is new
		}
		made, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("step ", step), Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			for name := range s.packNames() {
				if !before[name] {
					p := filepath.Join(packDir, name)
					if fi, err := os.Stat(p); err != nil || fi.Size() < gitexec.BulkPackLimit/2 {
						t.Fatalf("the import's pack: %v, want one of half the limit or more", err)
					}
					bigImport = append(bigImport, p)
				}
			}
		}
		trees[made.Checkpoint.ID] = freshTree(t, wt)
		now, _ := filepath.Glob(filepath.Join(packDir, "pack-*.pack"))
		small := 0
		for _, p := range now {
			if fi, err := os.Stat(p); err == nil && fi.Size() < gitexec.BulkPackLimit/2 {
				small++
			}
		}
		for _, p := range large {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("step %d: a first checkpoint's large pack was merged: %v", step, err)
			}
		}
		if small > packsMax+runtime.NumCPU() {
			t.Fatalf("step %d: %d small packs, want them merged past %d", step, small, packsMax)
		}
	}
	if len(bigImport) != 1 {
		t.Fatalf("the import of 12 KiB made %d packs, want 1", len(bigImport))
	}
	if fi, err := os.Stat(bigImport[0]); err == nil {
		t.Errorf("the import's pack of %d bytes is still there after 9 more imports: not merged", fi.Size())
	}
	if out, err := s.git().Run(ctx, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v %s", err, out)
	}
	restoreEach(t, s, wt, trees)
}

// TestBulkPacksListed: rewind-bulkpacks names the packs of each bulk
// check-in, and only packs still there once a prune has repacked them.
func TestBulkPacksListed(t *testing.T) {
	if !gitexec.BulkCheckinPacks() {
		t.Skip("this git writes the blobs of a bulk check-in loose")
	}
	ctx := context.Background()
	s, wt := newStore(t)
	defer func() { prewriteMin = 2000 }()
	prewriteMin = 1
	write := func(round int) {
		for i := 0; i < 30; i++ {
			mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%02d.txt", i%3, i)), fmt.Sprintf("round %d file %d\n", round, i))
		}
	}
	packs := func() []string { return slices.Sorted(maps.Keys(s.packNames())) }
	listed := func() []string { return slices.Sorted(maps.Keys(s.bulkPacks())) }
	write(1)
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if got, want := listed(), packs(); len(got) == 0 || !slices.Equal(got, want) {
		t.Fatalf("listed %v after the first checkpoint, want its packs %v", got, want)
	}
	if _, _, _, err := s.Prune(ctx, 1); err != nil {
		t.Fatal(err)
	}
	before := s.packNames()
	write(2)
	if _, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, name := range packs() {
		if !before[name] {
			made = append(made, name)
		}
	}
	if got := listed(); len(made) == 0 || !slices.Equal(got, made) {
		t.Fatalf("listed %v after a prune and a second bulk check-in, want only its packs %v", got, made)
	}
}

// TestPrewriteKilledLeavesNoHarm: a rewind killed while git wrote a prewrite
// pack leaves git's temporary pack file behind; the next checkpoint is taken
// as usual and a prune deletes the leftover.
func TestPrewriteKilledLeavesNoHarm(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "a.txt"), "alpha")
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	packDir := filepath.Join(s.gitDir(), "objects", "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(packDir, "tmp_pack_killed")
	// What git had written of a pack when it was killed: a header, no index.
	if err := os.WriteFile(leftover, []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x05partial"), 0o444); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wt, "b.txt"), "beta")
	second, err := s.Create(ctx, CreateOptions{Reason: "two", Source: "test", CountChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	if second.Changed != 1 {
		t.Errorf("changed %d, want 1", second.Changed)
	}
	if _, _, _, err := s.Prune(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(leftover); !os.IsNotExist(err) {
		t.Errorf("the killed pack is still there after a prune: %v", err)
	}
	if out, err := s.git().Run(ctx, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v %s", err, out)
	}
}

// TestRulePropertyPrewritten runs the capture rule's property test with every
// capture's blobs prewritten (packed, where git can), so that the oracle
// checks the packed path as well as update-index alone.
func TestRulePropertyPrewritten(t *testing.T) {
	seeds := envInt("REWIND_RULE_SEEDS", 2)
	steps := envInt("REWIND_RULE_STEPS", 60)
	prewriteMin = 1
	defer func() { prewriteMin = 2000 }()
	for seed := int64(101); seed < 101+int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { ruleRound(t, seed, steps) })
	}
}
