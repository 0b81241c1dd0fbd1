package checkpoint

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ctime is the time of a file's last status change, which no tool can set
// back (an mtime can be restored; a ctime cannot).
func ctime(fi os.FileInfo) time.Time {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	case *unix.Stat_t:
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime()
}

// keyOf is what the stat cache compares of a file: a change of content, type,
// bits or owner, or another file in its place, changes one of them (the
// ctime at least, which no tool can set back).
func keyOf(fi os.FileInfo) statKey {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return statKey{
			dev: uint64(st.Dev), ino: st.Ino, mode: uint64(st.Mode), size: uint64(st.Size),
			mtime: uint64(st.Mtim.Sec)*1e9 + uint64(st.Mtim.Nsec), ctime: uint64(st.Ctim.Sec)*1e9 + uint64(st.Ctim.Nsec),
			uid: uint64(st.Uid), gid: uint64(st.Gid),
		}
	case *unix.Stat_t:
		return keyOfStat(st)
	}
	return statKey{}
}

func keyOfStat(st *unix.Stat_t) statKey {
	return statKey{
		dev: uint64(st.Dev), ino: st.Ino, mode: uint64(st.Mode), size: uint64(st.Size),
		mtime: uint64(st.Mtim.Sec)*1e9 + uint64(st.Mtim.Nsec), ctime: uint64(st.Ctim.Sec)*1e9 + uint64(st.Ctim.Nsec),
		uid: uint64(st.Uid), gid: uint64(st.Gid),
	}
}
