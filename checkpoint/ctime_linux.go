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
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime()
}
