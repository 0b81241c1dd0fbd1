package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// hasObject reports whether the store holds object id, loose or in a pack,
// by looking at the files (where asking git costs a process). A pack index it
// cannot read says no: the caller then asks git, which costs only time.
func (s *Store) hasObject(id string) bool {
	if len(id) < 4 || !isHex(id) {
		return false
	}
	if _, err := os.Lstat(filepath.Join(s.gitDir(), "objects", id[:2], id[2:])); err == nil {
		return true
	}
	want, err := hex.DecodeString(id)
	if err != nil {
		return false
	}
	idxs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.idx"))
	for _, idx := range idxs {
		if packIndexHas(idx, want) {
			if _, err := os.Stat(strings.TrimSuffix(idx, ".idx") + ".pack"); err == nil {
				return true
			}
		}
	}
	return false
}

// packIndexV2 starts a pack index of version 2, the one git writes.
var packIndexV2 = []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}

// packIndexHas looks id up in a pack index (version 2: a header, 256
// cumulative counts by first byte, then the sorted object ids): the ids
// starting with id's first byte are read at once and searched.
func packIndexHas(name string, id []byte) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [8 + 256*4]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || !bytes.Equal(head[:8], packIndexV2) {
		return false
	}
	count := func(b int) int64 { return int64(binary.BigEndian.Uint32(head[8+4*b:])) }
	lo, hi := int64(0), count(int(id[0]))
	if id[0] > 0 {
		lo = count(int(id[0]) - 1)
	}
	if hi <= lo {
		return false
	}
	n := int64(len(id))
	// The ids are read only when the file holds all the fan-out counts: a
	// damaged table would otherwise reserve memory for ids that are not there
	// (git checks the size the same way before it uses an index).
	if info, err := f.Stat(); err != nil || info.Size() < int64(len(head))+count(255)*n || hi > count(255) {
		return false
	}
	ids := make([]byte, (hi-lo)*n)
	if _, err := f.ReadAt(ids, int64(len(head))+lo*n); err != nil {
		return false
	}
	for a, b := int64(0), hi-lo; a < b; {
		m := a + (b-a)/2
		switch c := bytes.Compare(ids[m*n:(m+1)*n], id); {
		case c == 0:
			return true
		case c < 0:
			a = m + 1
		default:
			b = m
		}
	}
	return false
}
