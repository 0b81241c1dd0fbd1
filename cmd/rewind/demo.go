package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/gitexec"
)

// `rewind demo` shows the main job out of the box: it builds a crashed build
// pipeline in a temporary directory from data in the binary, prints the replay
// plan, resumes it with a stand-in agent (this binary, `rewind demo agent`), and
// shows the finished manifest and the restored tree. Every time in it is fixed,
// so its output is the same on every run except for the temporary directory.

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:      "demo",
		Usage:     "build a crashed pipeline in a temporary directory and resume it",
		ArgsUsage: " ",
		Description: "Builds a git project, a three-phase build run with two waves, checkpoints at its\n" +
			"boundaries and a crash in wave 2 (one dispatch in flight, one partial commit); shows the\n" +
			"dry-run plan; resumes it with a built-in stand-in agent; shows the finished manifest and\n" +
			"the restored tree. Nothing is left outside the temporary directory, unless --keep.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "keep", Usage: "build in `DIR` (must not exist) and keep it", TakesFile: true},
		},
		Action: demoRun,
		Subcommands: []*cli.Command{demoABCommand(), {
			Name:   "agent",
			Usage:  "the demo's stand-in agent (run by replay --exec)",
			Hidden: true,
			Action: demoAgent,
		}},
	}
}

// demoTime is the demo pipeline's clock: minutes after 10:00 UTC on a fixed day.
func demoTime(min int) time.Time {
	return time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(min) * time.Minute)
}

// demoDispatch is one dispatch of the demo run.
type demoDispatch struct {
	seq     int
	role    string
	phase   string
	task    int // 0: none
	minute  int
	status  string // completed, or dispatched (in flight at the crash)
	summary string
	file    string // the file an implementer writes, and its content
	content string
}

var demoRun1 = []demoDispatch{
	{1, "architecture-reviewer", "1", 0, 1, "completed", "Design approved: a retrying HTTP client", "", ""},
	{2, "plan-writer", "2", 0, 6, "completed", "Plan written: 4 tasks in 2 waves", "", ""},
	{3, "implementer", "3", 1, 11, "completed", "Task 1 done: backoff schedule", "backoff.go", "package retry\n\n// Backoff doubles the wait after each attempt.\nfunc Backoff(n int) int { return 100 << n }\n"},
	{4, "implementer", "3", 2, 11, "completed", "Task 2 done: retry budget", "budget.go", "package retry\n\n// Budget caps the attempts.\nconst Budget = 5\n"},
	{5, "implementer", "3", 3, 21, "completed", "Task 3 done: client wrapper", "client.go", "package retry\n\n// Do retries f until it succeeds or the budget is spent.\nfunc Do(f func() error) (err error) {\n\tfor i := 0; i < Budget; i++ {\n\t\tif err = f(); err == nil {\n\t\t\treturn nil\n\t\t}\n\t}\n\treturn err\n}\n"},
	{6, "implementer", "3", 4, 21, "dispatched", "", "jitter.go", "package retry\n\n// Jitter spreads retries apart.\nfunc Jitter(ms int) int { return ms + ms/10 }\n"},
}

func demoRun(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	d, cleanup, err := newDemo(c, "rewind-demo-")
	defer cleanup()
	if err != nil {
		return err
	}
	if o.JSON {
		return d.replayJSON(c.String("keep") != "")
	}
	return d.replay()
}

// newDemo makes the demo's root, the --keep directory or else a temporary one
// (prefix tempPrefix) that cleanup removes, and builds the crashed pipeline in
// it. cleanup is never nil, so callers defer it before looking at err.
func newDemo(c *cli.Context, tempPrefix string) (d *demo, cleanup func(), err error) {
	cleanup = func() {}
	root := c.String("keep")
	if root != "" {
		if _, err := os.Stat(root); err == nil {
			return nil, cleanup, usageErrorf("--keep %s: it exists already; name a new directory", root)
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, cleanup, err
		}
		root, _ = filepath.Abs(root)
	} else {
		if root, err = os.MkdirTemp("", tempPrefix); err != nil {
			return nil, cleanup, err
		}
		tmpRoot := root
		cleanup = func() { os.RemoveAll(tmpRoot) }
	}
	root, _ = filepath.EvalSymlinks(root)
	d = &demo{ctx: c.Context, o: opts(c), root: root, proj: filepath.Join(root, "project"), scratch: filepath.Join(root, "scratch"),
		store: filepath.Join(root, "store"), tmp: filepath.Join(root, "tmp")}
	if err := d.build(); err != nil {
		return nil, cleanup, fmt.Errorf("demo: %w", err)
	}
	return d, cleanup, nil
}

