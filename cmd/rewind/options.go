package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/gitexec"
)

// options are the global flags, resolved once in the app's Before and read by
// every command through opts(c).
type options struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	WorkTree string // absolute, symlinks resolved
	Store    string // "" means the default location for WorkTree
	JSON     bool
	Yes      bool
	NowSet   bool
	now      time.Time

	// hintCommand is how a hint runs rewind: see setHintCommand.
	hintCommand string

	colourOut bool // colour on stdout
	colourErr bool // colour on stderr
	resolved  bool // the global flags were read (resolveOptions ran)

	// progress: show progress lines (stderr is a terminal, no --json).
	progress bool
	// rawStderr is stderr itself; Stderr is wrapped while a progress line is
	// up (see startProgress).
	rawStderr io.Writer
}

// Now is the --now / REWIND_NOW time when given, else the current time, in UTC
// with second resolution (what every written timestamp carries).
func (o *options) Now() time.Time {
	if o.NowSet {
		return o.now
	}
	return time.Now().UTC().Truncate(time.Second)
}

func opts(c *cli.Context) *options {
	return c.App.Metadata["options"].(*options)
}

func (o *options) warnf(format string, a ...any) {
	label := "warning:"
	if o.colourErr {
		label = colourOn(color.FgYellow).Sprint(label)
	}
	fmt.Fprintf(o.Stderr, "rewind: %s %s\n", label, fmt.Sprintf(format, a...))
}

func (o *options) hintf(format string, a ...any) {
	label := "hint:"
	if o.colourErr {
		label = colourOn(color.FgCyan).Sprint(label)
	}
	fmt.Fprintf(o.Stderr, "rewind: %s %s\n", label, fmt.Sprintf(format, a...))
}

// colourOn is a colour that is on whatever fatih/color decided for stdout:
// stderr's colour follows whether stderr is a terminal.
func colourOn(attr color.Attribute) *color.Color {
	c := color.New(attr)
	c.EnableColor()
	return c
}

func (o *options) notef(format string, a ...any) {
	fmt.Fprintf(o.Stderr, "rewind: %s\n", fmt.Sprintf(format, a...))
}

// Interactive reports whether a question can be asked: stdin and stderr are both
// terminals.
func (o *options) Interactive() bool {
	return isTerminal(o.Stdin) && isTerminal(o.Stderr)
}

// confirm asks before a destructive action. --yes answers it; without a terminal
// and without --yes it is exit 3, so a script never hangs on a prompt.
func (o *options) confirm(question string) error {
	if o.Yes {
		return nil
	}
	if !o.Interactive() {
		return withHint(exitErrorf(exitConfirm, "confirmation needed and no terminal to ask on: %s", question),
			"run again with --yes to confirm")
	}
	fmt.Fprintf(o.Stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(o.Stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return exitErrorf(exitFailure, "not confirmed; nothing was changed")
}

func isTerminal(v any) bool {
	if cw, ok := v.(*countingWriter); ok { // run's stdout, counted for --json
		v = cw.w
	}
	f, ok := v.(interface{ Fd() uintptr })
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// terminalWidth is the width of the terminal w writes to, 0 when unknown.
func terminalWidth(w io.Writer) int {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// projectTop is the default work tree for dir: the top level of the git
// repository dir is in, as git finds it (read-only), else dir itself. From
// project/src, a checkpoint holds the whole project in the project's store.
func projectTop(ctx context.Context, dir string) string {
	if top, ok := checkpoint.TopLevel(dir); ok {
		return top
	}
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := gitexec.Project{Dir: dir}.Run(ctx, "rev-parse", "--show-toplevel")
	if top := strings.TrimSuffix(string(out), "\n"); err == nil && top != "" && filepath.IsAbs(top) {
		return top
	}
	return dir
}

// The range of --now: what git can record as a commit date and RFC 3339 can
// write.
var (
	minNow = time.Unix(0, 0).UTC()
	maxNow = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// setHintCommand sets the command line a hint runs rewind with, so that the
// hint, pasted in any directory, reaches the same work tree and store:
// "rewind", with the -C and --store that need repeating (pasteNeeds), as
// absolute paths. A store belongs to one work tree: with --store comes -C.
// The hook's (fromHook) work tree is its payload's, and its environment
// Claude Code's, not the shell's the hint is pasted in: both are repeated.
func (o *options) setHintCommand(c *cli.Context, fromHook bool) {
	store := o.Store != "" && (fromHook || pasteNeeds(c, "store", "REWIND_STORE"))
	o.hintCommand = "rewind"
	if store || fromHook || pasteNeeds(c, "work-tree", "REWIND_WORK_TREE") {
		o.hintCommand += " -C " + shellArg(o.WorkTree)
	}
	if store {
		o.hintCommand += " --store " + shellArg(o.Store)
	}
}

// pasteNeeds reports whether a pasted command needs the global flag name
// (with the environment variable env) repeated: given on the command line,
// or through the environment as a relative path, which the pasted command
// would read in another directory.
func pasteNeeds(c *cli.Context, name, env string) bool {
	v := c.String(name)
	return c.IsSet(name) && v != "" && (v != os.Getenv(env) || !filepath.IsAbs(v))
}

// resolveOptions turns the parsed global flags into options.
func resolveOptions(c *cli.Context, o *options) error {
	o.JSON = c.Bool("json")
	o.Yes = c.Bool("yes")
	o.Store = c.String("store")
	if o.Store != "" {
		abs, err := filepath.Abs(o.Store)
		if err != nil {
			return usageErrorf("--store %q: %v", o.Store, err)
		}
		o.Store = abs
	}

	wt := c.String("work-tree")
	if wt == "" {
		var err error
		if wt, err = os.Getwd(); err != nil {
			return fmt.Errorf("current directory: %w", err)
		}
		wt = projectTop(c.Context, wt)
	}
	abs, err := filepath.Abs(wt)
	if err != nil {
		return usageErrorf("--work-tree %q: %v", wt, err)
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return withHint(usageErrorf("work tree %s is not a directory", abs),
			"pass an existing directory with --work-tree/-C or REWIND_WORK_TREE")
	}
	// The physical path: the store location is derived from it, and the same
	// directory reached through a symlink must find the same store.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	o.WorkTree = abs
	o.setHintCommand(c, false)

	if v := c.String("now"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return withHint(usageErrorf("invalid --now/REWIND_NOW %q: not an RFC 3339 time", v),
				"use a time such as 2026-01-02T15:04:05Z")
		}
		// git stores commit dates as seconds since 1970 and refuses earlier
		// ones; Go's RFC 3339 reads no year past 9999.
		if t.Before(minNow) {
			return withHint(usageErrorf("invalid --now/REWIND_NOW %q: before 1970, which git cannot record", v),
				"use a time from "+minNow.Format(time.RFC3339)+" to "+maxNow.Format(time.RFC3339))
		}
		o.now, o.NowSet = t.UTC().Truncate(time.Second), true
	}

	switch mode := c.String("color"); mode {
	case "never":
	case "always":
		o.colourOut, o.colourErr = true, true
	case "auto", "":
		plain := os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb"
		o.colourOut = !plain && isTerminal(o.Stdout)
		o.colourErr = !plain && isTerminal(o.Stderr)
	default:
		return usageErrorf("invalid --color %q: want auto, always or never", mode)
	}
	// fatih/color decides once, at init, from stdout alone; rewind decides here.
	color.NoColor = !o.colourOut
	o.resolved = true
	o.progress = !o.JSON && isTerminal(o.rawStderr) && os.Getenv("TERM") != "dumb"
	return nil
}
