package gitexec

import (
	"context"
	"io"
	"os"
	"path/filepath"
)

// Arm runs git in an A/B replay's arm: a clone of the user's project that
// rewind makes, owns and removes. Making it never writes the project's
// repository: the clone is made with --no-local, so git reads the project
// through upload-pack (which only reads) instead of hard-linking or copying
// its object files, and the clone does not depend on the project's objects
// afterwards (--shared would also write nothing, but it would make the arm
// borrow the project's objects through an alternates file, so a gc or prune in
// the project while an arm runs could take objects the arm still needs).
// The clone's origin remote is removed, so an agent's `git push` in the arm
// cannot reach the project.
type Arm struct {
	Dir string // the clone's top level
	// ConfigHome is an empty directory used as HOME, XDG_CONFIG_HOME and
	// core.hooksPath: neither the user's configuration nor a hook runs while
	// rewind prepares an arm.
	ConfigHome string
}

func (a Arm) env() []string {
	return scrubbedEnv(
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"HOME="+a.ConfigHome,
		"XDG_CONFIG_HOME="+a.ConfigHome,
		"LC_ALL=C",
	)
}

func (a Arm) overrides() []string {
	return []string{"-c", "core.hooksPath=" + a.ConfigHome, "-c", "core.fsmonitor=false",
		"-c", "protocol.allow=never", "-c", "protocol.file.allow=always", "--no-pager"}
}

// Clone makes the arm: a clone of the repository at source, with no work
// tree files checked out, and no remote.
func (a Arm) Clone(ctx context.Context, source string) error {
	args := append(a.overrides(), "clone", "--no-local", "--no-checkout", "--quiet", "--end-of-options", source, a.Dir)
	if _, err := output(ctx, filepath.Dir(a.Dir), a.env(), nil, args); err != nil {
		return err
	}
	_, err := a.Run(ctx, "remote", "remove", "origin")
	return err
}

// Run runs a git subcommand in the arm.
func (a Arm) Run(ctx context.Context, args ...string) ([]byte, error) {
	return a.RunInput(ctx, nil, args...)
}

// RunInput is Run with stdin.
func (a Arm) RunInput(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	env := append(a.env(), "GIT_DIR="+filepath.Join(a.Dir, ".git"), "GIT_WORK_TREE="+a.Dir)
	return output(ctx, a.Dir, env, stdin, append(a.overrides(), args...))
}