type demo struct {
	ctx                             context.Context
	o                               *options
	root, proj, scratch, store, tmp string
	dispatchDir                     string
}

// rewind runs one rewind command in this process, against the demo's project
// and store, and fails on a non-zero exit.
func (d *demo) rewind(out io.Writer, now time.Time, args ...string) error {
	return d.rewindTo(out, nil, now, args...)
}

// rewindTo is rewind with its stderr shown on errOut too.
func (d *demo) rewindTo(out, errOut io.Writer, now time.Time, args ...string) error {
	full := append([]string{"rewind", "-C", d.proj, "--store", d.store, "--now", now.Format(time.RFC3339), "--color", "never"}, args...)
	var errBuf strings.Builder
	stderr := io.Writer(&errBuf)
	if errOut != nil {
		stderr = io.MultiWriter(&errBuf, errOut)
	}
	if code := runWith(full, strings.NewReader(""), out, stderr); code != 0 {
		return fmt.Errorf("rewind %s: exit %d\n%s", strings.Join(args, " "), code, errBuf.String())
	}
	return nil
}

// git runs git on the demo project with a fixed identity and date.
func (d *demo) git(at time.Time, args ...string) error {
	g := gitexec.Shadow{GitDir: filepath.Join(d.proj, ".git"), WorkTree: d.proj, IndexFile: filepath.Join(d.proj, ".git", "index"),
		ConfigHome: filepath.Join(d.root, "git-home"), Date: at}
	_, err := g.Run(d.ctx, args...)
	return err
}

