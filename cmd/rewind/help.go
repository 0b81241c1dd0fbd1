package main

// Help: rewind renders its own help pages from the command table, instead of
// urfave/cli's templates, so that every page lists the global flags the command
// honours, shows defaults only where they are real, wraps long option text into
// a readable column, and ends with examples.

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

// helpWidth is the width help text is wrapped to.
const helpWidth = 80

// helpRequest is a command line that asks for help (--help, -h, help or h at
// any level): reorderArgs's output ends with --help.
func helpRequest(args []string) bool {
	return len(args) > 1 && args[len(args)-1] == "--help"
}

// commandPath is the chain of commands a reordered command line names.
func commandPath(app *cli.App, args []string) []*cli.Command {
	var path []*cli.Command
	choices := app.Commands
	flags := flagTable(app.Flags)
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) > 1 && a[0] == '-' {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if f := flags[name]; f != nil && takesValue(f) && !hasValue {
				i++
			}
			continue
		}
		cmd := findCommand(choices, a)
		if cmd == nil {
			break
		}
		path = append(path, cmd)
		choices = cmd.Subcommands
		flags = flagTable(cmd.Flags)
	}
	return path
}

// printHelp writes the help page of the command path names (the top level when
// path is empty).
func printHelp(w io.Writer, app *cli.App, path []*cli.Command) {
	name := "rewind"
	for _, c := range path {
		name += " " + c.Name
	}
	var (
		usage, description string
		subcommands        []*cli.Command
		flags              []cli.Flag
		globals            []cli.Flag
		leaf               bool
		argsUsage          string
	)
	if len(path) == 0 {
		usage, description, subcommands, globals = app.Usage, app.Description, app.Commands, app.Flags
	} else {
		cmd := path[len(path)-1]
		usage, description, subcommands, flags = cmd.Usage, cmd.Description, cmd.Subcommands, cmd.Flags
		leaf = len(subcommands) == 0
		argsUsage = strings.TrimSpace(cmd.ArgsUsage)
		if leaf {
			globals = honouredGlobals(app, path)
		}
	}

	fmt.Fprintf(w, "NAME:\n%s\n\n", wrapIndented(name+" - "+usage, 3, 3+len(name)+3))

	fmt.Fprintf(w, "USAGE:\n")
	switch {
	case len(path) == 0:
		fmt.Fprintf(w, "   rewind [global options] COMMAND [options] [ARGS...]\n")
	case !leaf:
		fmt.Fprintf(w, "   %s COMMAND [options] [ARGS...]\n", name)
	default:
		line := name + " [options]"
		if argsUsage != "" {
			line += " " + argsUsage
		}
		fmt.Fprintf(w, "   %s\n", line)
	}

	if description != "" {
		fmt.Fprintf(w, "\nDESCRIPTION:\n")
		for _, line := range reflow(description, 3) {
			fmt.Fprintf(w, "%s\n", line)
		}
	}

	if !leaf {
		var rows [][2]string
		for _, c := range subcommands {
			if c.Hidden {
				continue
			}
			rows = append(rows, [2]string{strings.Join(append([]string{c.Name}, c.Aliases...), ", "), c.Usage})
		}
		rows = append(rows, [2]string{"help, h", "show help for a command: " + name + " help COMMAND"})
		fmt.Fprintf(w, "\nCOMMANDS:\n")
		writeColumns(w, rows)
	}

	if len(path) > 0 {
		fmt.Fprintf(w, "\nOPTIONS:\n")
		rows := flagRows(flags)
		rows = append(rows, [2]string{"--help, -h", "show this help"})
		writeColumns(w, rows)
	}
	if len(globals) > 0 {
		if len(path) == 0 {
			fmt.Fprintf(w, "\nGLOBAL OPTIONS (before or after the command):\n")
			rows := flagRows(globals)
			rows = append(rows, [2]string{"--help, -h", "show help"})
			rows = append(rows, [2]string{"--version, -v", "print rewind's version (as rewind version)"})
			writeColumns(w, rows)
		} else {
			fmt.Fprintf(w, "\nGLOBAL OPTIONS (this command honours):\n")
			writeColumns(w, flagRows(globals))
		}
	}

	if ex := examples[strings.TrimPrefix(name, "rewind ")]; len(ex) > 0 && len(path) > 0 {
		fmt.Fprintf(w, "\nEXAMPLES:\n")
		for _, e := range ex {
			fmt.Fprintf(w, "   %s\n", e)
		}
	} else if len(path) == 0 {
		fmt.Fprintf(w, "\nEXAMPLES:\n")
		for _, e := range examples[""] {
			fmt.Fprintf(w, "   %s\n", e)
		}
	}
}

