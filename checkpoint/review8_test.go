package checkpoint

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// A delta of a few bytes may say its object is 65536 times bigger (each
// one-byte copy op makes 64 KiB): a reader with a budget must refuse it
// before it makes the object, not after, or a pack of a 1 KiB delta makes
// it hold 64 MiB past its budget. The pack is indexed by git index-pack.
func TestReview8DeltaBombWithinBudget(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	const n = 1024 // copies of the 64 KiB base: a 64 MiB blob
	base := make([]byte, 0x10000)
	var delta []byte
	delta = binary.AppendUvarint(delta, uint64(len(base)))
	delta = binary.AppendUvarint(delta, uint64(n*len(base)))
	delta = append(delta, bytes.Repeat([]byte{0x80}, n)...) // copy 0x10000 bytes from 0

	deflate := func(b []byte) []byte {
		var buf bytes.Buffer
		z := zlib.NewWriter(&buf)
		z.Write(b)
		z.Close()
		return buf.Bytes()
	}
	header := func(typ int, size int) []byte {
		c := byte(typ<<4) | byte(size&15)
		size >>= 4
		var h []byte
		for size > 0 {
			h = append(h, c|0x80)
			c, size = byte(size&0x7f), size>>7
		}
		return append(h, c)
	}
	pack := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x02")
	baseOff := len(pack)
	pack = append(pack, header(packBlob, len(base))...)
	pack = append(pack, deflate(base)...)
	deltaOff := len(pack)
	pack = append(pack, header(packOfsDelta, len(delta))...)
	pack = append(pack, byte(deltaOff-baseOff)) // < 128: one byte
	if deltaOff-baseOff >= 128 {
		t.Fatalf("base entry of %d bytes", deltaOff-baseOff)
	}
	pack = append(pack, deflate(delta)...)
	sum := sha1.Sum(pack)
	pack = append(pack, sum[:]...)
	name := filepath.Join(dir, "objects", "pack", "pack-bomb.pack")
	if err := os.WriteFile(name, pack, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "index-pack", name).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	big := gitObjectID(packBlob, bytes.Repeat(base, n), false)
	if out, err := exec.Command("git", "--git-dir", dir, "cat-file", "-s", hex.EncodeToString(big)).CombinedOutput(); err != nil || string(out) != "67108864\n" {
		t.Fatalf("git reads the blob as %q: %v", out, err)
	}

	r := newObjectReader(filepath.Join(dir, "objects"), false)
	defer r.close()
	const budget = 1 << 20
	r.budget = budget
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := r.read(big)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a 64 MiB blob read with a budget of 1 MiB")
	}
	if made := after.TotalAlloc - before.TotalAlloc; made > 4*budget {
		t.Errorf("refusing a blob past a budget of %d bytes, the reader made %d bytes (%v)", budget, made, err)
	}
}

// Read from the store's files, an empty blob and one blob at two paths are
// written in place as cat-file's content would be: exactly, all three.
func TestReview8EmptyAndSharedBlobsInPlace(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	files := map[string]string{"empty.txt": "", "one.txt": "same\n", "d/two.txt": "same\n"}
	for f, c := range files {
		mustWrite(t, filepath.Join(wt, f), c)
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "target", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	target := listing(t, wt, true)
	for f := range files {
		mustWrite(t, filepath.Join(wt, f), "changed "+f+"\n")
	}
	inPlace, trace := traceRestore(t, s, "target")
	if strings.Contains(trace, "cat-file --batch\n") || strings.Contains(trace, "asking git") {
		t.Errorf("the objects were read by cat-file:\n%s", trace)
	}
	if inPlace != len(files) {
		t.Errorf("%d of %d files written in place", inPlace, len(files))
	}
	if got := listing(t, wt, true); !reflect.DeepEqual(got, target) {
		t.Errorf("restored %v, want %v", got, target)
	}
}
