//go:build unix

package manifest

import (
	"os"
	"syscall"
)

// lockFile takes an flock on f, exclusive or shared, waiting for it. The
// kernel releases it when the process dies, so a lock is never stale.
func lockFile(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
