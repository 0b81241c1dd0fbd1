//go:build unix && !linux

package gitexec

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has no equivalent outside Linux; exec.CommandContext still kills
// git when rewind is interrupted.
func setDeathSignal(cmd *exec.Cmd) {}

// ownProcessGroup puts a user command in its own process group and makes
// cancellation kill the whole group.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
