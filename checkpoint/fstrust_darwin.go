package checkpoint

import "golang.org/x/sys/unix"

// fsKind names the file system dir lies on, and whether it is a local one
// whose directories change their times as entries come and go (APFS, HFS+).
func fsKind(dir string) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown", false
	}
	name := unix.ByteSliceToString(st.Fstypename[:])
	return name, name == "apfs" || name == "hfs"
}
