package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStatCacheRoundTrip(t *testing.T) {
	want := &statCache{stamp: []byte("stamp"), tree: "tree", base: "base",
		paths: []string{"a", "dir/b c\nd", "ünï/\x01name", "ünï/\x01namf", "ünï/z"},
		// the last two share device, mode and owner with the one before,
		// and the last one's ctime is its mtime
		keys: []statKey{{1, 2, 0o100644, 3, 4, 5, 6, 7}, {8, 9, 0o120777, 10, 11, 12, 13, 14}, {}, {0, 15, 0, 16, 17, 18, 0, 0}, {0, 19, 0, 20, 21, 21, 0, 0}},
		byID: []bool{false, true, true, false, true}, held: 3,
		ids: map[string]string{"dir/b c\nd": "120000 0123abcd", "ünï/z": "100755 4567ef01"}}
	data := encodeStatCache(want)
	got, err := decodeStatCache(data)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x40
		if _, err := decodeStatCache(bad); err == nil {
			t.Fatalf("a flipped byte %d was not noticed", i)
		}
	}
	if _, err := decodeStatCache(data[:len(data)-1]); err == nil {
		t.Fatal("a torn cache was not noticed")
	}
	unordered := &statCache{paths: []string{"b", "a"}, keys: make([]statKey, 2), byID: make([]bool, 2)}
	if _, err := decodeStatCache(encodeStatCache(unordered)); err == nil {
		t.Fatal("paths out of order were not noticed")
	}
}

// TestStatEntriesEncode checks a capture's entries against the cache they
// stand for: a racy file held with stat data leaves it (and the index), a
// racy file held by id stays with no stat data, a changed file is held by id
// when the capture entered it so.
func TestStatEntriesEncode(t *testing.T) {
	k := func(n uint64) statKey { return statKey{1, n, 0o100644, n, n, n, 0, 0} }
	keep := []verdict{
		{path: "a", key: k(1), unchanged: true},
		{path: "b", key: k(2), unchanged: true, byID: true}, // racy, by id: stays, no key
		{path: "c", key: k(3), unchanged: true},             // racy: leaves
		{path: "d/e", key: k(4)},                            // changed, entered by id
		{path: "d/f", key: k(5)},                            // changed, hashed by git
		{path: "g", key: k(6)},                              // changed, racy, by id
	}
	held := map[string]heldBlob{"d/e": {mode: "100644", id: "e1"}, "g": {mode: "100755", id: "g1"}}
	e := newStatEntries(keep, []int{1, 2, 5}, held, map[string]string{"b": "100644 b1"})
	if !reflect.DeepEqual(e.leave, []string{"c"}) || e.n != 5 {
		t.Fatalf("leave %q, %d entries", e.leave, e.n)
	}
	e.encode()
	want := &statCache{stamp: []byte("s"), tree: "t", base: "b",
		paths: []string{"a", "b", "d/e", "d/f", "g"},
		keys:  []statKey{k(1), {}, k(4), k(5), {}},
		byID:  []bool{false, true, true, false, true}, held: 3,
		ids: map[string]string{"b": "100644 b1", "d/e": "100644 e1", "g": "100755 g1"}}
	got, err := decodeStatCache(assembleStatCache(want.stamp, want.tree, want.base, e.n, e.encoded))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("entries decode to %+v, %v; want %+v", got, err, want)
	}
}

func FuzzStatCache(f *testing.F) {
	f.Add(encodeStatCache(&statCache{stamp: []byte("s"), tree: "t", paths: []string{"a"}, keys: []statKey{{1, 2, 3, 4, 5, 6, 7, 8}}, byID: []bool{true}, held: 1}))
	f.Add([]byte(statCacheMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeStatCache(data)
		if err != nil {
			return
		}
		again, err := decodeStatCache(encodeStatCache(c))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("a decoded cache does not survive encoding: %v", err)
		}
	})
}

// FuzzStatCacheBody is FuzzStatCache past the checksum: FuzzStatCache's
// mutations nearly all fail it, so the decoding of what follows the magic is
// fuzzed here with the checksum made right. A cache decoded is in order, each
// path once, and survives encoding.
func FuzzStatCacheBody(f *testing.F) {
	f.Add(encodeStatCache(&statCache{stamp: []byte("s"), tree: "t", paths: []string{"a", "ab", "b/c"},
		keys: []statKey{{1, 2, 3, 4, 5, 6, 7, 8}, {}, {9, 9, 9, 9, 9, 9, 9, 9}}, byID: []bool{true, false, true}, held: 2}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < len(statCacheMagic)+4 {
			return
		}
		data = append([]byte(statCacheMagic), data[len(statCacheMagic):]...)
		binary.LittleEndian.PutUint32(data[len(data)-4:], crc32.Checksum(data[:len(data)-4], crcTable))
		c, err := decodeStatCache(data)
		if err != nil {
			return
		}
		for i := 1; i < len(c.paths); i++ {
			if c.paths[i-1] >= c.paths[i] {
				t.Fatalf("paths out of order: %q, %q", c.paths[i-1], c.paths[i])
			}
		}
		again, err := decodeStatCache(encodeStatCache(c))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("a decoded cache does not survive encoding: %v", err)
		}
	})
}

