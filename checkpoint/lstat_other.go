//go:build !linux

package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"
)

// dirStat is lstat of whole paths here (see lstat_linux.go).
type dirStat struct{}

func openDirStat(string) dirStat { return dirStat{} }

func (dirStat) close() {}

// fileLook is what a stat call says of a file, as judge needs it.
type fileLook struct {
	mode os.FileMode
	size int64
	key  statKey
}

// look is an lstat of root/rel.
func (dirStat) look(root, rel string) (fileLook, error) {
	fi, err := os.Lstat(root + "/" + rel)
	if err != nil {
		return fileLook{}, err
	}
	return fileLook{fi.Mode(), fi.Size(), keyOf(fi)}, nil
}

// ownLook is false here: lstat of a whole path follows a symlink above the
// file, so the capture leaves the look to git's diff-files (see
// differFromCache).
const ownLook = false

// dirOpen is how walkBeneath opens a directory (Linux's O_PATH is not
// everywhere).
const dirOpen = unix.O_RDONLY

// openDirBeneath opens nothing here: no capture asks (ownLook).
func openDirBeneath(string, string) (dirStat, bool) { return dirStat{}, false }

// lstatOrdinary does nothing here: every lstat is an ordinary call.
func lstatOrdinary() {}
