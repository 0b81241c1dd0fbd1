package checkpoint

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
)

// namedSharedPart returns the id of the shared part a split index file names
// (the id in git's "link" extension), or "" when the file is not a split
// index rewind can read: then nothing is deleted on its account.
func namedSharedPart(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	// The object format is not in the file: the entries and extensions read
	// through to the checksum with only one of the two lengths.
	for _, hashLen := range []int{20, 32} {
		if id, ok := linkExtension(data, hashLen); ok {
			return id
		}
	}
	return ""
}

// linkExtension walks the index data (versions 2 to 4) with ids of hashLen
// bytes, and reports the link extension's id; ok is false when the walk does
// not end at the checksum.
func linkExtension(data []byte, hashLen int) (id string, ok bool) {
	if len(data) < 12+hashLen || string(data[:4]) != "DIRC" {
		return "", false
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return "", false
	}
	end := len(data) - hashLen
	off := 12
	for n := binary.BigEndian.Uint32(data[8:12]); n > 0; n-- {
		// ctime, mtime, dev, ino, mode, uid, gid, size: 40 bytes; the id;
		// the flags, and the extended flags in version 3 and later.
		name := off + 40 + hashLen + 2
		if name > end {
			return "", false
		}
		if version >= 3 && data[name-2]&0x40 != 0 {
			name += 2
		}
		if version == 4 {
			// The name is a varint (what to strip of the last one) and a
			// NUL-terminated suffix, with no padding.
			for name < end && data[name]&0x80 != 0 {
				name++
			}
			name++
		}
		nul := name
		for nul < end && data[nul] != 0 {
			nul++
		}
		if nul >= end {
			return "", false
		}
		if version == 4 {
			off = nul + 1
		} else {
			// One to eight NULs pad an entry to a multiple of eight bytes.
			off += (nul - off + 8) &^ 7
		}
	}
	for off+8 <= end {
		size := int(binary.BigEndian.Uint32(data[off+4 : off+8]))
		if size > end-off-8 {
			return "", false
		}
		if string(data[off:off+4]) == "link" && size >= hashLen {
			id = hex.EncodeToString(data[off+8 : off+8+hashLen])
		}
		off += 8 + size
	}
	if off != end {
		return "", false
	}
	return id, true
}

// dropSharedPart deletes the shared part id, which an index of rewind's
// named and names no more, unless the store's index or the procedure's names
// it. git would keep it a day: as large as the whole index, a store's
// largest file but its packs.
func (s *Store) dropSharedPart(id string) {
	if id == "" || id == namedSharedPart(filepath.Join(s.Dir, "rewind-index")) || id == namedSharedPart(s.procedureIndex()) {
		return
	}
	os.Remove(filepath.Join(s.gitDir(), "sharedindex."+id))
}

// splitPartMin is the size below which the index's own part is left to grow:
// such a write costs nothing worth a new shared part (a variable for tests).
var splitPartMin int64 = 64 << 10

// splitPartLarge reports whether the store's index, split, holds more than
// an eighth of what its shared part does. git writes a new shared part when
// paths new to the index pass splitIndex.maxPercentChange, but a path
// rewritten again and again only adds to the index's own part, which git
// writes whole at every update: `update-index --split-index` then moves
// everything into a new shared part (a write of the whole index, once in a
// while) and the old part goes (dropSharedPart).
func (s *Store) splitPartLarge() bool {
	front, err := os.Stat(s.indexFile())
	if err != nil || front.Size() < splitPartMin {
		return false
	}
	parts, _ := filepath.Glob(filepath.Join(s.gitDir(), "sharedindex.*"))
	var shared int64
	for _, p := range parts {
		if fi, err := os.Stat(p); err == nil && fi.Size() > shared {
			shared = fi.Size()
		}
	}
	return shared > 0 && front.Size()*8 > shared
}
