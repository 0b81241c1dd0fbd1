package gitexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Project gives read-only access to the user's own git repository. Only
// subcommands that cannot write are allowed, and GIT_OPTIONAL_LOCKS=0 keeps even
// those from refreshing the index. Commands that compare with the work tree
// (status, diff without two commits) are refused: they rewrite .git/index.
type Project struct {
	Dir string // a directory inside the repository
}

// ErrRefused is wrapped by the error returned for a subcommand the Project runner
// does not allow.
var ErrRefused = errors.New("refused: the project repository is read-only for rewind")

// readOnly lists the subcommands Project allows. branch is allowed only as
// "branch --show-current", config only as "config -z --list".
var readOnly = map[string]bool{
	"rev-parse": true, "branch": true, "log": true, "show": true, "cat-file": true,
	"ls-tree": true, "ls-files": true, "rev-list": true, "for-each-ref": true,
	"diff-tree": true, "archive": true, "check-ignore": true, "config": true,
}

// Run runs a read-only git subcommand in the project and returns its stdout.
func (p Project) Run(ctx context.Context, args ...string) ([]byte, error) {
	return p.RunInput(ctx, nil, args...)
}

// RunInput is Run with stdin (check-ignore --stdin reads its paths there).
func (p Project) RunInput(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	out, _, err := p.run(ctx, stdin, args)
	return out, err
}

// RunWarn is Run that also returns git's stderr (warnings of a command that
// succeeded, such as a directory ls-files could not open).
func (p Project) RunWarn(ctx context.Context, args ...string) ([]byte, string, error) {
	return p.run(ctx, nil, args)
}

func (p Project) run(ctx context.Context, stdin io.Reader, args []string) ([]byte, string, error) {
	if err := checkReadOnly(args); err != nil {
		return nil, "", err
	}
	env := scrubbedEnv("GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0", "GIT_NO_LAZY_FETCH=1", "LC_ALL=C")
	return outputWarn(ctx, p.Dir, env, stdin, append(projectOverrides(), args...))
}

// projectOverrides are the -c settings of every command in the user's
// repository (Project and ProjectBranch): no fsmonitor hook, no pager, and
// no network. In a partial clone, reading a missing object would fetch it, a
// network call that writes packs into .git; every protocol refused makes it
// fail instead (a protocol.<name>.allow of the user's would win over
// protocol.allow alone; GIT_NO_LAZY_FETCH says so to git 2.44 and later).
func projectOverrides() []string {
	args := []string{"-c", "core.fsmonitor=false", "-c", "protocol.allow=never"}
	for _, proto := range []string{"file", "git", "ssh", "http", "https", "ext"} {
		args = append(args, "-c", "protocol."+proto+".allow=never")
	}
	return append(args, "--no-pager")
}

func checkReadOnly(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("git: no subcommand: %w", ErrRefused)
	}
	sub := args[0]
	refuse := func(why string) error {
		return fmt.Errorf("git %s: %s: %w", sub, why, ErrRefused)
	}
	if !readOnly[sub] {
		return refuse("not a read-only subcommand")
	}
	if sub == "branch" && (len(args) != 2 || args[1] != "--show-current") {
		return refuse("only --show-current is allowed")
	}
	if sub == "config" && (len(args) != 3 || args[1] != "-z" || args[2] != "--list") {
		return refuse("only -z --list is allowed")
	}
	for _, a := range args[1:] {
		if a == "--end-of-options" || a == "--" {
			break
		}
		switch {
		case a == "-o" || (sub == "archive" && strings.HasPrefix(a, "-o")) || strings.HasPrefix(a, "--output"):
			return refuse("writing to a file is not allowed")
		case strings.HasPrefix(a, "--remote") || strings.HasPrefix(a, "--exec"):
			return refuse("remote access is not allowed")
		}
	}
	return nil
}
