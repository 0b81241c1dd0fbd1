//go:build !linux

package checkpoint

import (
	"os"
	"syscall"
	"time"
)

// ctime is the time of a file's last status change, which no tool can set
// back (an mtime can be restored; a ctime cannot).
func ctime(fi os.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctimespec.Sec, st.Ctimespec.Nsec)
	}
	return fi.ModTime()
}

// keyOf is what the stat cache compares of a file: a change of content, type,
// bits or owner, or another file in its place, changes one of them (the
// ctime at least, which no tool can set back).
func keyOf(fi os.FileInfo) statKey {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return statKey{}
	}
	return statKey{
		dev: uint64(st.Dev), ino: uint64(st.Ino), mode: uint64(st.Mode), size: uint64(st.Size),
		mtime: uint64(st.Mtimespec.Sec)*1e9 + uint64(st.Mtimespec.Nsec), ctime: uint64(st.Ctimespec.Sec)*1e9 + uint64(st.Ctimespec.Nsec),
		uid: uint64(st.Uid), gid: uint64(st.Gid),
	}
}
