package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/manifest"
)

// `rewind dispatch` is a drop-in for crucible's `python3 scripts/dispatch.py`:
// the same subcommands and flags, the same stdout and stderr (unprefixed), the
// same exit codes (0, 1 for a refusal, 2 for usage), and manifest lines
// byte-identical to dispatch.py's. Usage errors are worded as argparse words
// them, with rewind's program name.

func dispatchCommand() *cli.Command {
	dir := &cli.StringFlag{Name: "dir", Usage: "the dispatch `DIR` (holds manifest.jsonl)", TakesFile: true}
	return &cli.Command{
		Name:  "dispatch",
		Usage: "record sub-agent dispatches in manifest.jsonl (a drop-in for crucible's dispatch.py)",
		Description: "The same commands, messages and exit codes (0, 1 refusal, 2 usage) as crucible's\n" +
			"scripts/dispatch.py, with manifest lines byte-identical to its own. Beyond it: every\n" +
			"append holds an flock on manifest.jsonl and fsyncs, `before --seq auto` allocates a seq\n" +
			"and appends in one locked step, and a torn last line is ended before appending.",
		Subcommands: []*cli.Command{
			{
				Name:      "seq",
				Usage:     "print the next seq: the highest seq in the manifest + 1 (1 when empty)",
				ArgsUsage: " ",
				Flags:     []cli.Flag{dir},
				Action:    dispatchSeq,
			},
			{
				Name:      "before",
				Usage:     "append the dispatched entry of a dispatch file",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					dir,
					&cli.StringFlag{Name: "seq", Usage: "the dispatch's `N`, or auto: allocate the highest seq + 1 (printed alone on stdout)"},
					&cli.StringFlag{Name: "file", Usage: "the dispatch `FILE`; input_chars is its length in characters", TakesFile: true},
					&cli.StringFlag{Name: "role", Usage: "the sub-agent's `ROLE`"},
					&cli.StringFlag{Name: "phase", Usage: "the pipeline `PHASE`"},
					&cli.StringFlag{Name: "task", Usage: "the task `N`"},
					&cli.StringFlag{Name: "model-tier", Usage: "the model `LABEL` (opus, sonnet, haiku, high, standard, low, or any)"},
					&cli.StringFlag{Name: "replay-of", Usage: "the seq `N` this dispatch replays"},
					&cli.StringFlag{Name: "replay-session", Usage: "the replay session `ID`"},
					&cli.StringFlag{Name: "mutation", Usage: "the template mutation `TEXT` (\"original.md -> replacement.md\")"},
				},
				Action: dispatchBefore,
			},
			{
				Name:      "after",
				Usage:     "append the completion of a dispatched seq",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					dir,
					&cli.StringFlag{Name: "seq", Usage: "the dispatched `N`"},
					&cli.StringFlag{Name: "status", Usage: "the `STATUS`: completed, failed, error or skipped"},
					&cli.StringFlag{Name: "summary", Usage: "one line of `TEXT`; cut to keep the manifest line within 4096 bytes"},
					&cli.StringFlag{Name: "output-chars", Usage: "the response length `C` in characters"},
					&cli.StringFlag{Name: "tool-calls", Usage: "the number `K` of tool calls"},
					&cli.StringFlag{Name: "duration", Usage: "the duration `S` in seconds"},
					&cli.StringFlag{Name: "actual-model", Usage: "the `MODEL` that actually answered"},
				},
				Action: dispatchAfter,
			},
			{
				Name:      "cleanup",
				Usage:     "copy the manifest and receipt ledger to the scratch directory and delete the dispatch directory",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					dir,
					&cli.StringFlag{Name: "scratch", Usage: "the scratch `DIR`", TakesFile: true},
					&cli.BoolFlag{Name: "failed", Usage: "copy the whole dispatch directory and leave it in place"},
				},
				Action: dispatchCleanup,
			},
		},
	}
}

