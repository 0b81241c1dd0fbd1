package skills

import (
	"fmt"
	"strings"
)

// Step is one fenced bash block of a SKILL.md: a command the procedure asks
// the model to run, in the order the file gives them.
type Step struct {
	Line    int    // the line of the opening fence, 1-based
	Section string // the nearest heading above it, without its #s
	Command string // the block's text, its indentation removed
}

// Steps extracts the ```bash (or ```sh, ```shell) blocks of a markdown file
// in order. Fences may be indented (a block inside a list item); other fenced
// blocks (output samples, tables) are not steps. An unterminated fence is an
// error: a model would read the rest of the file as its command.
func Steps(markdown []byte) ([]Step, error) {
	lines := strings.Split(strings.ReplaceAll(string(markdown), "\r\n", "\n"), "\n")
	var steps []Step
	section := ""
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " \t")
		if strings.HasPrefix(trimmed, "#") {
			section = strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
			continue
		}
		fence, info, ok := openingFence(trimmed)
		if !ok {
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		start := i
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			t := strings.TrimLeft(lines[i], " \t")
			if strings.HasPrefix(t, fence) && strings.Trim(t, "`~ \t") == "" {
				closed = true
				break
			}
			body = append(body, dedent(lines[i], indent))
		}
		if !closed {
			return nil, fmt.Errorf("line %d: the fenced block is never closed", start+1)
		}
		switch info {
		case "bash", "sh", "shell":
			steps = append(steps, Step{Line: start + 1, Section: section, Command: strings.Join(body, "\n")})
		}
	}
	return steps, nil
}

// openingFence reads a fence's opening line: its run of ``` or ~~~ (3 or
// more) and the first word of its info string.
func openingFence(s string) (fence, info string, ok bool) {
	for _, c := range []string{"`", "~"} {
		n := len(s) - len(strings.TrimLeft(s, c))
		if n >= 3 {
			fields := strings.Fields(s[n:])
			if len(fields) > 0 {
				info = strings.ToLower(fields[0])
			}
			if c == "`" && strings.Contains(s[n:], "`") {
				return "", "", false // an inline code span, not a fence
			}
			return s[:n], info, true
		}
	}
	return "", "", false
}

// dedent removes up to n leading spaces or tabs.
func dedent(s string, n int) string {
	for n > 0 && s != "" && (s[0] == ' ' || s[0] == '\t') {
		s, n = s[1:], n-1
	}
	return s
}
