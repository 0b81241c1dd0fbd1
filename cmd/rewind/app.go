package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/gitexec"
)

// version is stamped by the Makefile (-ldflags "-X main.version=...").
var version = "dev"

// run is the whole program: it returns the exit code instead of exiting, so tests
// can call it.
func run(args []string) int {
	return runWith(args, os.Stdin, os.Stdout, os.Stderr)
}

func runWith(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("REWIND_TRACE") == "1" {
		gitexec.Trace = stderr
	}
	out := &countingWriter{w: stdout}
	app := newApp(stdin, out, stderr)
	if len(args) > 1 && args[1] == completeCommand {
		complete(app, args[2:], stdout)
		return exitOK
	}
	if len(args) > 1 && args[1] == manCommand {
		return writeMan(app, stdout, stderr)
	}
	jsonOut := wantsJSON(args)
	ordered, err := reorderArgs(app, args)
	if err == nil {
		err = runApp(ctx, app, ordered, out, stderr)
	}
	if err != nil && ctx.Err() != nil {
		err = context.Canceled
	}
	if isHookCall(args) {
		err = notBlocking(err)
	}
	o := app.Metadata["options"].(*options)
	restoreHintsRunAs(err, o.hintCommand)
	return report(out, stderr, jsonOut, err, stderrColour(o))
}

// stderrColour is whether errors are coloured: as --color decided for stderr,
// or, when the command line failed before the flags were read, as auto would.
func stderrColour(o *options) bool {
	if o.resolved {
		return o.colourErr
	}
	switch os.Getenv("REWIND_COLOR") {
	case "always":
		return true
	case "never":
		return false
	}
	return os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb" && isTerminal(o.rawStderr)
}

// runApp runs a reordered command line: help pages are rewind's own (see
// help.go); a command line that names no command, or a group and no command
// of it, prints the usage on stderr and is a usage error.
func runApp(ctx context.Context, app *cli.App, args []string, stdout, stderr io.Writer) error {
	path := commandPath(app, args)
	if helpRequest(args) {
		printHelp(stdout, app, path)
		return nil
	}
	if len(path) == 0 || (len(path[len(path)-1].Subcommands) > 0 && path[len(path)-1].Action == nil) {
		printUsage(stderr, app, path)
		where := "rewind"
		for _, c := range path {
			where += " " + c.Name
		}
		if len(path) == 0 {
			return withHint(usageErrorf("no command given"), "run 'rewind --help' for the commands and their options")
		}
		return withHint(usageErrorf("no command given for %s", where), "run '"+where+" --help' for its commands and their options")
	}
	return app.RunContext(ctx, args)
}

// commands lists the command groups. Register a group here only when it works.
func commands() []*cli.Command {
	return []*cli.Command{
		versionCommand(),
		withSubcommands(checkpointCommand(), shareCommands()...),
		dispatchCommand(),
		manifestCommand(),
		pipelineCommand(),
		replayCommand(),
		nodeCommand(),
		stateCommand(),
		demoCommand(),
		reportCommand(),
		skillsCommand(),
		hooksCommand(),
		hookCommand(),
		exportCommand(),
		importCommand(),
		completionCommand(),
	}
}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "work-tree", Aliases: []string{"C"}, EnvVars: []string{"REWIND_WORK_TREE"}, Usage: "the work tree `DIR` to act on (default: the top level of the git repository here, else the current directory)", TakesFile: true},
		&cli.StringFlag{Name: "store", EnvVars: []string{"REWIND_STORE"}, Usage: "the checkpoint store `DIR` (default: under ~/.claude/projects/)", TakesFile: true},
		&cli.BoolFlag{Name: "json", Usage: "print one JSON document on stdout"},
		&cli.StringFlag{Name: "color", EnvVars: []string{"REWIND_COLOR"}, Value: "auto", Usage: "colour output `WHEN`: auto, always or never (NO_COLOR turns auto off)"},
		&cli.StringFlag{Name: "now", EnvVars: []string{"REWIND_NOW"}, Usage: "take the current time from this RFC 3339 `TIME`, for reproducible output"},
		&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "confirm destructive actions (needed without a terminal)"},
	}
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	o := &options{Stdin: stdin, Stdout: stdout, Stderr: stderr, rawStderr: stderr}
	app := &cli.App{
		Name:  "rewind",
		Usage: "checkpoints, dispatch manifests and resume for AI-agent pipelines",
		Description: "rewind snapshots a working directory into a shadow git repository (the project's own .git\n" +
			"is never touched), records a pipeline's sub-agent dispatches, and resumes an interrupted\n" +
			"pipeline from its last verified boundary. It needs nothing but git " + gitexec.MinVersion + " or newer.",
		Flags:           globalFlags(),
		Commands:        commands(),
		HideVersion:     true,
		Reader:          stdin,
		Writer:          stdout,
		ErrWriter:       stderr,
		Metadata:        map[string]any{"options": o},
		ExitErrHandler:  func(*cli.Context, error) {}, // run() prints errors and picks exit codes
		OnUsageError:    onUsageError,
		Before:          func(c *cli.Context) error { return resolveOptions(c, o) },
		CommandNotFound: func(c *cli.Context, name string) {},
	}
	setUsageErrors(app.Commands)
	return app
}

func setUsageErrors(cmds []*cli.Command) {
	for _, cmd := range cmds {
		cmd.OnUsageError = onUsageError
		// urfave gives every command a "help"/"h" subcommand, so at a command
		// that takes arguments `rewind checkpoint restore h` would print help
		// and exit 0 instead of restoring the checkpoint named h. Only groups
		// keep it (rewind checkpoint h); --help works everywhere.
		if len(cmd.Subcommands) == 0 {
			cmd.HideHelpCommand = true
		}
		setUsageErrors(cmd.Subcommands)
	}
}

var flagNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`flag -(-?)([A-Za-z0-9-]+)`) })

// onUsageError turns urfave's flag parse errors (a bad value) into exit 2 with
// the flag spelled as users type it.
func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	var flag string
	msg := flagNameRE().ReplaceAllStringFunc(err.Error(), func(m string) string {
		name := flagNameRE().FindStringSubmatch(m)[2]
		if len(name) == 1 {
			flag = "-" + name
		} else {
			flag = "--" + name
		}
		return flag
	})
	if hint := valueHint(c, strings.TrimLeft(flag, "-")); hint != "" {
		return named("flag_value_invalid", withHint(usageErrorf("%s", msg), flag+" takes "+hint))
	}
	return named("flag_value_invalid", usageErrorf("%s", msg))
}

// valueHint names the kind of value a flag takes, for the hint under a bad one.
func valueHint(c *cli.Context, name string) string {
	var flags []cli.Flag
	if c.Command != nil {
		flags = c.Command.Flags
	}
	flags = append(flags, c.App.Flags...)
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			switch f.(type) {
			case *cli.DurationFlag:
				return "a duration with its unit, such as 30s, 500ms or 2m"
			case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag:
				return "a whole number"
			}
			return ""
		}
	}
	return ""
}
