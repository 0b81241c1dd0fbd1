//go:build !linux

package checkpoint

import "golang.org/x/sys/unix"

// chmodNoFollow gives name, in the directory dir, the bits mode, when it is
// still a directory (isDir) or a regular file; never a symlink's target
// (fchmodat's flag not to follow one, which these systems have).
func chmodNoFollow(dir int, name string, mode uint32, isDir bool) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if err := permKind(uint32(st.Mode), isDir); err != nil {
		return err
	}
	return unix.Fchmodat(dir, name, mode, unix.AT_SYMLINK_NOFOLLOW)
}
