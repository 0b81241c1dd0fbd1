package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// HookCommand is the command the Claude Code hook runs after a tool call.
const HookCommand = "rewind hook post-tool-use"

// HookMatcher names the Claude Code tools that can change files: the shell
// (the edits agents' own checkpoints miss) and the edit tools.
const HookMatcher = "Bash|Edit|Write|MultiEdit|NotebookEdit"

// HookTimeout is the hook's timeout in seconds, Claude Code's "timeout": the
// hook waits at most 10 s for another rewind's lock, well inside it.
const HookTimeout = 30

// hookGroup is one matcher group of Claude Code's hooks configuration.
type hookGroup struct {
	Matcher string        `json:"matcher"`
	Hooks   []hookCommand `json:"hooks"`
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout"`
}

// ClaudeCodeConfig is the hooks configuration for a Claude Code settings file,
// indented as Claude Code writes its own.
func ClaudeCodeConfig() []byte {
	doc := map[string]any{"hooks": map[string]any{"PostToolUse": []hookGroup{ourGroup()}}}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // fixed data
	}
	return append(out, '\n')
}

func ourGroup() hookGroup {
	return hookGroup{Matcher: HookMatcher, Hooks: []hookCommand{{Type: "command", Command: HookCommand, Timeout: HookTimeout}}}
}

// SettingsError is a settings file rewind will not change: not a JSON
// object, or its hooks not in Claude Code's shape.
type SettingsError struct{ Why error }

func (e *SettingsError) Error() string { return e.Why.Error() }
func (e *SettingsError) Unwrap() error { return e.Why }

func settingsErrorf(format string, a ...any) error {
	return &SettingsError{Why: fmt.Errorf(format, a...)}
}

// MergeHooks adds the rewind hook to a Claude Code settings file's content,
// keeping everything else as it is: other keys in their order, other events'
// hooks, other PostToolUse groups. It reports false (and the content as
// given) when a PostToolUse hook already runs rewind's command, so installing
// twice adds nothing. An empty or missing file (nil) gets the hooks alone.
func MergeHooks(settings []byte) ([]byte, bool, error) {
	if len(bytes.TrimSpace(settings)) == 0 {
		return ClaudeCodeConfig(), true, nil
	}
	top, err := readObject(settings)
	if err != nil {
		return nil, false, &SettingsError{Why: err}
	}
	hooks := object{}
	if raw, ok := top.get("hooks"); ok {
		if hooks, err = readObject(raw); err != nil {
			return nil, false, settingsErrorf("\"hooks\" is not an object of events: %w", err)
		}
	}
	var groups []json.RawMessage
	if raw, ok := hooks.get("PostToolUse"); ok {
		if err := json.Unmarshal(raw, &groups); err != nil {
			return nil, false, settingsErrorf("\"hooks\".\"PostToolUse\" is not a list of matcher groups (it is %s)", jsonKind(raw))
		}
	}
	for i, g := range groups {
		var group struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		}
		if err := json.Unmarshal(g, &group); err != nil {
			return nil, false, settingsErrorf("\"hooks\".\"PostToolUse\" group %d is not a matcher group of Claude Code's shape, {\"matcher\": \"...\", \"hooks\": [{\"type\": \"command\", \"command\": \"...\"}]}", i+1)
		}
		for _, h := range group.Hooks {
			if isOurCommand(h.Command) {
				return settings, false, nil
			}
		}
	}
	ours, err := json.Marshal(ourGroup())
	if err != nil {
		return nil, false, err
	}
	groups = append(groups, ours)
	list, err := json.Marshal(groups)
	if err != nil {
		return nil, false, err
	}
	hooks.set("PostToolUse", list)
	top.set("hooks", hooks.marshal())
	var out bytes.Buffer
	if err := json.Indent(&out, top.marshal(), "", indentOf(settings)); err != nil {
		return nil, false, err
	}
	out.WriteByte('\n')
	return out.Bytes(), true, nil
}

// isOurCommand recognizes rewind's hook command, also as a path to rewind or
// with flags after it.
func isOurCommand(cmd string) bool {
	f := strings.Fields(cmd)
	return len(f) >= 3 && (f[0] == "rewind" || strings.HasSuffix(f[0], "/rewind")) && f[1] == "hook" && f[2] == "post-tool-use"
}

// object is a JSON object with its keys in their order and its values as
// written, so a rewrite keeps what it does not change.
type object []member

type member struct {
	key   string
	value json.RawMessage
}

func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

func (o *object) set(key string, v json.RawMessage) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].value = v
			return
		}
	}
	*o = append(*o, member{key, v})
}

func (o object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// readObject reads one JSON object (and nothing after it), keeping its keys'
// order. A key given twice keeps its last value, as JSON readers do.
func readObject(data []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(data, dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(data, dec, err)
		}
		key := tok.(string) // inside an object, the decoder gives keys
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, jsonError(data, dec, err)
		}
		o.set(key, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonError(data, dec, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more after the JSON object (line %d)", lineAt(data, dec.InputOffset()))
	}
	return o, nil
}

func jsonError(data []byte, dec *json.Decoder, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("not valid JSON (line %d): %w", lineAt(data, dec.InputOffset()), err)
}

func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// ToolCall is what rewind reads of the JSON Claude Code gives a PostToolUse
// hook on stdin.
type ToolCall struct {
	SessionID string `json:"session_id"`
	Cwd       string `json:"cwd"`
	ToolName  string `json:"tool_name"`
	Event     string `json:"hook_event_name"`
}

// ParseToolCall reads a hook's stdin payload. Only tool_name is required;
// fields rewind does not use (tool_input, tool_response) are skipped.
func ParseToolCall(data []byte) (ToolCall, error) {
	var tc ToolCall
	if len(bytes.TrimSpace(data)) == 0 {
		return tc, errors.New("no hook payload on stdin (Claude Code gives the tool call as JSON)")
	}
	if err := json.Unmarshal(data, &tc); err != nil {
		return tc, fmt.Errorf("the hook payload is not a JSON object: %w", err)
	}
	if tc.ToolName == "" {
		return tc, errors.New("the hook payload has no tool_name")
	}
	return tc, nil
}

// jsonKind names the kind of a JSON value in the user's terms ("an object",
// "a string"), for messages about a settings file: Go's type names mean
// nothing to its reader.
func jsonKind(raw json.RawMessage) string {
	v := bytes.TrimSpace(raw)
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// indentOf is the indentation unit of a settings file: the leading
// whitespace of its first indented line (4 spaces, a tab), so that adding the
// hook to a committed file changes only the hook's lines. A file with no
// indented line gets Claude Code's own 2 spaces.
func indentOf(settings []byte) string {
	for _, line := range bytes.Split(settings, []byte("\n"))[1:] {
		trimmed := bytes.TrimLeft(line, " \t")
		if len(trimmed) == 0 || len(trimmed) == len(line) {
			continue
		}
		return string(line[:len(line)-len(trimmed)])
	}
	return "  "
}
