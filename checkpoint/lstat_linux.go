package checkpoint

import (
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

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
		err := unix.Fstatat(d.fd, path.Base(rel), &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileLook{}, &os.PathError{Op: "lstat", Path: root + "/" + rel, Err: err}
		}
		fi := statInfo{st: &st}
		return fileLook{fi.Mode(), st.Size, keyOfStat(&st)}, nil
	}
}

// lstat is os.Lstat(full) for full, a file of the directory named name.
func (d dirStat) lstat(full, name string) (os.FileInfo, error) {
	if d.fd < 0 {
		return os.Lstat(full)
	}
	st := &unix.Stat_t{}
	for {
		err := unix.Fstatat(d.fd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "lstat", Path: full, Err: err}
		}
		return statInfo{name: filepath.Base(full), st: st}, nil
	}
}

// statInfo is an os.FileInfo of a stat result, as os.Lstat makes it (but
// for Sys, a *unix.Stat_t: ctime and keyOf take both).
type statInfo struct {
	name string
	st   *unix.Stat_t
}

func (fi statInfo) Name() string       { return fi.name }
func (fi statInfo) Size() int64        { return fi.st.Size }
func (fi statInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Sec, fi.st.Mtim.Nsec) }
func (fi statInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi statInfo) Sys() any           { return fi.st }

// Mode converts the stat mode as os does.
func (fi statInfo) Mode() os.FileMode {
	m := os.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & syscall.S_IFMT {
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
	if fi.st.Mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if fi.st.Mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if fi.st.Mode&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}