// printUsage is the short form of the top-level or a group's help, for a command
// line that names no command (on stderr, with exit 2).
func printUsage(w io.Writer, app *cli.App, path []*cli.Command) {
	name := "rewind"
	subcommands := app.Commands
	for _, c := range path {
		name += " " + c.Name
		subcommands = c.Subcommands
	}
	fmt.Fprintf(w, "usage: %s COMMAND [options] [ARGS...]\n\ncommands:\n", name)
	var rows [][2]string
	for _, c := range subcommands {
		if !c.Hidden {
			rows = append(rows, [2]string{c.Name, c.Usage})
		}
	}
	writeColumns(w, rows)
	fmt.Fprintln(w)
}

// honoured lists, per command, the global flags it reads besides --json and
// --color (which every command takes). A command missing here shows them all.
var honoured = map[string][]string{
	"version":            {},
	"checkpoint create":  {"work-tree", "store", "now"},
	"checkpoint list":    {"work-tree", "store"},
	"checkpoint show":    {"work-tree", "store"},
	"checkpoint diff":    {"work-tree", "store"},
	"checkpoint restore": {"work-tree", "store", "now", "yes"},
	"checkpoint prune":   {"work-tree", "store", "yes"},
	"checkpoint adopt":   {"work-tree", "store", "yes"},
	"checkpoint status":  {"work-tree", "store"},
	"dispatch":           {},
	"manifest":           {},
	"pipeline":           {"work-tree", "now"},
	"replay":             {"work-tree", "store", "now", "yes"},
	"node":               {"work-tree"},
	"state":              {"work-tree", "now"},
	"demo":               {"now"},
}

// honouredGlobals is the global flags the command at path reads, in the order
// of the global flag table.
func honouredGlobals(app *cli.App, path []*cli.Command) []cli.Flag {
	var names []string
	found := false
	// The most specific entry wins: "checkpoint restore", then "checkpoint".
	for n := len(path); n > 0 && !found; n-- {
		var parts []string
		for _, c := range path[:n] {
			parts = append(parts, c.Name)
		}
		names, found = honoured[strings.Join(parts, " ")]
	}
	if !found {
		return app.Flags
	}
	want := map[string]bool{"json": true, "color": true}
	for _, n := range names {
		want[n] = true
	}
	var out []cli.Flag
	for _, f := range app.Flags {
		if want[f.Names()[0]] {
			out = append(out, f)
		}
	}
	return out
}

