package checkpoint

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// localFS are the file systems whose directories change their times as
// entries come and go, as the kernel's own code for them does (f_type
// values of statfs).
var localFS = map[int64]string{
	0xEF53:     "ext4", // ext2, ext3 and ext4
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x01021994: "tmpfs",
	0x858458F6: "ramfs",
	0x794C7630: "overlayfs",
	0x2FC12FC1: "zfs",
	0xF2F52010: "f2fs",
	0x52654973: "reiserfs",
	0x3153464A: "jfs",
	0xCA451A4E: "bcachefs",
	0x3434:     "nilfs",
}

// fsKind names the file system dir lies on, and whether it is one of
// localFS (network, FUSE and other file systems are not).
func fsKind(dir string) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown", false
	}
	if name, ok := localFS[int64(st.Type)]; ok {
		return name, true
	}
	return fmt.Sprintf("0x%x", st.Type), false
}