func (d *demo) write(rel, content string) error {
	p := filepath.Join(d.proj, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

func (d *demo) section(title string) {
	fmt.Fprintf(d.o.Stdout, "\n==> %s\n\n", title)
}

// build makes the crashed pipeline.
func (d *demo) build() error {
	os.Setenv("REWIND_TMPDIR", d.tmp)
	g := gitexec.Shadow{GitDir: filepath.Join(d.proj, ".git"), WorkTree: d.proj, IndexFile: filepath.Join(d.proj, ".git", "index"), ConfigHome: filepath.Join(d.root, "git-home")}
	if err := g.Init(d.ctx); err != nil {
		return err
	}
	steps := [][]string{{"config", "core.bare", "false"}, {"symbolic-ref", "HEAD", "refs/heads/main"}}
	for _, s := range steps {
		if err := d.git(demoTime(0), s...); err != nil {
			return err
		}
	}
	// A project: the user's .gitignore'd build output must survive everything.
	for rel, content := range map[string]string{
		"README.md":   "# retry\nA retrying HTTP client.\n",
		"go.mod":      "module example.com/retry\n\ngo 1.22\n",
		".gitignore":  "bin/\n",
		"bin/app.log": "ignored build output\n",
	} {
		if err := d.write(rel, content); err != nil {
			return err
		}
	}
	if err := d.git(demoTime(0), "add", "-A"); err != nil {
		return err
	}
	if err := d.git(demoTime(0), "commit", "-q", "-m", "Initial commit"); err != nil {
		return err
	}
	var out strings.Builder
	// The crashed pipeline's shell is gone: its marker records a process id
	// no system hands out (above Linux's pid_max and macOS's limit), so rewind
	// sees the crash the story tells (and warns that the /tmp manifest is the
	// only copy), not a live pipeline in the shell that runs the demo.
	if err := d.rewind(&out, demoTime(0), "pipeline", "start", "--skill", "build", "--scratch", d.scratch, "--session", "1772359200", "--pid", "2147483647"); err != nil {
		return err
	}
	d.dispatchDir = filepath.Clean(strings.TrimSpace(out.String()))
	if err := os.WriteFile(filepath.Join(d.scratch, "handoff-2-to-3.md"), []byte(demoHandoff), 0o644); err != nil {
		return err
	}

	checkpoints := map[int]string{5: "pre-design-gate", 10: "pre-wave-1", 20: "pre-wave-2"}
	for _, dd := range demoRun1 {
		for min, reason := range checkpoints {
			if min < dd.minute {
				if err := d.rewind(io.Discard, demoTime(min), "checkpoint", "create", "--reason", reason, "--source", "build"); err != nil {
					return err
				}
				delete(checkpoints, min)
			}
		}
		if err := d.dispatch(dd); err != nil {
			return err
		}
	}
	return nil
}

// dispatch records one dispatch of the original run and does its work.
func (d *demo) dispatch(dd demoDispatch) error {
	at := demoTime(dd.minute)
	task := "-"
	if dd.task > 0 {
		task = strconv.Itoa(dd.task)
	}
	name := fmt.Sprintf("%d-%s.md", dd.seq, dd.role)
	header := fmt.Sprintf("# Dispatch: %s\n**Pipeline:** build | **Phase:** %s | **Task:** %s\n**Timestamp:** %s\n**Dispatch-Dir:** %s/\n\n---\n\n",
		dd.role, dd.phase, task, at.Format(time.RFC3339), d.dispatchDir)
	body := fmt.Sprintf("You are the %s of phase %s. %s\n", dd.role, dd.phase, demoInstructions(dd))
	if err := os.WriteFile(filepath.Join(d.dispatchDir, name), []byte(header+body), 0o644); err != nil {
		return err
	}
	args := []string{"dispatch", "before", "--dir", d.dispatchDir, "--seq", strconv.Itoa(dd.seq), "--file", filepath.Join(d.dispatchDir, name),
		"--role", dd.role, "--phase", dd.phase, "--model-tier", "sonnet"}
	if dd.task > 0 {
		args = append(args, "--task", task)
	}
	if err := d.rewind(io.Discard, at, args...); err != nil {
		return err
	}
	if dd.file != "" {
		// The implementer's work, committed; the one in flight got halfway.
		content := dd.content
		msg := fmt.Sprintf("task %d: %s", dd.task, strings.TrimPrefix(dd.summary, fmt.Sprintf("Task %d done: ", dd.task)))
		if dd.status == "dispatched" {
			content = "package retry\n\n// TODO: half written when the session crashed\n"
			msg = fmt.Sprintf("task %d: work in progress", dd.task)
		}
		if err := d.write(dd.file, content); err != nil {
			return err
		}
		if err := d.git(at.Add(time.Minute), "add", "-A"); err != nil {
			return err
		}
		if err := d.git(at.Add(time.Minute), "commit", "-q", "-m", msg); err != nil {
			return err
		}
	} else if err := os.WriteFile(filepath.Join(d.dispatchDir, fmt.Sprintf("%d-%s-result.md", dd.seq, dd.role)), []byte(dd.summary+"\n"), 0o644); err != nil {
		return err
	}
	if dd.status == "completed" {
		return d.rewind(io.Discard, at, "dispatch", "after", "--dir", d.dispatchDir, "--seq", strconv.Itoa(dd.seq),
			"--status", "completed", "--summary", dd.summary, "--duration", "240", "--output-chars", "1800")
	}
	return nil
}

func demoInstructions(dd demoDispatch) string {
	if dd.file != "" {
		return fmt.Sprintf("Implement task %d: write %s and commit it as \"task %d: ...\".", dd.task, dd.file, dd.task)
	}
	return "Write your result to the result file."
}

const demoHandoff = `# Phase Handoff: 2 → 3
**Timestamp:** 2026-03-01T10:09:00Z
**Goal:** Give the HTTP client retries with exponential backoff
**Mode:** feature

## Inputs for Phase 3
- **Plan:** docs/plans/retry.md

## Decisions Carried Forward
- [DEC-1] exponential backoff: simpler than a token bucket and enough for the load
- [DEC-2] at most 5 attempts: the upstream's SLA allows no more

## Active Constraints
- no new dependencies
`

// replay shows the plan, resumes with the stand-in agent and shows the result.
func (d *demo) replay() error {
	w := d.o.Stdout
	fmt.Fprintf(w, "rewind demo: a build pipeline crashed in wave 2 of phase 3, in %s\n", d.root)
	fmt.Fprintf(w, "  project:  %s (git, branch main)\n  scratch:  %s\n  dispatch: %s\n  store:    %s\n", d.proj, d.scratch, d.dispatchDir, d.store)

	d.section("The checkpoints taken at the pipeline's boundaries: rewind checkpoint list")
	if err := d.rewind(w, demoTime(30), "checkpoint", "list"); err != nil {
		return err
	}
	d.section("The plan, changing nothing: rewind replay " + d.scratch + " --dry-run")
	if err := d.rewind(w, demoTime(30), "replay", d.scratch, "--dry-run"); err != nil {
		return err
	}
	agent, err := demoAgentCommand()
	if err != nil {
		return err
	}
	d.section("Resume with a stand-in agent: rewind replay " + d.scratch + " --yes --exec \"" + agent + "\"")
	// The agents run as children: the session and clock reach them through the
	// environment, so their commits are the same on every run.
	defer setDemoRunEnv("demo-replay")()
	if err := d.rewindTo(w, w, demoTime(30), "replay", d.scratch, "--yes", "--exec", agent); err != nil {
		return err
	}
	d.section("The finished manifest: rewind manifest show " + d.scratch + "\n    (seqs 5 and 6 were re-dispatched as 7 and 8, which carry replay_of 5 and 6)")
	if err := d.rewind(w, demoTime(40), "manifest", "show", d.scratch); err != nil {
		return err
	}
	d.section("The project's history (the crashed wave's commits left the branch with the restore; git reflog still has them)")
	out, err := gitexec.Project{Dir: d.proj}.Run(d.ctx, "log", "--format=%h %s")
	if err != nil {
		return err
	}
	fmt.Fprint(w, string(out))
	d.section("The restored and finished tree")
	return listTree(w, d.proj)
}

// replayJSON is the demo under --json: the same steps, each command's own
// --json document in one document, with the history and the tree. The
// commands' notes go to stderr.
// demoAgentCommand is the stand-in agent's command: this binary's demo agent.
func demoAgentCommand() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	return shellQuote(self) + " demo agent", nil
}

// setDemoRunEnv gives the replay's agents, which run as children, the demo's
// session and clock, and returns what takes them away again.
func setDemoRunEnv(session string) (unset func()) {
	os.Setenv("REWIND_SESSION", session)
	os.Setenv("REWIND_NOW", demoTime(30).Format(time.RFC3339))
	return func() {
		os.Unsetenv("REWIND_NOW")
		os.Unsetenv("REWIND_SESSION")
	}
}

// jsonStep runs rewind args --json at now and puts its document in doc under
// key, for the demos' --json documents.
func (d *demo) jsonStep(doc map[string]any, key string, now time.Time, args ...string) error {
	var out bytes.Buffer
	if err := d.rewindTo(&out, d.o.Stderr, now, append(args, "--json")...); err != nil {
		return err
	}
	doc[key] = json.RawMessage(bytes.TrimSpace(out.Bytes()))
	return nil
}

func (d *demo) replayJSON(kept bool) error {
	doc := map[string]any{"root": d.root, "root_kept": kept, "project": d.proj, "scratch_dir": d.scratch, "dispatch_dir": d.dispatchDir, "store": d.store}
	if err := d.jsonStep(doc, "checkpoint_list", demoTime(30), "checkpoint", "list"); err != nil {
		return err
	}
	if err := d.jsonStep(doc, "replay_plan", demoTime(30), "replay", d.scratch, "--dry-run"); err != nil {
		return err
	}
	agent, err := demoAgentCommand()
	if err != nil {
		return err
	}
	defer setDemoRunEnv("demo-replay")()
	if err := d.jsonStep(doc, "replay_run", demoTime(30), "replay", d.scratch, "--yes", "--exec", agent); err != nil {
		return err
	}
	if err := d.jsonStep(doc, "manifest_show", demoTime(40), "manifest", "show", d.scratch); err != nil {
		return err
	}
	out, err := gitexec.Project{Dir: d.proj}.Run(d.ctx, "log", "--format=%H%x00%s")
	if err != nil {
		return err
	}
	history := []any{}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		id, subject, _ := strings.Cut(line, "\x00")
		history = append(history, map[string]any{"id": id, "subject": subject})
	}
	doc["history"] = history
	tree := []any{}
	err = filepath.Walk(d.proj, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() && fi.Name() == ".git" {
			return filepath.SkipDir
		}
		if !fi.IsDir() {
			rel, _ := filepath.Rel(d.proj, p)
			tree = append(tree, map[string]any{"path": rel, "size": fi.Size()})
		}
		return nil
	})
	if err != nil {
		return err
	}
	doc["tree"] = tree
	return writeJSON(d.o, doc)
}

