package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/skills"
)

// `rewind skills` installs the drop-in SKILL.md files; `rewind hooks` and
// `rewind hook` connect an agent's tool calls to checkpoints.

func skillsCommand() *cli.Command {
	dir := &cli.StringFlag{Name: "dir", Usage: "the skills `DIR` (default: ~/.claude/skills)", TakesFile: true}
	return &cli.Command{
		Name:  "skills",
		Usage: "the drop-in skills (checkpoint, replay, dispatch): install, diff",
		Description: "Each skill is a SKILL.md whose every step is one rewind command, installed as\n" +
			"DIR/<name>/SKILL.md. A file whose content is no version rewind ever shipped was changed\n" +
			"by its user (or is another skill of that name): install keeps it unless --force.",
		Subcommands: []*cli.Command{
			{
				Name:      "install",
				Usage:     "write the skills into DIR, keeping files the user changed unless --force",
				ArgsUsage: " ",
				Flags: []cli.Flag{dir,
					&cli.BoolFlag{Name: "force", Usage: "overwrite changed files too (each is kept as SKILL.md.<hash>.bak)"}},
				Action: skillsInstall,
			},
			{
				Name:      "diff",
				Usage:     "show what an install would change, as a unified diff",
				ArgsUsage: " ",
				Flags: []cli.Flag{dir,
					&cli.BoolFlag{Name: "exit-code", Usage: "exit 1 when an install would change anything, as git diff --exit-code"}},
				Action: skillsDiff,
			},
		},
	}
}

// skillsDir refuses arguments (the skills commands take none) and is --dir,
// else ~/.claude/skills.
func skillsDir(c *cli.Context) (string, error) {
	if err := noArgs(c); err != nil {
		return "", err
	}
	if d := c.String("dir"); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", usageErrorf("--dir %q: %v", d, err)
		}
		return abs, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", withHint(fmt.Errorf("no home directory for ~/.claude/skills: %w", err), "pass the skills directory with --dir")
	}
	return filepath.Join(home, ".claude", "skills"), nil
}

// blockedHint adds the way out to a skill path of the wrong kind.
func blockedHint(err error) error {
	var b *skills.BlockedError
	if errors.As(err, &b) {
		return withHint(err, "move "+shellArg(b.Path)+" aside, or pass another --dir")
	}
	return err
}

type skillJSON struct {
	Name    string  `json:"name"`
	Path    string  `json:"path"`
	State   string  `json:"state"`
	Written bool    `json:"written"`
	Backup  *string `json:"backup"`
}

func skillsInstall(c *cli.Context) error {
	o := opts(c)
	dir, err := skillsDir(c)
	if err != nil {
		return err
	}
	res, err := skills.Install(dir, c.Bool("force"))
	var changed *skills.ChangedError
	if errors.As(err, &changed) {
		where := ""
		if c.IsSet("dir") {
			where = " --dir " + shellArg(dir)
		}
		return named("skill_changed", withHint(err, "see what it would change: rewind skills diff"+where,
			"overwrite it (your file is kept beside it as SKILL.md.<hash>.bak): rewind skills install"+where+" --force"))
	}
	if err != nil {
		return blockedHint(err)
	}
	if o.JSON {
		out := []skillJSON{}
		for _, r := range res {
			j := skillJSON{Name: r.Skill.Name, Path: r.Path, State: string(r.State), Written: r.Written}
			if r.Backup != "" {
				j.Backup = &r.Backup
			}
			out = append(out, j)
		}
		return writeJSON(o, map[string]any{"dir": dir, "skills": out})
	}
	for _, r := range res {
		switch {
		case r.Backup != "":
			fmt.Fprintf(o.Stdout, "replaced   %s (your version is kept as %s)\n", r.Path, filepath.Base(r.Backup))
		case r.State == skills.Missing:
			fmt.Fprintf(o.Stdout, "installed  %s\n", r.Path)
		case r.State == skills.Outdated:
			fmt.Fprintf(o.Stdout, "updated    %s\n", r.Path)
		default:
			fmt.Fprintf(o.Stdout, "unchanged  %s\n", r.Path)
		}
	}
	return nil
}

// diffHeader says what an install does with a skill that differs.
var diffHeader = map[skills.State]string{
	skills.Missing:  "not installed; an install writes it",
	skills.Outdated: "an older version rewind shipped; an install updates it",
	skills.Changed:  "changed by its user (no version rewind shipped); an install keeps it unless --force",
}