// examples are one or two command lines per command, shown at the end of its
// help. The key "" is the top level's.
var examples = map[string][]string{
	"": {
		"rewind checkpoint create --reason pre-wave-1 --source build",
		"rewind replay --dry-run",
		"rewind help checkpoint restore",
	},
	"version":            {"rewind version", "rewind version --json"},
	"checkpoint":         {"rewind checkpoint create --reason pre-wave-1", "rewind checkpoint restore pre-wave-1 --dry-run"},
	"checkpoint create":  {"rewind checkpoint create --reason pre-wave-2 --source build", "rewind -C ~/src/app checkpoint create --reason before-refactor"},
	"checkpoint list":    {"rewind checkpoint list --limit 10", "rewind checkpoint list --json"},
	"checkpoint show":    {"rewind checkpoint show latest", "rewind checkpoint show pre-wave-2"},
	"checkpoint diff":    {"rewind checkpoint diff pre-wave-1 pre-wave-2", "rewind checkpoint diff latest --patch   # the checkpoint against the work tree"},
	"checkpoint restore": {"rewind checkpoint restore pre-wave-2 --dry-run", "rewind checkpoint restore latest~1 --file src/app.go --yes"},
	"checkpoint prune":   {"rewind checkpoint prune --keep 20 --yes"},
	"checkpoint adopt":   {"rewind checkpoint adopt --from ~/src/old-name"},
	"checkpoint status":  {"rewind checkpoint status", "rewind checkpoint status --json"},
	"dispatch":           {"rewind dispatch seq --dir \"$DISPATCH_DIR\""},
	"dispatch seq":       {"seq=$(rewind dispatch seq --dir \"$DISPATCH_DIR\")"},
	"dispatch before":    {"rewind dispatch before --dir \"$DISPATCH_DIR\" --seq 3 --file 3-implementer.md --role implementer --phase 3 --task 1"},
	"dispatch after":     {"rewind dispatch after --dir \"$DISPATCH_DIR\" --seq 3 --status completed --summary 'Task 1 done'"},
	"dispatch cleanup":   {"rewind dispatch cleanup --dir \"$DISPATCH_DIR\" --scratch \"$SCRATCH\""},
	"manifest show":      {"rewind manifest show \"$SCRATCH\"", "rewind manifest show /tmp/crucible-dispatch-1772359200 --json"},
	"manifest check":     {"rewind manifest check /tmp/crucible-dispatch-1772359200/manifest.jsonl"},
	"manifest stats":     {"rewind manifest stats \"$SCRATCH\""},
	"pipeline start":     {"rewind pipeline start --skill build"},
	"pipeline status":    {"rewind pipeline status", "rewind pipeline status --json"},
	"replay":             {"rewind replay --dry-run", "rewind replay \"$SCRATCH\" --yes --exec ./run-agent.sh"},
	"demo":               {"rewind demo", "rewind demo --keep /tmp/rewind-demo"},
	"completion":         {"source <(rewind completion bash)", "rewind completion fish > ~/.config/fish/completions/rewind.fish"},
	"manifest":           {"rewind manifest show \"$SCRATCH\""},
	"pipeline":           {"rewind pipeline start --skill build", "rewind pipeline status"},
	"pipeline phase":     {"rewind pipeline phase 3"},
	"pipeline finish":    {"rewind pipeline finish", "rewind pipeline finish --failed   # keep the dispatch directory"},
	"node":               {"rewind node list .cool-workflow/runs/RUN_ID"},
	"node list":          {"rewind node list .cool-workflow/runs/RUN_ID"},
	"node snapshot":      {"rewind node snapshot .cool-workflow/runs/RUN_ID NODE_ID"},
	"node diff":          {"rewind node diff .cool-workflow/runs/RUN_ID SNAPSHOT_A SNAPSHOT_B"},
	"node replay":        {"rewind node replay .cool-workflow/runs/RUN_ID SNAPSHOT"},
	"node verify":        {"rewind node verify .cool-workflow/runs/RUN_ID REPLAY"},
	"state":              {"rewind state check", "rewind state resume specs/001-login"},
	"state check":        {"rewind state check", "rewind state check specs/001-login --json"},
	"state resume":       {"rewind state resume specs/001-login"},
	"state recover":      {"rewind state recover"},
	"state archive":      {"rewind state archive"},
	"state write":        {"rewind state write specs/001-login/.pipeline-state.md < new-state.md"},
	"state set":          {"rewind state set --phase ARCHITECTURE --status in_progress"},
}

var placeholderRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("`([^`]+)`") })

