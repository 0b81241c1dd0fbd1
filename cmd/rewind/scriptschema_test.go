package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/urfave/cli/v2"
)

// The JSON contract, checked on every script: a `rewind ... --json` that a
// script runs must print exactly one JSON document on stdout, valid against
// the schema of its command (schemas/<command path>.schema.json), or the error
// document's (schemas/error.schema.json). A mismatch, a missing schema, or
// anything but one document fails the script's rewind with exit 97 and a
// `script harness:` line on stderr, and is logged for TestScripts, which
// fails naming the script and the command line: so a change of shape shows
// up as a change to a schema file.

// The environment that carries the schema directory and the failure log from
// TestScripts to the rewind processes its scripts run.
const (
	schemaDirEnv = "REWIND_TEST_SCHEMAS"
	schemaLogEnv = "REWIND_TEST_SCHEMA_LOG"
)

const exitSchemaMismatch = 97

// schemaChecked wraps run: under --json, it captures stdout, checks it, and
// then copies it to the real stdout.
func schemaChecked(run func([]string) int) func([]string) int {
	return func(args []string) int {
		dir := os.Getenv(schemaDirEnv)
		jsonOut := wantsJSON(args)
		// The node commands print their JSON documents without --json too.
		alwaysJSON := strings.HasPrefix(schemaName(args), "node-")
		if dir == "" || !(jsonOut || alwaysJSON) || helpRequested(args) {
			return run(args)
		}
		var out bytes.Buffer
		code := runWith(args, os.Stdin, &out, os.Stderr)
		os.Stdout.Write(out.Bytes())
		if !jsonOut && code != 0 && out.Len() == 0 {
			return code // a node error without --json: on stderr only
		}
		if err := checkJSONOutput(dir, args, out.Bytes()); err != nil {
			msg := fmt.Sprintf("`rewind %s` (exit %d): %v", strings.Join(args[1:], " "), code, err)
			fmt.Fprintf(os.Stderr, "script harness: %s\n", msg)
			logSchemaFailure(msg)
			return exitSchemaMismatch
		}
		return code
	}
}

// helpRequested: --help prints help text, even with --json.
func helpRequested(args []string) bool {
	for _, a := range args[1:] {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "--help" || a == "-help" || a == "--help=true" {
			return true
		}
	}
	return len(args) > 1 && args[1] == "help"
}

// logSchemaFailure appends msg, with the script's directory, to the log
// TestScripts reads when every script has run.
func logSchemaFailure(msg string) {
	dir := os.Getenv(schemaLogEnv)
	if dir == "" {
		return
	}
	f, err := os.CreateTemp(dir, "failure-*")
	if err != nil {
		return
	}
	defer f.Close()
	wd, _ := os.Getwd()
	fmt.Fprintf(f, "in %s: %s", wd, msg)
}

// checkJSONOutput checks that out is one JSON document valid against the
// schema of the command args run.
func checkJSONOutput(dir string, args []string, out []byte) error {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("stdout is not one JSON document: %v (stdout %q)", err, clip(out))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("stdout holds more than one JSON document: %q", clip(out))
	}
	schema := "error"
	if obj, ok := doc.(map[string]any); !ok || len(obj) != 1 || obj["error"] == nil {
		path := schemaName(args)
		if path == "" {
			return fmt.Errorf("a document that is no error document, for no command")
		}
		schema = path
	}
	sch, err := compiledSchema(filepath.Join(dir, schema+".schema.json"))
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		return err
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("stdout does not fit schemas/%s.schema.json: %#v", schema, err)
	}
	return nil
}

func clip(b []byte) []byte {
	if len(b) > 300 {
		return append(b[:300:300], "..."...)
	}
	return b
}

var (
	schemaMu    sync.Mutex
	schemaCache = map[string]*jsonschema.Schema{}
)

// schemaBase is the $id prefix of rewind's schemas: they name each other by
// it, and the tests load it from schemas/.
const schemaBase = "https://github.com/rewind-cli/rewind/schemas/"