func skillsDiff(c *cli.Context) error {
	o := opts(c)
	dir, err := skillsDir(c)
	if err != nil {
		return err
	}
	entries, err := skills.Inspect(dir)
	if err != nil {
		return blockedHint(err)
	}
	type diffJSON struct {
		Name  string  `json:"name"`
		Path  string  `json:"path"`
		State string  `json:"state"`
		Diff  *string `json:"diff"`
	}
	docs := []diffJSON{}
	differ := false
	for _, e := range entries {
		j := diffJSON{Name: e.Skill.Name, Path: e.Path, State: string(e.State)}
		if e.State != skills.Current {
			differ = true
			// a/ and b/ name the file relative to DIR, so the output applies
			// with `patch -p1` run in DIR, as git's does.
			from := "a/" + e.Skill.Path()
			if e.State == skills.Missing {
				from = "/dev/null"
			}
			d := skills.UnifiedDiff(from, "b/"+e.Skill.Path(), e.Installed, e.Skill.Content)
			j.Diff = &d
			if !o.JSON {
				fmt.Fprintf(o.Stdout, "skill %s: %s: %s\n%s", e.Skill.Name, e.Path, diffHeader[e.State], d)
			}
		}
		docs = append(docs, j)
	}
	if o.JSON {
		if err := writeJSON(o, map[string]any{"dir": dir, "differs": differ, "skills": docs}); err != nil {
			return err
		}
	}
	if differ && c.Bool("exit-code") {
		return silentExit(exitFailure, "an install would change the skills")
	}
	return nil
}

func hooksCommand() *cli.Command {
	return &cli.Command{
		Name:  "hooks",
		Usage: "hooks configurations for agents: claude-code",
		Subcommands: []*cli.Command{
			{
				Name:      "claude-code",
				Usage:     "print the Claude Code hooks that checkpoint after every tool call that can change files",
				ArgsUsage: " ",
				Description: "Prints the configuration: a PostToolUse hook for the " + skills.HookMatcher + "\n" +
					"tools that runs `" + skills.HookCommand + "`. With --install, merges it into the project's\n" +
					".claude/settings.json (or --settings FILE), keeping every other key and hook, after a\n" +
					"backup of the file; when the hook is there already, nothing is written.",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "install", Usage: "merge it into the settings file"},
					&cli.StringFlag{Name: "settings", Usage: "the settings `FILE` (default: <work tree>/.claude/settings.json)", TakesFile: true},
				},
				Action: hooksClaudeCode,
			},
		},
	}
}

func hooksClaudeCode(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	config := skills.ClaudeCodeConfig()
	if !c.Bool("install") {
		if c.IsSet("settings") {
			return usageErrorf("--settings goes with --install")
		}
		if o.JSON {
			return writeJSON(o, map[string]any{"settings": nil, "installed": false, "backup": nil, "config": json.RawMessage(config)})
		}
		_, err := o.Stdout.Write(config)
		return err
	}
	path := c.String("settings")
	if path == "" {
		path = filepath.Join(o.WorkTree, ".claude", "settings.json")
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return usageErrorf("--settings %q: %v", c.String("settings"), err)
	}
	path, err = settingsTarget(path)
	if err != nil {
		return err
	}
	if err := settingsInTheWay(path); err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("settings %s: %w", path, err)
	}
	merged, changed, err := skills.MergeHooks(old)
	var se *skills.SettingsError
	if errors.As(err, &se) {
		return named("settings_invalid", withHint(fmt.Errorf("not changing %s: %w", path, err),
			"fix the file, or add the hooks `rewind hooks claude-code` prints by hand"))
	}
	if err != nil {
		return err
	}
	var backup string
	if changed {
		if old != nil {
			backup = backupName(path, o.Now())
			if err := writeFileWhole(backup, old); err != nil {
				return fmt.Errorf("backup of %s: %w", path, err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := writeFileWhole(path, merged); err != nil {
			return fmt.Errorf("settings %s: %w", path, err)
		}
	}
	if o.JSON {
		var b any
		if backup != "" {
			b = backup
		}
		return writeJSON(o, map[string]any{"settings": path, "installed": changed, "backup": b, "config": json.RawMessage(config)})
	}
	switch {
	case !changed:
		fmt.Fprintf(o.Stdout, "The rewind hook is in %s already; nothing changed.\n", path)
	case backup != "":
		fmt.Fprintf(o.Stdout, "Added the rewind PostToolUse hook to %s (the previous file is kept as %s).\n", path, backup)
	default:
		fmt.Fprintf(o.Stdout, "Wrote %s with the rewind PostToolUse hook.\n", path)
	}
	return nil
}

// settingsTarget is the file to merge the hook into: path itself, or, when
// path is a symlink (settings kept in a dotfiles repository), the file it
// points to, so that the link stays a link and the backup lies beside the
// file it copies. A symlink to nothing is refused: writing would replace the
// link with a file.
func settingsTarget(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return path, nil // a missing file is created; another error is ReadFile's to report
	}
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		return real, nil
	}
	link, _ := os.Readlink(path)
	if !filepath.IsAbs(link) {
		link = filepath.Join(filepath.Dir(path), link)
	}
	return "", withHint(fmt.Errorf("not changing %s: it is a symlink to %s, which does not exist", path, link),
		"create that file, or point --settings at another one")
}

// settingsInTheWay names what stops the settings file at path from being
// read or written: a directory where the file goes, or a file where one of
// its directories goes.
func settingsInTheWay(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return withHint(fmt.Errorf("not changing %s: it is a directory, not a settings file", path),
			"move it aside, or name another settings file with --settings")
	}
	for dir := filepath.Dir(path); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err == nil {
			if fi.IsDir() {
				return nil
			}
			return withHint(fmt.Errorf("not changing %s: %s is a file, not a directory", path, dir),
				"move "+shellArg(dir)+" aside, or name another settings file with --settings")
		}
	}
	return nil
}