// listTree prints the files of the project (not .git).
func listTree(w io.Writer, root string) error {
	return filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() && fi.Name() == ".git" {
			return filepath.SkipDir
		}
		if !fi.IsDir() {
			rel, _ := filepath.Rel(root, p)
			fmt.Fprintf(w, "  %s (%d bytes)\n", rel, fi.Size())
		}
		return nil
	})
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// demoAgent is the stand-in agent: it does the work its dispatch file asks for
// (an implementer writes and commits its task's file), prints a report and a
// SUMMARY: line.
func demoAgent(c *cli.Context) error {
	o := opts(c)
	role, task := os.Getenv("REWIND_ROLE"), os.Getenv("REWIND_TASK")
	wt := os.Getenv("REWIND_WORK_TREE")
	if role == "" || wt == "" {
		return usageErrorf("demo agent runs under `rewind replay --exec`, which sets REWIND_ROLE and REWIND_WORK_TREE")
	}
	tested := false
	if f := os.Getenv("REWIND_DISPATCH_FILE"); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		tested = strings.Contains(string(data), "write a table test")
	}
	for _, dd := range demoRun1 {
		if strconv.Itoa(dd.task) != task || dd.file == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(wt, dd.file), []byte(dd.content), 0o644); err != nil {
			return err
		}
		at := time.Now()
		if o.NowSet {
			at = o.Now()
		}
		g := gitexec.Shadow{GitDir: filepath.Join(wt, ".git"), WorkTree: wt, IndexFile: filepath.Join(wt, ".git", "index"),
			ConfigHome: filepath.Join(filepath.Dir(wt), "git-home"), Date: at}
		files := []string{dd.file}
		if tested {
			// The A/B demo's mutated template asks for a table test.
			test := strings.TrimSuffix(dd.file, ".go") + "_test.go"
			body := fmt.Sprintf("package retry\n\nimport \"testing\"\n\n// Task %s's table test.\nfunc Test%s(t *testing.T) {}\n", task, strings.ToUpper(dd.file[:1])+strings.TrimSuffix(dd.file[1:], ".go"))
			if err := os.WriteFile(filepath.Join(wt, test), []byte(body), 0o644); err != nil {
				return err
			}
			files = append(files, test)
		}
		if _, err := g.Run(c.Context, append([]string{"add", "--"}, files...)...); err != nil {
			return err
		}
		// --allow-empty: the file may be byte-identical to the commit the crash left.
		if _, err := g.Run(c.Context, "commit", "-q", "--allow-empty", "-m", fmt.Sprintf("task %s: %s (replayed)", task, dd.file)); err != nil {
			return err
		}
		summary := fmt.Sprintf("Task %s done: %s", task, dd.file)
		if tested {
			summary += "; acceptance tests PASS"
		}
		if o.JSON {
			return writeJSON(o, map[string]any{"role": role, "task": task, "file": dd.file, "summary": summary})
		}
		if !tested {
			fmt.Fprintf(o.Stdout, "Wrote %s and committed it.\nSUMMARY: %s\n", dd.file, summary)
			return nil
		}
		fmt.Fprintf(o.Stdout, "Wrote %s and its test, ran them, committed them.\nSUMMARY: %s\n", dd.file, summary)
		return nil
	}
	if o.JSON {
		return writeJSON(o, map[string]any{"role": role, "task": strPtr(task), "file": nil, "summary": role + " checked"})
	}
	fmt.Fprintf(o.Stdout, "Nothing to write for %s.\nSUMMARY: %s checked\n", role, role)
	return nil
}
