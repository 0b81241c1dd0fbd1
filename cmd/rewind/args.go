package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// reorderArgs rewrites a command line into the shape urfave/cli v2 parses: global
// flags right after the program name, each command's flags right after that
// command's name, then "--" and the positional arguments.
//
// urfave/cli v2 by itself stops parsing flags at the first positional argument,
// so `rewind checkpoint restore X --dry-run` would restore for real, and an
// unknown `-x` after a positional would be taken as a positional. Here every flag
// is recognised wherever it stands, an unknown one is a usage error (exit 2), and
// a literal "--" ends flag parsing.
func reorderArgs(app *cli.App, args []string) ([]string, error) {
	if len(args) == 0 {
		return args, nil
	}
	type level struct {
		cmd   *cli.Command
		flags []string
	}
	var (
		path        []*level
		globalArgs  []string
		positionals []string
		help        bool
		choices     = app.Commands // the subcommands the next word may name
		global      = flagTable(app.Flags)
	)
	where := func() string {
		w := "rewind"
		for _, l := range path {
			w += " " + l.cmd.Name
		}
		return w
	}

	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positionals = append(positionals, args[i+1:]...)
			i = len(args)

		case len(a) > 1 && a[0] == '-':
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if name == "h" || name == "help" {
				help = true
				continue
			}
			f, dest := global[name], &globalArgs
			for j := len(path) - 1; j >= 0; j-- {
				if cf, ok := flagTable(path[j].cmd.Flags)[name]; ok {
					f, dest = cf, &path[j].flags
					break
				}
			}
			if f == nil && len(path) == 2 && path[0].cmd.Name == "dispatch" && strings.HasPrefix(a, "--") {
				// dispatch.py's argparse takes unambiguous prefixes of long options.
				long, err := argparsePrefix(app.ErrWriter, where(), path[1].cmd, a, name)
				if err != nil {
					return nil, err
				}
				if long == "help" {
					help = true
					continue
				}
				if long != "" {
					_, value, _ := strings.Cut(a, "=")
					if hasValue {
						a = "--" + long + "=" + value
					} else {
						a = "--" + long
					}
					f, dest = flagTable(path[1].cmd.Flags)[long], &path[1].flags
				}
			}
			if f == nil {
				return nil, named("unknown_flag", withHint(usageErrorf("unknown flag %s for %s", a, where()),
					"run '"+where()+" --help' for its flags; a positional argument that starts with '-' goes after '--'"))
			}
			*dest = append(*dest, a)
			if takesValue(f) && !hasValue {
				if i+1 >= len(args) {
					return nil, named("flag_value_missing", usageErrorf("flag %s needs a value", a))
				}
				if len(path) == 2 && path[0].cmd.Name == "dispatch" && looksLikeOption(args[i+1]) {
					// argparse takes "--summary -x" for two options, and
					// refuses (--summary=-x is the way to pass it).
					msg := fmt.Sprintf("%s: error: argument %s: expected one argument", where(), strings.SplitN(a, "=", 2)[0])
					fmt.Fprintln(app.ErrWriter, msg)
					return nil, named("flag_value_missing", silentExit(exitUsage, msg))
				}
				i++
				*dest = append(*dest, args[i])
			}

		case len(positionals) == 0 && len(choices) > 0:
			if a == "help" && len(path) == 0 && !help {
				// `rewind help checkpoint restore` is `rewind checkpoint restore --help`,
				// so an unknown topic is an unknown command like any other.
				help = true
				continue
			}
			cmd := findCommand(choices, a)
			if cmd == nil {
				if len(path) > 0 && path[len(path)-1].cmd.Action != nil {
					positionals = append(positionals, a)
					continue
				}
				return nil, named("unknown_command", usageErrorf("unknown command %q for %s; run '%s --help' for the list", a, where(), where()))
			}
			path = append(path, &level{cmd: cmd})
			choices = cmd.Subcommands

		default:
			positionals = append(positionals, a)
		}
	}

	out := append([]string{args[0]}, globalArgs...)
	for _, l := range path {
		out = append(out, l.cmd.Name)
		out = append(out, l.flags...)
	}
	if help {
		return append(out, "--help"), nil
	}
	if len(positionals) > 0 {
		out = append(append(out, "--"), positionals...)
	}
	return out, nil
}

// looksLikeOption is argparse's test of a word after an option that takes a
// value: it starts with '-' and is not a negative number.
func looksLikeOption(s string) bool {
	return len(s) > 1 && s[0] == '-' && !negativeNumber.MatchString(s)
}

var negativeNumber = regexp.MustCompile(`^-\d+$|^-\d*\.\d+$`)

func flagTable(flags []cli.Flag) map[string]cli.Flag {
	t := map[string]cli.Flag{}
	for _, f := range flags {
		for _, n := range f.Names() {
			t[n] = f
		}
	}
	return t
}

func takesValue(f cli.Flag) bool {
	d, ok := f.(cli.DocGenerationFlag)
	return ok && d.TakesValue()
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}