// flagRows renders flags as help rows: names with the value's placeholder, then
// the usage with its real default and environment variables.
func flagRows(flags []cli.Flag) [][2]string {
	var rows [][2]string
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		d, ok := f.(cli.DocGenerationFlag)
		if !ok {
			continue
		}
		usage := d.GetUsage()
		placeholder := ""
		if d.TakesValue() {
			if m := placeholderRE().FindStringSubmatch(usage); m != nil {
				placeholder = m[1]
			} else {
				placeholder = defaultPlaceholder(f)
			}
		}
		usage = placeholderRE().ReplaceAllString(usage, "$1")
		var names []string
		for i, n := range f.Names() {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			if i == 0 && placeholder != "" {
				names = append(names, dash+n+" "+placeholder)
			} else {
				names = append(names, dash+n)
			}
		}
		if def := realDefault(d); def != "" {
			usage += " (default: " + def + ")"
		}
		if env := d.GetEnvVars(); len(env) > 0 {
			usage += " [$" + strings.Join(env, ", $") + "]"
		}
		rows = append(rows, [2]string{strings.Join(names, ", "), usage})
	}
	return rows
}

func defaultPlaceholder(f cli.Flag) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag:
		return "N"
	}
	return "VALUE"
}

// realDefault is the default worth showing: none for a flag whose zero value
// means "not given" (false, 0, ""), unless the flag spells its default out.
func realDefault(d cli.DocGenerationFlag) string {
	def := strings.Trim(d.GetDefaultText(), `"`)
	switch def {
	case "", "0", "false", "[]", "0s":
		return ""
	}
	return def
}

// writeColumns writes rows as two columns: names, then text wrapped to
// helpWidth. A name too long for the column gets a line of its own.
func writeColumns(w io.Writer, rows [][2]string) {
	const maxName = 26
	col := 0
	for _, r := range rows {
		if n := len(r[0]); n <= maxName && n > col {
			col = n
		}
	}
	indent := 3 + col + 2
	for _, r := range rows {
		if len(r[0]) > col {
			fmt.Fprintf(w, "   %s\n%s\n", r[0], wrapIndented(r[1], indent, indent))
			continue
		}
		first := "   " + r[0] + strings.Repeat(" ", col-len(r[0])+2)
		fmt.Fprintf(w, "%s\n", first+wrapIndented(r[1], 0, indent)[0:])
	}
}

// wrapIndented wraps text at word boundaries to helpWidth: the first line is
// indented by first spaces, the rest by rest spaces.
func wrapIndented(text string, first, rest int) string {
	words := strings.Fields(text)
	if len(words) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", first))
	lineLen := first
	if first == 0 {
		lineLen = rest // a continuation of a line already started at column rest
	}
	for i, word := range words {
		if i > 0 {
			if lineLen+1+len(word) > helpWidth {
				b.WriteString("\n" + strings.Repeat(" ", rest))
				lineLen = rest
			} else {
				b.WriteByte(' ')
				lineLen++
			}
		}
		b.WriteString(word)
		lineLen += len(word)
	}
	return b.String()
}

// reflow rewraps a description written for another width to helpWidth, keeping
// its paragraphs (blank lines) and list items (lines that start indented or
// with "- "), indented by indent spaces.
func reflow(text string, indent int) []string {
	var out []string
	var block []string // the words of the block being gathered
	blockIndent, contIndent := 0, 0
	flush := func() {
		if len(block) > 0 {
			out = append(out, wrapIndented(strings.Join(block, " "), indent+blockIndent, indent+contIndent))
		}
		block = nil
	}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case trimmed == "":
			flush()
			out = append(out, "")
			continue
		case len(block) > 0 && contIndent > blockIndent && len(line)-len(trimmed) == contIndent:
			// The continuation of a list item.
		case len(trimmed) != len(line) || strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* "):
			flush()
			blockIndent = len(line) - len(trimmed)
			contIndent = blockIndent
			if strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* ") {
				contIndent += 2
			}
		case len(block) == 0:
			blockIndent, contIndent = 0, 0
		}
		block = append(block, trimmed)
	}
	flush()
	return out
}
