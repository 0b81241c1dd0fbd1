//go:build linux && !amd64 && !arm64

package checkpoint

import "golang.org/x/sys/unix"

// fstatat is unix.Fstatat of name in the directory fd, without following a
// symlink (fstatat_raw.go has a faster one for some processors).
func fstatat(fd int, name string, st *unix.Stat_t) error {
	return unix.Fstatat(fd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// lstatOrdinary does nothing here: every lstat is an ordinary call.
func lstatOrdinary() {}