// TestStatCacheSameCheckpoints takes a checkpoint of the same work tree in two
// stores after every step of random edits (same-size rewrites with the mtime
// set back, in the second of the last checkpoint too, bit changes, type swaps,
// deletions, new files): one store's captures use the stat cache, the other's
// are forced to the fall-back (git's diff-files), and both must hold the same
// tree and bits every time, equal to a fresh store's now and then.
func TestStatCacheSameCheckpoints(t *testing.T) {
	ctx := context.Background()
	withCache, wt := newStore(t)
	without, err := Open(wt, filepath.Join(t.TempDir(), "without"))
	if err != nil {
		t.Fatal(err)
	}
	without.Now = withCache.Now
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	name := func() string { return fmt.Sprintf("d%d/f%d", rng.Intn(3), rng.Intn(12)) }
	for i := 0; i < 30; i++ {
		mustWrite(t, filepath.Join(wt, name()), fmt.Sprintf("start %d\n", i))
	}
	used := 0
	for step := 0; step < 25; step++ {
		for n := rng.Intn(4) + 1; n > 0; n-- {
			randomEdit(rng, filepath.Join(wt, name()), false)
		}
		a, trace := traceCreate(t, withCache, fmt.Sprint("step ", step))
		if strings.Contains(trace, "stat cache used: true") {
			used++
		}
		statCacheOff = true
		b, err := without.Create(ctx, CreateOptions{Reason: fmt.Sprint("step ", step), Source: "test"})
		statCacheOff = false
		if err != nil {
			t.Fatal(err)
		}
		if a.Checkpoint.Tree != b.Checkpoint.Tree || !sameMeta(a.Checkpoint.meta, b.Checkpoint.meta) {
			t.Fatalf("step %d: with the stat cache tree %s %q, without %s %q", step,
				a.Checkpoint.Tree, a.Checkpoint.meta.trailers(), b.Checkpoint.Tree, b.Checkpoint.meta.trailers())
		}
		if step%5 == 4 {
			if got := freshTree(t, wt); got != a.Checkpoint.Tree {
				t.Fatalf("step %d: tree %s, a fresh store's %s", step, a.Checkpoint.Tree, got)
			}
		}
	}
	if used == 0 {
		t.Error("no capture used the stat cache")
	}
	t.Logf("%d of 25 captures used the stat cache", used)
}

// randomEdit changes the file p at random: rewritten at its size (its mtime
// set back), its bits, made a symlink, removed, written anew; with dirs, made
// a directory too.
func randomEdit(rng *rand.Rand, p string, dirs bool) {
	kinds := 6
	if dirs {
		kinds++
	}
	switch rng.Intn(kinds) {
	case 0, 1:
		rewriteSameSize(p)
	case 2:
		os.Chmod(p, []os.FileMode{0o600, 0o644, 0o755}[rng.Intn(3)])
	case 3:
		os.RemoveAll(p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.Symlink(fmt.Sprintf("target-%d", rng.Intn(3)), p)
	case 4:
		os.RemoveAll(p)
	case 5:
		os.RemoveAll(p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(strings.Repeat("x", rng.Intn(20))), 0o644)
	default: // a file becomes a directory
		os.RemoveAll(p)
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "in"), []byte("inside\n"), 0o644)
	}
}

// TestRewriteCache: the stat cache is written over its file in place, and
// what a write torn by a crash would leave is not read; a symlink or a hard
// link at its name is replaced, never written through.
func TestRewriteCache(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rewind-statcache")
	cache := func(n int) []byte {
		c := &statCache{stamp: []byte("s"), tree: "t"}
		for i := range n {
			c.paths = append(c.paths, fmt.Sprintf("f%04d", i))
			c.keys = append(c.keys, statKey{1, uint64(i), 0o100644, 2, 3, 4, 5, 6})
			c.byID = append(c.byID, false)
		}
		return encodeStatCache(c)
	}
	inode := func() uint64 {
		fi, err := os.Lstat(file)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	long, short := cache(100), cache(10)
	if err := rewriteCache(file, long); err != nil {
		t.Fatal(err)
	}
	ino := inode()
	if err := rewriteCache(file, short); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(file); !bytes.Equal(got, short) || inode() != ino {
		t.Fatalf("not rewritten in place to the shorter cache (%d bytes, inode %d then %d)", len(got), ino, inode())
	}
	// Killed in the write, or between the write and the truncation: the
	// first k bytes of the new cache over the old one (or the old one whole,
	// for the index's stamp to judge).
	for _, c := range [][2][]byte{{short, long}, {long, short}} {
		write, old := c[0], c[1]
		for _, k := range []int{1, len(write) / 2, len(write) - 1, len(write)} {
			torn := bytes.Clone(write[:k])
			if k < len(old) {
				torn = append(torn, old[k:]...)
			}
			if _, err := decodeStatCache(torn); err == nil && !bytes.Equal(torn, write) && !bytes.Equal(torn, old) {
				t.Fatalf("a cache torn after %d of %d bytes (over %d) was read", k, len(write), len(old))
			}
		}
	}
	// Links at its name: the file they lead to keeps its bytes.
	for _, link := range []func(target string) error{
		func(target string) error { return os.Symlink(target, file) },
		func(target string) error { return os.Link(target, file) },
	} {
		target := filepath.Join(dir, "user-file")
		if err := os.WriteFile(target, []byte("the user's"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(file)
		if err := link(target); err != nil {
			t.Fatal(err)
		}
		if err := rewriteCache(file, short); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(target); string(got) != "the user's" {
			t.Fatalf("written through a link: %q", got)
		}
		if fi, err := os.Lstat(file); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the cache is not a file of its own: %v, %v", fi.Mode(), err)
		}
		os.Remove(target)
	}
}
