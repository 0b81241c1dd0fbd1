package checkpoint

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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

// packIndexHas looks id up in a pack index (see packFile.offset).
func packIndexHas(name string, id []byte) bool {
	idx, err := mapFile(name)
	if err != nil {
		return false
	}
	defer unix.Munmap(idx)
	p := &packFile{idx: idx}
	return p.checkIndex(len(id)) == nil && p.offset(id) >= 0
}
