package checkpoint

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// chmodNoFollow gives name, in the directory dir, the bits mode, when it is
// still a directory (isDir) or a regular file; never a symlink's target.
// Linux's fchmodat follows a symlink and its flag not to needs Linux 6.6, so
// the name is opened without following it (O_PATH opens a file without
// reading it, a 0000 one too), its kind checked through that descriptor,
// and the bits set through /proc/self/fd, which names that very file. Only
// without /proc are they set by name, after the check.
func chmodNoFollow(dir int, name string, mode uint32, isDir bool) error {
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if err := permKind(st.Mode, isDir); err != nil {
		return err
	}
	err = unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
	if err == unix.ENOENT {
		err = unix.Fchmodat(dir, name, mode, 0)
	}
	return err
}
