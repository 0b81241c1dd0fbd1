package main

// The man page: `make man` runs the hidden `rewind __man`, which renders
// rewind.1 (roff) from the command table the help pages come from: the same
// usages, descriptions, options with their real defaults, and examples.

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

const manCommand = "__man"

func writeMan(app *cli.App, stdout, stderr io.Writer) int {
	var b strings.Builder
	manPage(&b, app)
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		fmt.Fprintf(stderr, "rewind: man page: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func manPage(b *strings.Builder, app *cli.App) {
	fmt.Fprintf(b, ".TH REWIND 1 \"\" \"rewind %s\" \"User Commands\"\n", roffEscape(version))
	fmt.Fprintf(b, ".SH NAME\nrewind \\- %s\n", roffEscape(app.Usage))
	fmt.Fprintf(b, ".SH SYNOPSIS\n.B rewind\n[global options] COMMAND [options] [ARGS...]\n")
	fmt.Fprintf(b, ".SH DESCRIPTION\n")
	manText(b, app.Description)
	fmt.Fprintf(b, ".PP\nFlags are accepted before or after the command and its arguments; an argument that starts with \\- goes after \\-\\-.\n")
	fmt.Fprintf(b, ".SH GLOBAL OPTIONS\n")
	manFlags(b, app.Flags)
	fmt.Fprintf(b, ".TP\n.B \\-\\-version, \\-v\nprint rewind's version (as rewind version)\n")
	fmt.Fprintf(b, ".SH COMMANDS\n")
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			name := prefix + " " + c.Name
			synopsis := name + " COMMAND"
			if len(c.Subcommands) == 0 {
				synopsis = name + " [options]"
				if a := strings.TrimSpace(c.ArgsUsage); a != "" {
					synopsis += " " + a
				}
			}
			fmt.Fprintf(b, ".SS \"%s\"\n", roffEscape(synopsis))
			manText(b, c.Usage+".")
			if c.Description != "" {
				fmt.Fprintf(b, ".PP\n")
				manText(b, c.Description)
			}
			if len(c.Flags) > 0 {
				fmt.Fprintf(b, ".PP\nOptions:\n.RS\n")
				manFlags(b, c.Flags)
				fmt.Fprintf(b, ".RE\n")
			}
			if len(c.Subcommands) == 0 {
				var globals []string
				for _, f := range honouredGlobals(app, pathTo(app, strings.Fields(name)[1:])) {
					globals = append(globals, dashed(f.Names()[0]))
				}
				fmt.Fprintf(b, ".PP\nGlobal options it honours: %s.\n", roffEscape(strings.Join(globals, ", ")))
			}
			if ex := examples[strings.TrimPrefix(name, "rewind ")]; len(ex) > 0 {
				fmt.Fprintf(b, ".PP\nExamples:\n.RS\n.nf\n")
				for _, e := range ex {
					fmt.Fprintf(b, "%s\n", roffLine(e))
				}
				fmt.Fprintf(b, ".fi\n.RE\n")
			}
			walk(name, c.Subcommands)
		}
	}
	walk("rewind", app.Commands)

	fmt.Fprintf(b, ".SH EXIT STATUS\n")
	for _, e := range []struct {
		code int
		text string
	}{
		{exitOK, "success"},
		{exitFailure, "failure, or a refusal to act on bad state"},
		{exitUsage, "usage: unknown command or flag, bad argument value"},
		{exitConfirm, "confirmation needed: a destructive action without \\-\\-yes and no terminal"},
		{exitGuard, "fail-closed guard: branch mismatch, stale or absent snapshot, changed spec hash"},
		{exitBusy, "busy: another rewind holds the store or manifest lock past the wait time"},
		{exitInterrupted, "interrupted (SIGINT or SIGTERM)"},
	} {
		fmt.Fprintf(b, ".TP\n.B %d\n%s\n", e.code, e.text)
	}
	fmt.Fprintf(b, ".PP\nrewind dispatch keeps dispatch.py's own codes (0, 1 refusal, 2 usage).\n")

	fmt.Fprintf(b, ".SH ENVIRONMENT\n")
	env := map[string]string{}
	var collect func(cmds []*cli.Command, flags []cli.Flag)
	collect = func(cmds []*cli.Command, flags []cli.Flag) {
		for _, f := range flags {
			if d, ok := f.(cli.DocGenerationFlag); ok {
				for _, v := range d.GetEnvVars() {
					env[v] = dashed(f.Names()[0])
				}
			}
		}
		for _, c := range cmds {
			collect(c.Subcommands, c.Flags)
		}
	}
	collect(app.Commands, app.Flags)
	env["NO_COLOR"] = ""
	env["REWIND_TRACE"] = ""
	var names []string
	for n := range env {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		text := "the default of " + env[n]
		switch n {
		case "NO_COLOR":
			text = "when set and not empty, no colour (\\-\\-color=auto)"
		case "REWIND_TRACE":
			text = "1 prints each git command line rewind runs on stderr"
		}
		fmt.Fprintf(b, ".TP\n.B %s\n%s\n", n, roffEscape(text))
	}
	fmt.Fprintf(b, ".SH SEE ALSO\n.BR git (1)\n")
}

// pathTo finds the command path names spell.
func pathTo(app *cli.App, names []string) []*cli.Command {
	var path []*cli.Command
	choices := app.Commands
	for _, n := range names {
		c := findCommand(choices, n)
		if c == nil {
			break
		}
		path = append(path, c)
		choices = c.Subcommands
	}
	return path
}

func manFlags(b *strings.Builder, flags []cli.Flag) {
	for _, r := range flagRows(flags) {
		fmt.Fprintf(b, ".TP\n.B %s\n%s\n", roffEscape(r[0]), roffLine(r[1]))
	}
}

// manText writes hand-wrapped text as filled roff paragraphs.
func manText(b *strings.Builder, text string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			b.WriteString(".PP\n")
			continue
		}
		if strings.HasPrefix(line, " ") {
			b.WriteString(".br\n")
		}
		b.WriteString(roffLine(strings.TrimSpace(line)) + "\n")
	}
}

// roffLine escapes a line of text so that roff prints it as it is.
func roffLine(s string) string {
	s = roffEscape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = "\\&" + s
	}
	return s
}

func roffEscape(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}