// compiledSchema compiles a schema file once (tests compile them all; a
// script's rewind, one), with every schema beside it loaded under its $id.
func compiledSchema(path string) (*jsonschema.Schema, error) {
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s, ok := schemaCache[path]; ok {
		return s, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no schema for this command: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	files, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*.schema.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if err := c.AddResource(schemaBase+filepath.Base(f), doc); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
	}
	s, err := c.Compile(schemaBase + filepath.Base(path))
	if err != nil {
		return nil, err
	}
	schemaCache[path] = s
	return s, nil
}

// schemaName is the command args run, as its schema is named:
// "checkpoint-create", "replay"; "" when args name no runnable command.
func schemaName(args []string) string {
	app := newApp(strings.NewReader(""), io.Discard, io.Discard)
	args, err := reorderArgs(app, args)
	if err != nil {
		return ""
	}
	var names []string
	var cmd *cli.Command
	choices := app.Commands
	flags := flagTable(app.Flags)
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if f := flags[name]; f != nil && takesValue(f) && !hasValue {
				i++
			}
			continue
		}
		next := findCommand(choices, a)
		if next == nil {
			break
		}
		cmd, names, choices = next, append(names, next.Name), next.Subcommands
		for k, v := range flagTable(next.Flags) {
			flags[k] = v
		}
	}
	if cmd == nil || cmd.Action == nil {
		return ""
	}
	return strings.Join(names, "-")
}

// everyCommand lists the runnable commands by their schema names.
func everyCommand() []string {
	var out []string
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Action != nil {
				out = append(out, prefix+c.Name)
			}
			walk(prefix+c.Name+"-", c.Subcommands)
		}
	}
	walk("", commands())
	return out
}

// TestSchemasCoverEveryCommand: every runnable command has a schema that
// compiles, and no schema names a command that does not exist.
func TestSchemasCoverEveryCommand(t *testing.T) {
	dir := filepath.Join("..", "..", "schemas")
	want := map[string]bool{"error": true, "defs": true}
	for _, name := range everyCommand() {
		want[name] = true
		if _, err := compiledSchema(filepath.Join(dir, name+".schema.json")); err != nil {
			t.Errorf("rewind %s: %v", strings.ReplaceAll(name, "-", " "), err)
		}
	}
	if _, err := compiledSchema(filepath.Join(dir, "error.schema.json")); err != nil {
		t.Error(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".schema.json"); !want[name] {
			t.Errorf("%s names no command", f)
		}
	}
}

// TestCheckJSONOutput: the check itself fails what it must.
func TestCheckJSONOutput(t *testing.T) {
	dir := filepath.Join("..", "..", "schemas")
	okErr := `{"error":{"code":"usage","exit":2,"message":"m","hints":[],"details":null}}` + "\n"
	for _, c := range []struct {
		args []string
		out  string
		ok   bool
	}{
		{[]string{"rewind", "--json", "nope"}, okErr, true},
		{[]string{"rewind", "--json", "nope"}, okErr + okErr, false},
		{[]string{"rewind", "--json", "nope"}, "", false},
		{[]string{"rewind", "--json", "nope"}, "text\n", false},
		{[]string{"rewind", "--json", "nope"}, `{"error":{"code":"usage","exit":2,"message":"m","hints":[]}}`, false},
		{[]string{"rewind", "--json", "nope"}, `{"error":{"code":"Usage","exit":2,"message":"m","hints":[],"details":null}}`, false},
		{[]string{"rewind", "--json", "nope"}, `{"version":"x"}`, false},
		{[]string{"rewind", "version", "--json"}, `{"version":"x"}`, false},
		{[]string{"rewind", "-C", "version", "version", "--json"}, `{"version":"dev","go":"go1","platform":"linux/amd64","git":"2.39.5"}`, true},
	} {
		err := checkJSONOutput(dir, c.args, []byte(c.out))
		if (err == nil) != c.ok {
			t.Errorf("%q with %q: %v", c.args, c.out, err)
		}
	}
}
