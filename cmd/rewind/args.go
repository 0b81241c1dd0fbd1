package main

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

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
			if (a == "--version" || a == "-v") && len(path) == 0 {
				// rewind --version is rewind version.
				if v := findCommand(app.Commands, "version"); v != nil {
					path = append(path, &level{cmd: v})
					choices = nil
					continue
				}
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
				known := allFlagNames(app.Flags)
				for _, l := range path {
					known = append(known, allFlagNames(l.cmd.Flags)...)
				}
				var hints []string
				if s := nearest(name, known); s != "" {
					hints = append(hints, "did you mean "+dashed(s)+"?")
				}
				hints = append(hints, "run '"+where()+" --help' for its flags; a positional argument that starts with '-' goes after '--'")
				return nil, named("unknown_flag", withHint(usageErrorf("unknown flag %s for %s", a, where()), hints...))
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
			if (a == "help" || a == "h") && !help && findCommand(choices, a) == nil {
				// `rewind help checkpoint restore` and `rewind checkpoint help
				// restore` are `rewind checkpoint restore --help`, so an unknown
				// topic is an unknown command like any other.
				help = true
				continue
			}
			cmd := findCommand(choices, a)
			if cmd == nil {
				if len(path) > 0 && path[len(path)-1].cmd.Action != nil {
					positionals = append(positionals, a)
					continue
				}
				err := usageErrorf("unknown command %q for %s; run '%s --help' for the list", a, where(), where())
				var names []string
				for _, c := range choices {
					if !c.Hidden {
						names = append(names, c.Name)
					}
				}
				if s := nearest(a, names); s != "" {
					return nil, named("unknown_command", withHint(err, "did you mean "+strings.TrimSpace(where()+" "+s)+"?"))
				}
				return nil, named("unknown_command", err)
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
	return len(s) > 1 && s[0] == '-' && !negativeNumber().MatchString(s)
}

var negativeNumber = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-\d+$|^-\d*\.\d+$`) })

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

// allFlagNames lists every name of flags, short ones too.
func allFlagNames(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	return names
}

// dashed spells a flag name as it is typed: -C, --work-tree.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// nearest is the candidate closest to a mistyped word, for a "did you mean"
// hint: within an edit distance of about a third of its length, or one the word
// is a prefix of. "" when nothing is close.
func nearest(word string, candidates []string) string {
	best, bestDist := "", 0
	for _, c := range candidates {
		if len(c) < 2 {
			continue
		}
		d := editDistance(word, c)
		if len(word) >= 3 && strings.HasPrefix(c, word) {
			d = 1
		}
		if limit := max(1, len(c)/3); d > limit {
			continue
		}
		if best == "" || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (optimal string alignment):
// insertions, deletions, substitutions and swaps of two neighbours cost 1.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