// argparsePrefix resolves name, the part of the argument arg between "--" and
// any "=", when it is none of cmd's options, as argparse resolves an
// abbreviation: the one option of cmd (or help) whose name starts with it. It
// returns "" when none does, and, when several do, prints argparse's error
// to stderr and returns the exit.
func argparsePrefix(stderr io.Writer, where string, cmd *cli.Command, arg, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	var matches []string
	for _, long := range append([]string{"help"}, flagNames(cmd.Flags)...) {
		if strings.HasPrefix(long, name) {
			matches = append(matches, long)
		}
	}
	switch len(matches) {
	case 0:
		return "", nil
	case 1:
		return matches[0], nil
	}
	for i := range matches {
		matches[i] = "--" + matches[i]
	}
	msg := fmt.Sprintf("%s: error: ambiguous option: %s could match %s", where, arg, strings.Join(matches, ", "))
	fmt.Fprintln(stderr, msg)
	return "", named("flag_ambiguous", silentExit(exitUsage, msg))
}

// flagNames lists the long names of flags in their order.
func flagNames(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) > 1 {
				names = append(names, n)
			}
		}
	}
	return names
}

// argparseError prints a usage error as argparse does (without the usage
// line) and exits 2.
func argparseError(c *cli.Context, format string, a ...any) error {
	msg := fmt.Sprintf("%s: error: %s", c.Command.HelpName, fmt.Sprintf(format, a...))
	fmt.Fprintln(opts(c).Stderr, msg)
	return silentExit(exitUsage, msg)
}

// dispatchArgs checks the positional arguments and the required flags.
func dispatchArgs(c *cli.Context, required ...string) error {
	if c.NArg() > 0 {
		return argparseError(c, "unrecognized arguments: %s", strings.Join(c.Args().Slice(), " "))
	}
	var missing []string
	for _, name := range required {
		if !c.IsSet(name) {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return argparseError(c, "the following arguments are required: %s", strings.Join(missing, ", "))
	}
	return nil
}

// pyInt parses an int flag as Python's int() does: base 10, surrounding
// whitespace, a sign, and underscores between digits. Unlike Python, the value
// must fit 64 bits: big reports a well-formed value outside that range.
func pyInt(s string) (n int64, ok, big bool) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") || strings.Contains(t, "__") {
		return 0, false, false
	}
	body := strings.TrimLeft(t, "+-")
	if strings.HasPrefix(body, "_") {
		return 0, false, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, false, true
	}
	return n, err == nil, false
}

// intFlag reads an optional int flag (nil when not given).
func intFlag(c *cli.Context, name string) (*int64, error) {
	if !c.IsSet(name) {
		return nil, nil
	}
	v := c.String(name)
	n, ok, big := pyInt(v)
	if big {
		return nil, argparseError(c, "argument --%s: int value out of range: %s (the range is %d to %d)",
			name, manifest.PyRepr(v), int64(math.MinInt64), int64(math.MaxInt64))
	}
	if !ok {
		return nil, argparseError(c, "argument --%s: invalid int value: %s", name, manifest.PyRepr(v))
	}
	return &n, nil
}

func strFlag(c *cli.Context, name string) *string {
	if !c.IsSet(name) {
		return nil
	}
	s := c.String(name)
	return &s
}

// dispatchFailed prints a dispatch.py message and exits with its code.
func dispatchFailed(c *cli.Context, err error) error {
	var de *manifest.DispatchError
	var cf *manifest.CopyFailures
	if errors.As(err, &cf) {
		for _, line := range cf.Lines() {
			fmt.Fprintln(opts(c).Stderr, line)
		}
		fmt.Fprintln(opts(c).Stderr, cf.Error())
		return named("dispatch_refused", silentExit(exitFailure, cf.Error()))
	}
	if errors.As(err, &de) {
		fmt.Fprintln(opts(c).Stderr, de.Msg)
		if de.Usage {
			return silentExit(exitUsage, de.Msg)
		}
		return named("dispatch_refused", silentExit(exitFailure, de.Msg))
	}
	fmt.Fprintln(opts(c).Stderr, err)
	return silentExit(exitFailure, err.Error())
}

