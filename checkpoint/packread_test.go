package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// objectReader gives every object of a store what git cat-file gives:
// loose, whole in a pack, and as offset and ref deltas of chains git's
// repack made, in stores of sha1 and of sha256 ids.
func TestObjectReaderLikeGit(t *testing.T) {
	ctx := context.Background()
	wt := t.TempDir()
	sha1Store, err := Open(wt, filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{sha1Store, sha256Store(t, wt)} {
		rng := rand.New(rand.NewSource(1))
		var first string
		words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa")
		for step := 0; step < 12; step++ {
			for i := 0; i < 40; i++ {
				name := filepath.Join(wt, fmt.Sprintf("d%d/e%d/f%d.txt", rng.Intn(4), rng.Intn(3), rng.Intn(10)))
				var b strings.Builder
				for k := 0; k < 200; k++ {
					b.WriteString(words[(k+step*rng.Intn(3))%len(words)] + " ")
				}
				mustWrite(t, name, b.String())
			}
			made, err := s.Create(ctx, CreateOptions{Reason: "step " + strconv.Itoa(step), Source: "t"})
			if err != nil {
				t.Fatal(err)
			}
			switch step {
			case 4: // everything so far as ref deltas
				rgitDir(t, s, "-c", "repack.useDeltaBaseOffset=false", "repack", "-a", "-d", "-f", "--depth=50", "--window=50")
				first = made.Checkpoint.ID
			case 8: // what came since as offset deltas, in a pack newer than the imports'
				list := rgitDir(t, s, "rev-list", "--objects", made.Checkpoint.ID, "--not", first)
				if _, err := s.git().RunInput(ctx, strings.NewReader(list), "pack-objects", "--delta-base-offset", "--window=50", "--depth=50", "-q",
					filepath.Join(s.gitDir(), "objects", "pack", "pack")); err != nil {
					t.Fatal(err)
				}
			}
		}
		// and loose objects
		mustWrite(t, filepath.Join(wt, "loose.txt"), "loose\n")
		rgitDir(t, s, "add", "-f", "loose.txt")
		rgitDir(t, s, "write-tree")
		rgitDir(t, s, "tag", "-a", "-m", "a tag", "t1", first) // and a tag

		all := strings.Fields(rgitDir(t, s, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"))
		out, err := s.git().RunInput(ctx, strings.NewReader(strings.Join(all, "\n")+"\n"), "cat-file", "--batch")
		if err != nil {
			t.Fatal(err)
		}
		buf := bytes.NewBuffer(out)
		r := newObjectReader(filepath.Join(s.gitDir(), "objects"), len(all[0]) == 64)
		kinds := map[int]int{} // entry types met, -1 for loose
		for _, id := range all {
			_, typ, want, err := nextBatchAnswer(buf, id)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := hex.DecodeString(id)
			gotTyp, got, err := r.read(raw)
			kind := -1
			for _, p := range r.packs {
				if off := p.offset(raw); off >= 0 {
					kind, _, _, _ = p.entry(off)
					break
				}
			}
			kinds[kind]++
			if err != nil {
				t.Errorf("%s: %v", id, err)
				continue
			}
			if objectTypes[gotTyp] != typ || !bytes.Equal(got, want) {
				t.Errorf("%s: read a %d of %d bytes, git gives a %s of %d", id, gotTyp, len(got), typ, len(want))
			}
			// a reader that may hold a byte less than the object refuses it
			if len(want) > 0 {
				small := newObjectReader(r.dir, r.sha256)
				small.budget = int64(len(want)) - 1
				if _, _, err := small.read(raw); err == nil {
					t.Errorf("%s: %d bytes read with a budget of %d", id, len(want), small.budget)
				}
				small.close()
			}
		}
		r.close()
		t.Logf("objects by how they are stored (-1 loose): %v", kinds)
		damaged(t, s, all, out)
		// The store really has what the test is about.
		if kinds[-1] == 0 || kinds[packTree] == 0 || kinds[packOfsDelta] == 0 || kinds[packRefDelta] == 0 {
			t.Errorf("objects by how they are stored (-1 loose): %v", kinds)
		}
	}
}

// rgitDir runs git in the store s and returns what it prints.
func rgitDir(t *testing.T, s *Store, args ...string) string {
	t.Helper()
	out, err := s.git().Run(context.Background(), args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// damaged flips bytes of copies of the store's packs and indexes, many times:
// each object read is then git's (its id checks it) or an error, never a
// crash or a hang.
func damaged(t *testing.T, s *Store, all []string, answers []byte) {
	want := map[string][]byte{}
	buf := bytes.NewBuffer(answers)
	for _, id := range all {
		_, _, data, _ := nextBatchAnswer(buf, id)
		want[id] = data
	}
	files, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*"))
	rng := rand.New(rand.NewSource(2))
	for round := 0; round < 40; round++ {
		dir := filepath.Join(t.TempDir(), "objects")
		if err := os.MkdirAll(filepath.Join(dir, "pack"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 1+rng.Intn(8); k++ {
				data[rng.Intn(len(data))] ^= byte(1 + rng.Intn(255))
			}
			if err := os.WriteFile(filepath.Join(dir, "pack", filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := newObjectReader(dir, len(all[0]) == 64)
		for _, id := range all {
			raw, _ := hex.DecodeString(id)
			if _, got, err := r.read(raw); err == nil && !bytes.Equal(got, want[id]) {
				t.Fatalf("round %d: %s read wrong from a damaged pack", round, id)
			}
		}
		r.close()
	}
}

// Past its budget the import's reading of the base trees from the store's
// files gives way to cat-file, and the checkpoint is git's all the same.
func TestBaseTreesPastBudget(t *testing.T) {
	needPreimport(t)
	defer func(n int64) { baseTreesBudget = n }(baseTreesBudget)
	baseTreesBudget = 10
	s, wt := settledStore(t, tenFiles(t))
	mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed\n")
	made, trace := traceCreate(t, s, "past the budget")
	if !strings.Contains(trace, "objects larger than the reader may hold; asking git") || strings.Contains(trace, "ignored: import") {
		t.Errorf("the base trees were not read by cat-file, or the import gave up:\n%s", trace)
	}
	if want := freshTree(t, wt); made.Checkpoint.Tree != want {
		t.Fatalf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
	}
}
