package checkpoint

import (
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// dirStat looks at the files of one directory through a descriptor of it, so
// that the kernel resolves each file's name alone, not its whole path (half the
// cost of a stat walk of a deep tree). Without the descriptor (the directory
// could not be opened: gone, replaced, not searchable) it falls back to lstat
// of the whole path, which then reports what is wrong.
type dirStat struct{ fd int }

func openDirStat(dir string) dirStat {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return dirStat{fd: -1}
	}
	return dirStat{fd: fd}
}

func (d dirStat) close() {
	if d.fd >= 0 {
		unix.Close(d.fd)
	}
}

// fileLook is what a stat call says of a file, as judge needs it.
type fileLook struct {
	mode os.FileMode
	size int64
	key  statKey
}

// look is an lstat of root/rel, a file of the directory: no allocation
// but the error's.
func (d dirStat) look(root, rel string) (fileLook, error) {
	if d.fd < 0 {
		fi, err := os.Lstat(root + "/" + rel)
		if err != nil {
			return fileLook{}, err
		}
		return fileLook{fi.Mode(), fi.Size(), keyOf(fi)}, nil
	}
	var st unix.Stat_t
	for {
		err := fstatat(d.fd, path.Base(rel), &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileLook{}, &os.PathError{Op: "lstat", Path: root + "/" + rel, Err: err}
		}
		return fileLook{fileMode(&st), st.Size, keyOfStat(&st)}, nil
	}
}

// fileMode converts a stat mode as os does.
func fileMode(st *unix.Stat_t) os.FileMode {
	m := os.FileMode(st.Mode & 0o777)
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= os.ModeDevice
	case syscall.S_IFCHR:
		m |= os.ModeDevice | os.ModeCharDevice
	case syscall.S_IFDIR:
		m |= os.ModeDir
	case syscall.S_IFIFO:
		m |= os.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= os.ModeSymlink
	case syscall.S_IFSOCK:
		m |= os.ModeSocket
	}
	if st.Mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if st.Mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if st.Mode&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// ownLook says that differFromCache can stand in for git's diff-files here.
const ownLook = true

// openDirBeneath is openDirStat of root/dir, each directory on the way
// opened by its name in the one above without following a symlink
// (walkBeneath): a directory replaced by a symlink (or a file) since the
// cache was written gives no descriptor, not the files at the symlink's
// target. ok is false then, and whenever the directory cannot be opened.
func openDirBeneath(root, dir string) (d dirStat, ok bool) {
	var names []string
	if dir != "." {
		names = strings.Split(dir, "/")
	}
	fd, err := walkBeneath(root, dir, names, 0)
	if err != nil {
		return dirStat{fd: -1}, false
	}
	return dirStat{fd: fd}, true
}

// dirOpen is how walkBeneath opens a directory: O_PATH, which asks only to
// search it, as the calls made in it (openat, unlinkat, mkdirat, fstatat)
// do, and opens nothing for reading.
const dirOpen = unix.O_PATH
