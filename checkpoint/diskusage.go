package checkpoint

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// diskUsage is the space dir takes on disk, as du counts it: the blocks
// allocated to every file and directory below it. A store of small loose
// objects takes a block per object and a directory per fan-out prefix, which
// file sizes alone would hide (packing them then looks like growth).
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += int64(st.Blocks) * 512
		} else if fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
