package main

// Shell completion: `rewind completion bash|zsh|fish` prints a script that asks
// the binary itself, through the hidden `rewind __complete WORDS...`, for the
// words that can follow. So commands and flags come from the same command
// table as the help, and checkpoint ids and reasons come from the store.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/checkpoint"
)

// completeCommand is the hidden command the completion scripts call.
const completeCommand = "__complete"

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "Commands, flags, flag values, and checkpoint ids and reasons (read from the store of\n" +
			"the work tree on the command line) complete. Load it in the current shell, or install it:\n" +
			"  bash: source <(rewind completion bash), or save it in\n" +
			"        ~/.local/share/bash-completion/completions/rewind\n" +
			"  zsh:  rewind completion zsh > \"${fpath[1]}/_rewind\" (then start a new shell)\n" +
			"  fish: rewind completion fish > ~/.config/fish/completions/rewind.fish",
		Action: func(c *cli.Context) error {
			o := opts(c)
			if c.NArg() != 1 {
				return withHint(usageErrorf("completion needs one shell: bash, zsh or fish"),
					"for example: source <(rewind completion bash)")
			}
			script, ok := completionScripts[c.Args().First()]
			if !ok {
				return withHint(usageErrorf("no completion for shell %q: want bash, zsh or fish", c.Args().First()),
					"for example: source <(rewind completion bash)")
			}
			if o.JSON {
				return writeJSON(o, map[string]any{"shell": c.Args().First(), "script": script})
			}
			_, err := io.WriteString(o.Stdout, script)
			return err
		},
	}
}

var completionScripts = map[string]string{
	"bash": `# bash completion for rewind: source <(rewind completion bash)
_rewind() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    [[ $cur == "=" ]] && cur=""
    local IFS=$'\n'
    local out
    out=$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null) || return 0
    COMPREPLY=()
    local word
    for word in $out; do
        [[ $word == "$cur"* ]] && COMPREPLY+=("$word")
    done
    return 0
}
complete -o default -F _rewind rewind
`,
	"zsh": `#compdef rewind
# zsh completion for rewind: rewind completion zsh > "${fpath[1]}/_rewind"
_rewind() {
    local -a candidates
    candidates=("${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if (( ${#candidates} )) && [[ -n ${candidates[1]} ]]; then
        compadd -- "${candidates[@]}"
    else
        _files
    fi
}
if [[ "${funcstack[1]}" == "_rewind" ]]; then
    _rewind "$@"
else
    compdef _rewind rewind
fi
`,
	"fish": `# fish completion for rewind: rewind completion fish > ~/.config/fish/completions/rewind.fish
function __rewind_complete
    set -l tokens (commandline -opc)
    $tokens[1] __complete $tokens[2..-1] (commandline -ct) 2>/dev/null
end
complete -c rewind -f -a '(__rewind_complete)'
`,
}

// complete prints the words that can stand in the last of words (possibly
// empty), one a line.
func complete(app *cli.App, words []string, stdout io.Writer) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur := words[len(words)-1]
	before := words[:len(words)-1]

	var (
		path     []*cli.Command
		choices  = app.Commands
		flags    = append([]cli.Flag(nil), app.Flags...)
		workTree = os.Getenv("REWIND_WORK_TREE")
		store    = os.Getenv("REWIND_STORE")
		valueFor cli.Flag // the flag the current word is the value of
		dashdash bool
	)
	for i := 0; i < len(before); i++ {
		w := before[i]
		if dashdash || w == "" {
			continue
		}
		if w == "--" {
			dashdash = true
			continue
		}
		if len(w) > 1 && w[0] == '-' {
			name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			f := flagTable(flags)[name]
			if f == nil || !takesValue(f) {
				continue
			}
			if !hasValue && i+1 < len(before) && before[i+1] == "=" {
				i++ // bash splits --color=al into --color, =, al
			}
			if !hasValue {
				if i+1 < len(before) {
					i++
					value = before[i]
				} else {
					valueFor = f
				}
			}
			switch f.Names()[0] {
			case "work-tree":
				workTree = value
			case "store":
				store = value
			}
			continue
		}
		if cmd := findCommand(choices, w); cmd != nil {
			path = append(path, cmd)
			choices = cmd.Subcommands
			flags = append(flags, cmd.Flags...)
		}
	}

	var out []string
	switch {
	case valueFor != nil:
		out = flagValues(valueFor)
	case strings.HasPrefix(cur, "-") && !dashdash:
		for _, f := range flags {
			if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
				continue
			}
			long := false
			for _, n := range f.Names() {
				if len(n) > 1 {
					out = append(out, "--"+n)
					long = true
				}
			}
			if names := f.Names(); !long && len(names) > 0 {
				// A flag with only a one-letter name (checkpoint diff -z).
				out = append(out, "-"+names[0])
			}
		}
		out = append(out, "--help")
	case len(choices) > 0:
		for _, c := range choices {
			if !c.Hidden {
				out = append(out, c.Name)
			}
		}
		out = append(out, "help")
	case len(path) > 0 && strings.Contains(path[len(path)-1].ArgsUsage, "REF"):
		out = checkpointWords(workTree, store)
	case len(path) > 0 && path[len(path)-1].Name == "completion":
		out = []string{"bash", "zsh", "fish"}
	}
	for _, w := range out {
		if strings.HasPrefix(w, cur) {
			fmt.Fprintln(stdout, w)
		}
	}
}

// flagValues are the values a flag's value can complete to, when they are a
// fixed set; files and directories are left to the shell.
func flagValues(f cli.Flag) []string {
	switch f.Names()[0] {
	case "color":
		return []string{"auto", "always", "never"}
	}
	return nil
}

// checkpointWords are the store's checkpoint ids (8 characters) and reasons,
// newest first, then latest. A store that cannot be read completes nothing.
func checkpointWords(workTree, store string) []string {
	if workTree == "" {
		if wd, err := os.Getwd(); err == nil {
			workTree = projectTop(context.Background(), wd)
		}
	}
	if workTree == "" {
		return nil
	}
	if abs, err := filepath.Abs(workTree); err == nil {
		workTree = abs
	}
	if real, err := filepath.EvalSymlinks(workTree); err == nil {
		workTree = real
	}
	if store != "" {
		if abs, err := filepath.Abs(store); err == nil {
			store = abs
		}
	}
	s, err := checkpoint.OpenReadOnly(workTree, store)
	if err != nil || !s.Exists() {
		return nil
	}
	cps, err := s.List(context.Background())
	if err != nil {
		return nil
	}
	var ids, reasons []string
	seen := map[string]bool{}
	for i := len(cps) - 1; i >= 0; i-- {
		ids = append(ids, cps[i].Short())
		if r := cps[i].Reason; r != "" && !seen[r] && !strings.ContainsAny(r, " \t\n") {
			seen[r] = true
			reasons = append(reasons, r)
		}
	}
	sort.Strings(reasons)
	return append(append(ids, reasons...), "latest")
}
