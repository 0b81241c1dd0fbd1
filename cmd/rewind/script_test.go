package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds are the custom testscript commands; each lives in its own
// scriptcmd_<name>_test.go file and registers itself here from init().
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){}

// TestMain makes the test binary double as the rewind binary: testscript copies
// it onto PATH as "rewind", and `exec rewind ...` in a script runs run(os.Args),
// checking that the project's .git is left as it was (see guardProject).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"rewind": func() { os.Exit(guardProject(os.Args, schemaChecked(run))) },
	})
}

// The fixed clock and identity of every script: commit ids and outputs are
// byte-stable, so they can be compared with golden text.
const (
	scriptNow     = "2026-01-02T03:04:05Z"
	scriptGitDate = "2026-01-02T03:04:05 +0000"
)

func TestScripts(t *testing.T) {
	schemas, err := filepath.Abs(filepath.Join("..", "..", "schemas"))
	if err != nil {
		t.Fatal(err)
	}
	schemaLog := t.TempDir()
	// After every script: they run in parallel, after this function returns.
	t.Cleanup(func() { checkSchemaLog(t, schemaLog) })
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "scripts"),
		UpdateScripts:       os.Getenv("REWIND_UPDATE") != "",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds:                scriptCmds,
		Condition:           scriptCondition,
		Setup: func(e *testscript.Env) error {
			home := filepath.Join(e.WorkDir, "home")
			tmp := filepath.Join(e.WorkDir, "tmp")
			for _, d := range []string{home, tmp} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			host, _ := os.Hostname()
			e.Vars = append(e.Vars,
				// What a pipeline marker records of a `pipeline start` that the
				// script itself runs: this host, and the test process (rewind's
				// parent) as the pipeline's process.
				"SCRIPT_HOST="+host,
				// Every --json output is checked against its schema (see
				// scriptschema_test.go).
				schemaDirEnv+"="+schemas,
				schemaLogEnv+"="+schemaLog,
				"SCRIPT_PID="+strconv.Itoa(os.Getpid()),
				"HOME="+home,
				"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
				"TZ=UTC",
				"LC_ALL=C",
				"NO_COLOR=",
				"REWIND_NOW="+scriptNow,
				"REWIND_TMPDIR="+tmp,
				"REWIND_STORE=",
				"REWIND_WORK_TREE=",
				"REWIND_TRACE=",
				"REWIND_PIPELINE_PID=",
				"GIT_CONFIG_NOSYSTEM=1",
				"GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
				"GIT_TERMINAL_PROMPT=0",
				"GIT_AUTHOR_NAME=Script Author",
				"GIT_AUTHOR_EMAIL=author@example.com",
				"GIT_AUTHOR_DATE="+scriptGitDate,
				"GIT_COMMITTER_NAME=Script Author",
				"GIT_COMMITTER_EMAIL=author@example.com",
				"GIT_COMMITTER_DATE="+scriptGitDate,
			)
			return nil
		},
	})
}

// checkSchemaLog fails the test for each --json output of a script that did
// not fit its schema (the script's rewind exited 97 too).
func checkSchemaLog(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "failure-*"))
	for _, f := range files {
		msg, _ := os.ReadFile(f)
		t.Errorf("schema check: %s", msg)
	}
}