func dispatchSeq(c *cli.Context) error {
	if err := dispatchArgs(c, "dir"); err != nil {
		return err
	}
	n, err := manifest.NextSeq(c.String("dir"))
	if err != nil {
		return dispatchFailed(c, err)
	}
	if o := opts(c); o.JSON {
		return writeJSON(o, map[string]any{"seq": n})
	}
	fmt.Fprintln(opts(c).Stdout, n)
	return nil
}

func dispatchBefore(c *cli.Context) error {
	o := opts(c)
	if err := dispatchArgs(c, "dir", "seq", "file", "role"); err != nil {
		return err
	}
	auto := c.String("seq") == "auto"
	var d manifest.Dispatched
	if !auto {
		seq, err := intFlag(c, "seq")
		if err != nil {
			return err
		}
		d.Seq = *seq
	}
	task, err := intFlag(c, "task")
	if err != nil {
		return err
	}
	replayOf, err := intFlag(c, "replay-of")
	if err != nil {
		return err
	}
	file := c.String("file")
	d.File = manifest.PyBasename(file)
	d.Role = c.String("role")
	d.Phase = strFlag(c, "phase")
	d.Task = task
	d.ModelTier = strFlag(c, "model-tier")
	d.ReplayOf, d.ReplaySession, d.Mutation = replayOf, strFlag(c, "replay-session"), strFlag(c, "mutation")
	// A measurement failure never blocks a dispatch: input_chars is then null.
	if n, err := manifest.CountChars(file); err != nil {
		fmt.Fprintf(o.Stderr, "[dispatch WARN] cannot read dispatch file %s: %v; input_chars set to null\n", file, err)
	} else {
		d.InputChars = &n
	}
	seq, err := manifest.Before(c.String("dir"), d, auto, o.Stderr)
	if err != nil {
		return dispatchFailed(c, err)
	}
	msg := fmt.Sprintf("dispatched seq %d (%s, %s chars)", seq, d.File, manifest.IntStr(d.InputChars))
	if o.JSON {
		// The message stays on stderr, as with --seq auto.
		fmt.Fprintln(o.Stderr, msg)
		return writeJSON(o, map[string]any{"seq": seq, "file": d.File, "role": d.Role, "status": "dispatched", "input_chars": d.InputChars})
	}
	if auto {
		// The allocated seq is what a script reads; the message goes to stderr.
		fmt.Fprintln(o.Stdout, seq)
		fmt.Fprintln(o.Stderr, msg)
		return nil
	}
	fmt.Fprintln(o.Stdout, msg)
	return nil
}

func dispatchAfter(c *cli.Context) error {
	o := opts(c)
	if err := dispatchArgs(c, "dir", "seq", "status"); err != nil {
		return err
	}
	var comp manifest.Completion
	seq, err := intFlag(c, "seq")
	if err != nil {
		return err
	}
	comp.Seq = *seq
	comp.Status = c.String("status")
	for _, f := range []struct {
		name string
		dst  **int64
	}{{"output-chars", &comp.OutputChars}, {"tool-calls", &comp.ToolCalls}, {"duration", &comp.Duration}} {
		if *f.dst, err = intFlag(c, f.name); err != nil {
			return err
		}
	}
	comp.Summary = strFlag(c, "summary")
	comp.ActualModel = strFlag(c, "actual-model")
	file, err := manifest.After(c.String("dir"), comp, o.Stderr)
	if err != nil {
		return dispatchFailed(c, err)
	}
	if o.JSON {
		return writeJSON(o, map[string]any{"seq": comp.Seq, "file": file, "status": comp.Status})
	}
	fmt.Fprintf(o.Stdout, "%s seq %d (%s)\n", comp.Status, comp.Seq, file)
	return nil
}

func dispatchCleanup(c *cli.Context) error {
	if err := dispatchArgs(c, "dir", "scratch"); err != nil {
		return err
	}
	msg, err := manifest.Cleanup(c.String("dir"), c.String("scratch"), c.Bool("failed"))
	if err != nil {
		return dispatchFailed(c, err)
	}
	if o := opts(c); o.JSON {
		return writeJSON(o, map[string]any{"failed": c.Bool("failed"), "message": msg})
	}
	fmt.Fprintln(opts(c).Stdout, msg)
	return nil
}
