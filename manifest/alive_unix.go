//go:build unix

package manifest

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this pid exists on this host
// (signal 0 checks without sending anything; EPERM means it exists and belongs
// to another user).
func processAlive(pid int64) bool {
	if pid <= 0 || pid != int64(int(pid)) {
		return false
	}
	err := syscall.Kill(int(pid), 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
