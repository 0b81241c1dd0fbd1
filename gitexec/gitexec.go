// Package gitexec is the only place in rewind that starts a process.
//
// It offers four runners:
//
//   - Shadow runs git against a shadow repository (rewind's checkpoint store)
//     with an environment built from scratch, so no inherited GIT_* variable, user
//     or system config, hook, filter, fsmonitor or template can change what is
//     stored or run a foreign command.
//   - Project gives read-only access to the user's own repository: an allow-list
//     of subcommands that cannot write, so "never modify the project's .git" holds
//     by construction.
//   - ProjectBranch is the one exception to that, and does one thing: move the
//     current branch back to an ancestor of HEAD (replay, after the user
//     confirmed the restore of a checkpoint that recorded that commit), keeping
//     the old HEAD reachable through the reflog and ORIG_HEAD.
//   - User runs a user-supplied shell command (replay --exec, restore --verify) in
//     the work tree with the caller's environment and never the shadow repository's.
//
// Every git failure is returned as *Error, which keeps the argument list, the
// directory, the exit code and git's stderr. Setting REWIND_TRACE=1 makes cmd/rewind
// point Trace at stderr, and every git command line is printed before it runs.
package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Trace, when not nil, receives one line per git command before it starts,
// and one with its subcommand and how long it took when it ends.
var Trace io.Writer

var traceMu sync.Mutex

// TraceStep reports to Trace how long a step of rewind's own took since start
// (a stat walk, a directory scan), so that the trace accounts for the time
// between git's calls as well as theirs.
func TraceStep(name string, start time.Time) {
	if Trace == nil {
		return
	}
	traceMu.Lock()
	fmt.Fprintf(Trace, "rewind: trace: %s: %s\n", name, time.Since(start).Round(100*time.Microsecond))
	traceMu.Unlock()
}

// Error is a git command that failed: it could not start, or it exited non-zero.
type Error struct {
	Args     []string // git's arguments, without the leading "git"
	Dir      string   // the work tree or repository it ran against
	ExitCode int      // -1 when git could not be started or was killed
	Stderr   string
	Err      error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "git %s", shortArgs(e.Args))
	if e.Dir != "" {
		fmt.Fprintf(&b, " in %s", e.Dir)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	if msg := strings.TrimSpace(e.Stderr); msg != "" {
		b.WriteString(": ")
		b.WriteString(firstLines(msg, 3))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// shortArgs drops the -c overrides every shadow call carries, which would bury the
// subcommand in an error message.
func shortArgs(args []string) string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-c" && i+1 < len(args) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return strings.Join(out, " ")
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "; ")
}

// run is the single choke point through which every git process starts. It
// returns what git wrote on stderr, which holds warnings even on success.
func run(ctx context.Context, dir string, env []string, stdin io.Reader, stdout io.Writer, args []string) (string, error) {
	return runWithStderr(ctx, dir, env, stdin, stdout, nil, args)
}

// runWithStderr is run with git's stderr sent to stderrTo instead, when that
// is not nil (a terminal whose output rewind reads; see RunProgress).
func runWithStderr(ctx context.Context, dir string, env []string, stdin io.Reader, stdout io.Writer, stderrTo *os.File, args []string) (string, error) {
	git, err := gitPath()
	if err != nil {
		return "", err
	}
	if Trace != nil {
		traceMu.Lock()
		fmt.Fprintf(Trace, "rewind: trace: git %s\n", quoteArgs(args))
		traceMu.Unlock()
	}
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if stderrTo != nil {
		cmd.Stderr = stderrTo
	}
	setDeathSignal(cmd)
	start := time.Now()
	err = cmd.Run()
	if Trace != nil {
		traceMu.Lock()
		fmt.Fprintf(Trace, "rewind: trace: git %s: %s\n", subcommand(args), time.Since(start).Round(100*time.Microsecond))
		traceMu.Unlock()
	}
	if err != nil {
		code := -1
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return stderr.String(), &Error{Args: args, Dir: dir, ExitCode: code, Stderr: stderr.String(), Err: err}
	}
	return stderr.String(), nil
}

// subcommand is the git subcommand in args, after the global options.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-c" || args[i] == "-C":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return args[i]
		}
	}
	return ""
}

// output runs git and returns its stdout.
func output(ctx context.Context, dir string, env []string, stdin io.Reader, args []string) ([]byte, error) {
	out, _, err := outputWarn(ctx, dir, env, stdin, args)
	return out, err
}

// outputWarn runs git and returns its stdout and its stderr.
func outputWarn(ctx context.Context, dir string, env []string, stdin io.Reader, args []string) ([]byte, string, error) {
	var out bytes.Buffer
	stderr, err := run(ctx, dir, env, stdin, &out, args)
	return out.Bytes(), stderr, err
}

// scrubbedEnv is the caller's environment minus every GIT_* variable (an inherited
// GIT_DIR or GIT_INDEX_FILE from a hook or a dev container would redirect git), and
// minus the keys that the caller sets again.
func scrubbedEnv(override ...string) []string {
	drop := map[string]bool{}
	for _, kv := range override {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	drop[mallocTrim[:strings.IndexByte(mallocTrim, '=')]] = true
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || drop[k] {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, mallocTrim)
	return append(env, override...)
}

// mallocTrim keeps glibc from handing freed memory back to the system at
// every free of a large block: git sets up zlib for each object it writes,
// and with the default threshold each setup faults its pages in afresh. An
// update-index of 100 files took a third of the page faults with it (3,000
// to 1,000) and 10-20 ms less. Other C libraries ignore the variable.
const mallocTrim = "MALLOC_TRIM_THRESHOLD_=33554432"

// quoteArgs renders args as a line a user can paste into a shell.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// ShellQuote quotes s for a command line a user can paste into a shell.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
