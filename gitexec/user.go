package gitexec

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
)

// User runs a user-supplied command line through sh -c in a directory, with the
// caller's environment plus Env. It never carries the shadow repository's GIT_*
// settings: the command sees the user's project as the user would.
type User struct {
	Dir string
	Env []string // extra KEY=VALUE pairs, added after the caller's environment
}

// Run runs command and returns its exit status. err is non-nil only when the
// command could not be started or was interrupted; a non-zero exit is reported
// through the status alone.
func (u User) Run(ctx context.Context, command string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = u.Dir
	cmd.Env = append(os.Environ(), u.Env...)
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	ownProcessGroup(cmd)
	err := cmd.Run()
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}
