package gitexec

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill git when rewind dies, even by kill -9, so a
// git child never outlives the lock rewind held for it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// ownProcessGroup puts a user command in its own process group and makes
// cancellation kill the whole group, so an interrupted `sh -c` leaves no
// grandchildren behind.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