// backupName is PATH.bak-<time>, with -2, -3 ... when that exists: a backup
// never replaces an older one.
func backupName(path string, now time.Time) string {
	base := path + ".bak-" + now.UTC().Format("20060102T150405Z")
	name := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// writeFileWhole writes data to path whole or not at all, keeping the mode of
// the file it replaces (0644 for a new one).
func writeFileWhole(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	return skills.WriteFileAtomic(path, data, mode)
}

// hookWait is how long the hook waits for another rewind's lock: well inside
// the hook's timeout in Claude Code (skills.HookTimeout).
const hookWait = 10 * time.Second

func hookCommand() *cli.Command {
	return &cli.Command{
		Name:  "hook",
		Usage: "run as an agent's hook: post-tool-use",
		Subcommands: []*cli.Command{
			{
				Name:      "post-tool-use",
				Usage:     "checkpoint the work tree after a tool call (Claude Code's PostToolUse JSON on stdin), only when it changed",
				ArgsUsage: " ",
				Description: "Reads the hook's JSON on stdin (tool_name, cwd, session_id) and takes a checkpoint\n" +
					"with reason tool-<tool_name> and source hook, unless the work tree is the same as the\n" +
					"newest checkpoint's. The work tree is --work-tree, else $CLAUDE_PROJECT_DIR, else the\n" +
					"payload's cwd (its repository's top level). It never exits 2 (which Claude Code reads\n" +
					"as blocking): a failure is exit 1 with one line on stderr, and the tool call goes on.",
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "wait", Value: hookWait, Usage: "how long to wait for another rewind holding the store's lock"},
				},
				Action: hookPostToolUse,
			},
		},
	}
}

// isHookCall reports whether args run `rewind hook ...` (the first word that
// is not a global flag or its value), whose errors must not exit 2: Claude
// Code takes 2 from a hook as "block".
func isHookCall(args []string) bool {
	for i := 1; i < len(args); i++ {
		switch a := args[i]; a {
		case "-C", "--work-tree", "--store", "--now", "--color":
			i++
		default:
			if !strings.HasPrefix(a, "-") {
				return a == "hook"
			}
		}
	}
	return false
}

func hookPostToolUse(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	payload, err := io.ReadAll(io.LimitReader(o.Stdin, 64<<20))
	if err != nil {
		return fmt.Errorf("hook: reading stdin: %w", err)
	}
	call, err := skills.ParseToolCall(payload)
	if err != nil {
		return named("hook_input_invalid", fmt.Errorf("hook: %w", err))
	}
	if c.String("work-tree") == "" { // (IsSet is true for an empty REWIND_WORK_TREE)
		dir := os.Getenv("CLAUDE_PROJECT_DIR")
		if dir == "" {
			dir = call.Cwd
		}
		if dir != "" {
			if err := setWorkTree(c, o, dir); err != nil {
				return err
			}
		}
	}
	s, err := openStore(c)
	if err != nil {
		return fmt.Errorf("hook: %w", err)
	}
	s.Wait = c.Duration("wait")
	keep, err := keepFromEnv()
	if err != nil {
		return err
	}
	res, err := s.Create(c.Context, checkpoint.CreateOptions{Reason: "tool-" + call.ToolName, Source: checkpoint.SourceHook,
		Keep: keep, OnlyIfChanged: true})
	if err != nil {
		return fmt.Errorf("hook: no checkpoint taken: %w", err)
	}
	taken := !res.NotTaken && !res.Duplicate
	if o.JSON {
		doc := map[string]any{"taken": taken, "checkpoint": nil, "unchanged_since_id": nil, "tool_name": call.ToolName, "session_id": nil}
		if call.SessionID != "" {
			doc["session_id"] = call.SessionID
		}
		if !taken {
			doc["unchanged_since_id"] = res.Checkpoint.ID
		} else {
			doc["checkpoint"] = toJSON(res.Checkpoint)
		}
		return writeJSON(o, doc)
	}
	if taken {
		fmt.Fprintf(o.Stdout, "%s %s\n", res.Checkpoint.Short(), res.Checkpoint.Reason)
	}
	return nil
}

// setWorkTree points the command at dir's project (the top level of its git
// repository), as --work-tree would.
func setWorkTree(c *cli.Context, o *options, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("hook: work tree %q: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return fmt.Errorf("hook: work tree %s is not a directory", abs)
	}
	defer o.setHintCommand(c, true) // the work tree is the hook's, not the current directory's
	if real, err := filepath.EvalSymlinks(abs); err == nil && real == o.WorkTree {
		return nil // the project the current directory gave already: no second git call
	}
	top := projectTop(c.Context, abs)
	if real, err := filepath.EvalSymlinks(top); err == nil {
		top = real
	}
	o.WorkTree = top
	return nil
}
