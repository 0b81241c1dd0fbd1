package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/gitexec"
	"github.com/rewind-cli/rewind/replay"
)

// `rewind checkpoint` keeps exact snapshots of the work tree in a shadow git
// repository; the project's own .git is never touched.

func checkpointCommand() *cli.Command {
	wait := &cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long to wait for another rewind holding the store's lock"}
	maxSize := &cli.StringFlag{Name: "max-file-size", EnvVars: []string{"REWIND_MAX_FILE_SIZE"}, Value: "100MiB", Usage: "skip files larger than `SIZE` (bytes, or with K, M, G, KiB, MiB, GiB)"}
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "exact snapshots of the work tree: create, list, show, diff, restore, prune, status",
		Description: "Snapshots live in a shadow git repository (the store, --store or REWIND_STORE, default\n" +
			"~/.claude/projects/<h>/checkpoints/<h>/); the project's own .git is never touched.\n" +
			"REF is a unique commit id prefix (4+ characters), a reason (the newest checkpoint whose\n" +
			"reason equals it or extends it: pre-wave matches pre-wave-3), latest, or latest~N.",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "snapshot the work tree; prints <id8> <reason>",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "reason", Usage: "why the checkpoint is taken (`REASON`, e.g. pre-wave-3)"},
					&cli.StringFlag{Name: "source", Value: "manual", Usage: "the skill or command taking it (`SOURCE`)"},
					maxSize, wait,
				},
				Action: checkpointCreate,
			},
			{
				Name:      "list",
				Usage:     "list checkpoints, newest first",
				ArgsUsage: " ",
				Flags:     []cli.Flag{&cli.IntFlag{Name: "limit", Usage: "show at most `N` checkpoints", DefaultText: "all"}},
				Action:    checkpointList,
			},
			{
				Name:      "show",
				Usage:     "a checkpoint's metadata and the paths changed against the previous one",
				ArgsUsage: "REF",
				Action:    checkpointShow,
			},
			{
				Name:      "diff",
				Usage:     "paths changed between two checkpoints, or a checkpoint and the work tree",
				ArgsUsage: "REF [REF2]",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "stat", Usage: "git's --stat summary"},
					&cli.BoolFlag{Name: "patch", Usage: "the full patch"},
					&cli.BoolFlag{Name: "z", Usage: "the list of paths NUL-separated, unquoted (STATUS NUL PATH NUL, as git diff --name-status -z)"},
					wait,
				},
				Action: checkpointDiff,
			},
			{
				Name:      "restore",
				Usage:     "bring the work tree back to a checkpoint, exactly (after a safety checkpoint)",
				ArgsUsage: "REF",
				Flags: []cli.Flag{
					&cli.StringSliceFlag{Name: "file", Usage: "restore only this `PATH` (relative to the current directory, as git takes it, or to the work tree with -C or from outside it; :/PATH from the work tree's top; repeatable)"},
					&cli.BoolFlag{Name: "dry-run", Usage: "list what would be written and removed; change nothing"},
					&cli.StringFlag{Name: "verify", Usage: "run `CMD` (sh -c, in the work tree) after restoring; a failure is exit 1"},
					maxSize, wait,
				},
				Action: checkpointRestore,
			},
			{
				Name:      "prune",
				Usage:     "evict all but the newest N checkpoints and reclaim their space",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "keep", Usage: "keep the newest `N` checkpoints", DefaultText: "$REWIND_KEEP, or 50"},
					wait,
				},
				Action: checkpointPrune,
			},
			{
				Name:      "adopt",
				Usage:     "make the store of this project's old path (moved or renamed) this work tree's",
				ArgsUsage: " ",
				Description: "With --from OLD_PATH, the store of the work tree that was at OLD_PATH (its default\n" +
					"location) is recorded for this work tree and moved to this work tree's default location;\n" +
					"with --store DIR, the store in DIR is recorded for this work tree and stays where it is.\n" +
					"Refused when the old path still exists and is another directory (a different project, or a\n" +
					"copy: its checkpoints are its own), and when this work tree has a store already. Asks for\n" +
					"confirmation (--yes without a terminal). list, show and diff read such a store without it.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "from", Usage: "the project's old `PATH` (where it was when its checkpoints were taken)"},
					wait,
				},
				Action: checkpointAdopt,
			},
			{
				Name:      "status",
				Usage:     "the store: location, checkpoints, size, newest, health",
				ArgsUsage: " ",
				Action:    checkpointStatus,
			},
		},
	}
}

// openStore opens the work tree's store and warns about an interrupted restore
// (commands that change the store refuse to work on one instead).
func openStore(c *cli.Context) (*checkpoint.Store, error) {
	o := opts(c)
	s, err := checkpoint.Open(o.WorkTree, o.Store)
	if err != nil {
		return nil, err
	}
	setUpStore(c, s)
	return s, nil
}

// setUpStore gives an opened store the command's warnings, clock and lock wait.
func setUpStore(c *cli.Context, s *checkpoint.Store) {
	o := opts(c)
	s.Warn = func(msg string) { o.warnf("%s", msg) }
	if o.NowSet {
		s.Now = o.Now
	}
	if c.IsSet("wait") {
		s.Wait = c.Duration("wait")
	}
}

// openStoreReadOnly opens the store for a command that only reads it (list,
// show, diff, status): a store recorded for another work tree, a moved or
// renamed project's, is read with a note saying how to adopt it.
func openStoreReadOnly(c *cli.Context) (*checkpoint.Store, error) {
	o := opts(c)
	s, err := checkpoint.OpenReadOnly(o.WorkTree, o.Store)
	if err != nil {
		return nil, err
	}
	setUpStore(c, s)
	if s.Foreign != "" {
		o.notef("note: the store %s belongs to work tree %s, not %s; reading it only (to make it this work tree's: %s)",
			s.Dir, s.Foreign, s.WorkTree, adoptCommand(s.Dir, s.Foreign))
	}
	return s, nil
}

// adoptCommand is the command that adopts the store in dir, recorded for the
// work tree old: --from when dir is old's default store, else --store.
func adoptCommand(dir, old string) string {
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(old) && filepath.Clean(checkpoint.DefaultDir(home, old)) == filepath.Clean(dir) {
		return "rewind checkpoint adopt --from " + shellArg(old)
	}
	return "rewind checkpoint adopt --store " + shellArg(dir)
}

// createWithReason is the checkpoint create command line c asked for, with
// reason as --reason and every other flag given kept, ready to paste.
func createWithReason(c *cli.Context, reason string) string {
	line := opts(c).hintCommand + " checkpoint create --reason " + shellArg(reason)
	for _, flag := range []string{"source", "max-file-size", "wait"} {
		if c.IsSet(flag) {
			line += " --" + flag + " " + shellArg(c.String(flag))
		}
	}
	return line
}

// undoRestore is the hint that undoes a restore: the restore of its safety
// checkpoint.
func undoRestore(o *options, safety *checkpoint.Checkpoint) string {
	return "undo it: " + o.hintCommand + " checkpoint restore " + safety.Short() + " --yes"
}

// shellArg quotes s for a command line a user can paste, when it needs it.
func shellArg(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@%+,", r))
	}) < 0 {
		return s
	}
	return shellQuote(s)
}

func checkpointAdopt(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	from := c.String("from")
	if (from == "") == (o.Store == "") {
		return withHint(usageErrorf("checkpoint adopt needs the old store: --from OLD_PATH (the project's old path) or --store DIR, not both"),
			"for a project moved from /old/path: rewind checkpoint adopt --from /old/path")
	}
	home, _ := os.UserHomeDir()
	var src, dst string
	if from != "" {
		abs, err := filepath.Abs(from)
		if err != nil {
			return usageErrorf("--from %q: %v", from, err)
		}
		from = abs
		if home == "" {
			return errors.New("no home directory for the default store; pass --store")
		}
		src, dst = checkpoint.DefaultDir(home, from), checkpoint.DefaultDir(home, o.WorkTree)
		if filepath.Clean(src) == filepath.Clean(dst) {
			return usageErrorf("--from %s is this work tree", from)
		}
	} else {
		src, dst = o.Store, o.Store
	}
	recorded, ok, err := checkpoint.Recorded(src)
	if err != nil {
		return err
	}
	if !ok {
		if from != "" {
			return withHint(exitErrorf(exitFailure, "no checkpoint store for %s (looked in %s)", from, src),
				"the project's old path is the one its checkpoints were taken in, as `rewind checkpoint status` printed it there")
		}
		return exitErrorf(exitFailure, "no checkpoint store in %s", src)
	}
	if from != "" && recorded != from && recorded != o.WorkTree && recorded != "(no record)" {
		return exitErrorf(exitGuard, "the store %s records work tree %s, not %s (refusing)", src, recorded, from)
	}
	if recorded == o.WorkTree && src == dst {
		if o.JSON {
			return writeJSON(o, map[string]any{"store": dst, "work_tree": o.WorkTree, "previous_work_tree": recorded, "adopted": false, "moved": false, "checkpoints_count": nil})
		}
		fmt.Fprintf(o.Stdout, "The store %s is %s's already; nothing to do.\n", dst, o.WorkTree)
		return nil
	}
	where := "it stays where it is"
	if src != dst {
		where = "it moves to " + dst
	}
	if err := o.confirm(fmt.Sprintf("Adopt the checkpoint store of %s (%s) for %s? %s, and it records %s from now on.", recorded, src, o.WorkTree, strings.ToUpper(where[:1])+where[1:], o.WorkTree)); err != nil {
		return err
	}
	wait := 30 * time.Second
	if c.IsSet("wait") {
		wait = c.Duration("wait")
	}
	res, err := checkpoint.Adopt(c.Context, checkpoint.AdoptOptions{From: src, To: dst, WorkTree: o.WorkTree, Wait: wait})
	if err != nil {
		var ae *checkpoint.AdoptError
		if errors.As(err, &ae) && from != "" && strings.Contains(ae.Why, "still exists") {
			return withHint(err, "its checkpoints can be read without adopting them: rewind checkpoint list --store "+shellArg(src),
				"if "+from+" is an old copy you no longer need, move it away first")
		}
		if errors.As(err, &ae) && strings.Contains(ae.Why, "already has a store") {
			return withHint(err, "read the old checkpoints without adopting them: rewind checkpoint list --store "+shellArg(src))
		}
		return err
	}
	if o.JSON {
		return writeJSON(o, map[string]any{"store": dst, "work_tree": o.WorkTree, "previous_work_tree": res.Previous, "adopted": true, "moved": res.Moved, "checkpoints_count": res.Checkpoints})
	}
	where = "it stays in " + dst
	if res.Moved {
		where = "it moved to " + dst
	}
	fmt.Fprintf(o.Stdout, "Adopted the checkpoint store of %s (%s) for %s; %s.\n", res.Previous, plural(res.Checkpoints, "checkpoint", "checkpoints"), o.WorkTree, where)
	if from != "" {
		if mem := filepath.Join(filepath.Dir(filepath.Dir(src)), "memory"); isDir(mem) {
			o.notef("note: the old path's pipeline scratch directory %s stays where it is; rewind replay %s reads it", mem, shellArg(mem))
		}
	}
	return nil
}

func warnInterrupted(o *options, s *checkpoint.Store) {
	if err := s.Interrupted(); err != nil {
		o.warnf("%v", err)
		if ie, ok := err.(*checkpoint.InterruptedError); ok {
			for _, h := range ie.Hints() {
				o.hintf("%s", h)
			}
		}
	}
}

func keepFromEnv() (int, error) {
	v := os.Getenv("REWIND_KEEP")
	if v == "" {
		return 50, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, usageErrorf("invalid REWIND_KEEP %q: want a positive number", v)
	}
	return n, nil
}

// parseSize reads 1048576, 100M, 100MiB, 2G, 512K (K, M, G are binary, as
// file sizes usually are).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 {
		return 0, usageErrorf("invalid size %q: want bytes, or a number with K, M, G, KiB, MiB or GiB", s)
	}
	return n * mult, nil
}

func oneArg(c *cli.Context, name string) (string, error) {
	if c.NArg() != 1 {
		return "", usageErrorf("%s needs exactly one %s; got %d arguments", commandName(c), name, c.NArg())
	}
	return c.Args().First(), nil
}

// checkpointJSON is a checkpoint in --json output.
type checkpointJSON struct {
	ID            string        `json:"id"`
	ShortID       string        `json:"short_id"`
	Reason        string        `json:"reason"`
	Source        *string       `json:"source"` // null: the commit names none
	Timestamp     string        `json:"timestamp"`
	ProjectBranch *string       `json:"project_branch"` // null: not recorded (or HEAD detached)
	ProjectHead   *string       `json:"project_head"`   // null: not recorded
	Skipped       []skippedJSON `json:"skipped_paths"`
}

type skippedJSON struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

func toJSON(c *checkpoint.Checkpoint) checkpointJSON {
	j := checkpointJSON{ID: c.ID, ShortID: c.Short(), Reason: c.Reason, Source: strPtr(c.Source),
		Timestamp: c.Time.Format(time.RFC3339), ProjectBranch: strPtr(c.Branch), ProjectHead: strPtr(c.Head), Skipped: []skippedJSON{}}
	for _, s := range c.Skipped {
		j.Skipped = append(j.Skipped, skippedJSON{s.Path, s.Why})
	}
	return j
}

type changeJSON struct {
	Status string `json:"status"`
	Path   string `json:"path"`
}

func changesJSON(changes []checkpoint.Change) []changeJSON {
	out := []changeJSON{}
	for _, ch := range changes {
		out = append(out, changeJSON{ch.Status, ch.Path})
	}
	return out
}

func checkpointCreate(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		if c.NArg() == 1 && !c.IsSet("reason") {
			// The reason given as an argument: the hint is the command meant.
			return withHint(err, "the reason is a flag: "+createWithReason(c, c.Args().First()))
		}
		return err
	}
	if !c.IsSet("reason") {
		return usageErrorf("checkpoint create needs --reason (for example --reason pre-wave-3)")
	}
	max, err := parseSize(c.String("max-file-size"))
	if err != nil {
		return err
	}
	keep, err := keepFromEnv()
	if err != nil {
		return err
	}
	s, err := openStore(c)
	if err != nil {
		return err
	}
	if known, ok := replay.BoundaryTypo(c.String("reason")); ok {
		o.warnf("reason %q looks like the boundary %s mistyped: it is taken as given, but replay resumes only from a boundary's known form (%s)", c.String("reason"), known, known)
	}
	done := trackProgress(o, s, "checkpoint")
	res, err := s.Create(c.Context, checkpoint.CreateOptions{Reason: c.String("reason"), Source: c.String("source"), MaxFileSize: max, Keep: keep, CountChanges: o.JSON})
	done()
	if err != nil {
		return err
	}
	cp := res.Checkpoint
	switch {
	case res.Duplicate:
		o.notef("same reason, source and tree as %s a moment ago; nothing new recorded", cp.Short())
	case res.Unchanged != nil:
		o.notef("unchanged since %s", res.Unchanged.Short())
	}
	if len(res.Evicted) > 0 {
		o.notef("evicted %s beyond the newest %d; `rewind checkpoint prune` reclaims their space", plural(len(res.Evicted), "checkpoint", "checkpoints"), keep)
	}
	if o.JSON {
		j := struct {
			checkpointJSON
			Files     int  `json:"files_count"`
			Changed   int  `json:"changes_count"`
			Duplicate bool `json:"duplicate"`
		}{toJSON(cp), res.Files, res.Changed, res.Duplicate}
		return writeJSON(o, j)
	}
	fmt.Fprintf(o.Stdout, "%s %s\n", cp.Short(), cp.Reason)
	return nil
}

func checkpointList(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Int("limit") < 0 {
		return usageErrorf("invalid --limit %d: want 0 (all) or more", c.Int("limit"))
	}
	s, err := openStoreReadOnly(c)
	if err != nil {
		return err
	}
	warnInterrupted(o, s)
	cps, err := s.List(c.Context)
	if err != nil {
		return err
	}
	// Newest first.
	var rows []*checkpoint.Checkpoint
	for i := len(cps) - 1; i >= 0; i-- {
		if n := c.Int("limit"); n > 0 && len(rows) == n {
			break
		}
		rows = append(rows, cps[i])
	}
	if o.JSON {
		list := []checkpointJSON{}
		for _, cp := range rows {
			list = append(list, toJSON(cp))
		}
		return writeJSON(o, map[string]any{"work_tree": s.WorkTree, "store": s.Dir, "checkpoints": list})
	}
	if len(rows) == 0 {
		o.notef("no checkpoints for %s", s.WorkTree)
		return nil
	}
	table := [][]string{{"Hash", "Timestamp", "Reason", "Source"}}
	for _, cp := range rows {
		table = append(table, []string{cp.Short(), cp.Time.Format(time.RFC3339), cp.Reason, cp.Source})
	}
	writeTable(o.Stdout, table)
	return nil
}

// writeTable prints a markdown table with padded columns, as crucible's
// checkpoint list shows it.
func writeTable(w io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			if n := len([]rune(cell)); n > widths[i] {
				widths[i] = n
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, cell := range cells {
			fmt.Fprintf(&b, " %s%s |", cell, strings.Repeat(" ", widths[i]-len([]rune(cell))))
		}
		fmt.Fprintln(w, b.String())
	}
	line(rows[0])
	var sep strings.Builder
	sep.WriteString("|")
	for _, n := range widths {
		sep.WriteString(strings.Repeat("-", n+2) + "|")
	}
	fmt.Fprintln(w, sep.String())
	for _, r := range rows[1:] {
		line(r)
	}
}

func checkpointShow(c *cli.Context) error {
	o := opts(c)
	ref, err := oneArg(c, "REF")
	if err != nil {
		return err
	}
	s, err := openStoreReadOnly(c)
	if err != nil {
		return err
	}
	warnInterrupted(o, s)
	cp, prev, changes, err := s.Show(c.Context, ref)
	if err != nil {
		return err
	}
	files, err := s.Files(c.Context, cp)
	if err != nil {
		return err
	}
	if o.JSON {
		var prevID *string // null: the first checkpoint
		if prev != nil {
			prevID = &prev.ID
		}
		return writeJSON(o, struct {
			checkpointJSON
			Files    int          `json:"files_count"`
			Previous *string      `json:"previous_id"`
			Changes  []changeJSON `json:"changes"`
		}{toJSON(cp), files, prevID, changesJSON(changes)})
	}
	w := o.Stdout
	fmt.Fprintf(w, "checkpoint %s\n", cp.ID)
	fmt.Fprintf(w, "reason:    %s\n", cp.Reason)
	fmt.Fprintf(w, "source:    %s\n", cp.Source)
	fmt.Fprintf(w, "timestamp: %s\n", cp.Time.Format(time.RFC3339))
	if cp.Head != "" {
		fmt.Fprintf(w, "project:   %s at %s\n", orNone(cp.Branch, "(detached)"), cp.Head)
	}
	fmt.Fprintf(w, "files:     %d\n", files)
	for _, sk := range cp.Skipped {
		fmt.Fprintf(w, "skipped:   %s: %s\n", gitQuotePath(sk.Path), sk.Why)
	}
	if prev != nil {
		fmt.Fprintf(w, "changes since %s (%s):\n", prev.Short(), prev.Reason)
	} else {
		fmt.Fprintf(w, "changes (first checkpoint):\n")
	}
	for _, ch := range changes {
		fmt.Fprintf(w, "%s\t%s\n", ch.Status, gitQuotePath(ch.Path))
	}
	return nil
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func checkpointDiff(c *cli.Context) error {
	o := opts(c)
	if c.NArg() < 1 || c.NArg() > 2 {
		return usageErrorf("checkpoint diff needs REF and an optional REF2; got %d arguments", c.NArg())
	}
	if c.Bool("stat") && c.Bool("patch") {
		return usageErrorf("--stat and --patch exclude each other")
	}
	if c.Bool("z") && (c.Bool("stat") || c.Bool("patch")) {
		return usageErrorf("-z goes with the list of paths, not with --stat or --patch")
	}
	format := ""
	if c.Bool("stat") {
		format = "stat"
	} else if c.Bool("patch") {
		format = "patch"
	}
	s, err := openStoreReadOnly(c)
	if err != nil {
		return err
	}
	warnInterrupted(o, s)
	from, to, changes, text, err := s.Diff(c.Context, c.Args().Get(0), c.Args().Get(1), format)
	if err != nil {
		return err
	}
	if o.JSON {
		var toID *string // null: the work tree
		if to != nil {
			toID = &to.ID
		}
		return writeJSON(o, map[string]any{"from_id": from.ID, "to_id": toID, "changes": changesJSON(changes)})
	}
	if format != "" {
		_, err := io.WriteString(o.Stdout, text)
		return err
	}
	for _, ch := range changes {
		if c.Bool("z") {
			fmt.Fprintf(o.Stdout, "%s\x00%s\x00", ch.Status, ch.Path)
			continue
		}
		fmt.Fprintf(o.Stdout, "%s\t%s\n", ch.Status, gitQuotePath(ch.Path))
	}
	return nil
}

// restorePreview computes what restoring ref would do, prints it for --dry-run
// or asks to go ahead, and returns the checkpoint's id, so the restore that
// follows is the one previewed.
func restorePreview(c *cli.Context, s *checkpoint.Store, ref string, opt checkpoint.RestoreOptions, note string) (string, error) {
	o := opts(c)
	opt.DryRun = true
	preview, err := s.Restore(c.Context, ref, opt)
	if err != nil {
		return "", err
	}
	target := preview.Target
	if c.Bool("dry-run") {
		if o.JSON {
			return target.ID, writeJSON(o, restoreJSON(preview, map[string]any{"checkpoint": toJSON(target), "dry_run": true, "safety_checkpoint": nil, "verify": nil}))
		}
		summary := fmt.Sprintf("write %d, remove %d", len(preview.Write), len(preview.Remove))
		for _, extra := range []struct {
			verb  string
			paths []string
		}{{"make directory", preview.Mkdir}, {"remove directory", preview.Rmdir}, {"set the bits of", preview.Chmod}} {
			if len(extra.paths) > 0 {
				summary += fmt.Sprintf(", %s %d", extra.verb, len(extra.paths))
			}
		}
		fmt.Fprintf(o.Stdout, "Would restore to checkpoint %s (%s): %s\n", target.Short(), target.Reason, summary)
		for _, list := range []struct {
			verb  string
			paths []string
		}{{"write", preview.Write}, {"remove", preview.Remove}, {"mkdir", preview.Mkdir}, {"rmdir", preview.Rmdir}, {"chmod", preview.Chmod}} {
			for _, p := range list.paths {
				fmt.Fprintf(o.Stdout, "%s\t%s\n", list.verb, gitQuotePath(p))
			}
		}
		return target.ID, nil
	}
	question := fmt.Sprintf("Restore %s to checkpoint %s (%s, taken %s%s)? This writes %s and removes %s; a safety checkpoint is taken first.",
		s.WorkTree, target.Short(), target.Reason, target.Time.Format(time.RFC3339), note, plural(len(preview.Write), "file", "files"), plural(len(preview.Remove), "file", "files"))
	return target.ID, o.confirm(question)
}

// branchMismatch warns when the checkpoint ref names was taken on another
// branch than the project's current one, and returns what the confirmation
// question adds (" on branch main, not feature"); "" when the branches agree
// or either is unknown. A restore brings files from another branch's work
// into this one: like replay, it goes ahead only when confirmed (--yes, or a
// yes on a terminal).
func branchMismatch(c *cli.Context, s *checkpoint.Store, ref string) (string, error) {
	// The project's branch is read beside the list (each costs processes).
	var current string
	var inRepo bool
	read := make(chan struct{})
	go func() {
		defer close(read)
		current, inRepo = s.ProjectBranch(c.Context)
	}()
	cps, err := s.List(c.Context)
	<-read
	if err != nil {
		// The restore lists them again under the lock, where a store git
		// gives up on is checked and repaired, or reports the error.
		return "", nil
	}
	target, err := checkpoint.Resolve(cps, ref)
	if err != nil {
		return "", err
	}
	return branchNote(opts(c), target, current, inRepo), nil
}

// branchNote warns when target was taken on another branch than current
// (the project's, "" when HEAD is detached; inRepo: a repository with a
// HEAD), and returns the words the question adds.
func branchNote(o *options, target *checkpoint.Checkpoint, current string, inRepo bool) string {
	if target.Branch == "" || !inRepo || current == target.Branch {
		return ""
	}
	now := "branch " + current
	if current == "" {
		now = "a detached HEAD"
	}
	o.warnf("checkpoint %s (%s) was taken on branch %s, and the project is on %s now", target.Short(), target.Reason, target.Branch, now)
	return fmt.Sprintf(" on branch %s, not %s", target.Branch, now)
}

// noteHeadMoved says when the project's HEAD is not the one the restored
// checkpoint recorded (checkpoint restore, replay): a restore changes files,
// never commits.
func noteHeadMoved(o *options, res *checkpoint.Restored) {
	if res.HeadNow == "" {
		return
	}
	o.notef("note: the project's HEAD (%s) has moved since the checkpoint (%s); the restore changed files, not commits, so `git status` may show them as changed",
		short8(res.HeadNow), short8(res.Target.Head))
}

func checkpointRestore(c *cli.Context) error {
	o := opts(c)
	ref, err := oneArg(c, "REF")
	if err != nil {
		return err
	}
	max, err := parseSize(c.String("max-file-size"))
	if err != nil {
		return err
	}
	s, err := openStore(c)
	if err != nil {
		return err
	}
	files, err := restoreFiles(c, o.WorkTree)
	if err != nil {
		return err
	}
	opt := checkpoint.RestoreOptions{Files: files, MaxFileSize: max}
	if c.Bool("dry-run") || !o.Yes {
		// The branch goes into the question; with --yes the restore reads
		// it anyway (its safety checkpoint records it), and the warning
		// follows it.
		note, err := branchMismatch(c, s, ref)
		if err != nil {
			return err
		}
		// The plan, for --dry-run or for the question; --yes skips it (it costs
		// as much as the safety checkpoint).
		if ref, err = restorePreview(c, s, ref, opt, note); err != nil {
			return err
		}
		if c.Bool("dry-run") {
			return nil
		}
	}
	done := trackProgress(o, s, "restore")
	res, err := s.Restore(c.Context, ref, opt)
	done()
	if err != nil {
		return err
	}
	if o.Yes {
		branchNote(o, res.Target, res.ProjectBranch, res.ProjectHasHead)
	}
	target := res.Target
	noteHeadMoved(o, res)
	// Under --json the document is printed last, with the verify command's
	// outcome.
	var verify any
	printDoc := func() error {
		if !o.JSON {
			return nil
		}
		return writeJSON(o, restoreJSON(res, map[string]any{"checkpoint": toJSON(target), "dry_run": false, "safety_checkpoint": toJSON(res.Safety), "verify": verify}))
	}
	if !o.JSON {
		fmt.Fprintf(o.Stdout, "Restored to checkpoint %s (%s). Safety checkpoint created at %s — use this to undo the restore.\n",
			target.Short(), target.Reason, res.Safety.Short())
	}
	if n := len(res.Failed); n > 0 {
		if err := printDoc(); err != nil {
			return err
		}
		names := make([]string, n)
		for i, f := range res.Failed {
			names[i] = f.Path
		}
		return withHint(exitErrorf(exitFailure, "the restore is not complete: %s it was asked to write could not be written: %s (see the warnings above)",
			plural(n, "path", "paths"), strings.Join(names, ", ")),
			undoRestore(o, res.Safety))
	}
	if cmd := c.String("verify"); cmd != "" {
		code, err := gitexec.User{Dir: s.WorkTree}.Run(c.Context, cmd, nil, o.Stderr, o.Stderr)
		if err != nil {
			return err
		}
		verify = map[string]any{"command": cmd, "exit_code": code}
		if err := printDoc(); err != nil {
			return err
		}
		if code != 0 {
			return withHint(exitErrorf(exitFailure, "verify: %q exited with status %d; the restore stays", cmd, code),
				undoRestore(o, res.Safety))
		}
		o.notef("verify: %q exited with status 0", cmd)
		return nil
	}
	return printDoc()
}

// restoreJSON is a restore's document: what it wrote, removed, made, set and
// left alone, beside the fields given.
func restoreJSON(res *checkpoint.Restored, doc map[string]any) map[string]any {
	doc["write"], doc["remove"] = nonNil(res.Write), nonNil(res.Remove)
	doc["mkdir"], doc["rmdir"], doc["chmod"] = nonNil(res.Mkdir), nonNil(res.Rmdir), nonNil(res.Chmod)
	doc["kept_paths"], doc["failed_paths"] = keptJSON(res.Kept), keptJSON(res.Failed)
	return doc
}

// keptJSON lists the paths a restore left alone, and why.
func keptJSON(kept []checkpoint.Skipped) []skippedJSON {
	out := []skippedJSON{}
	for _, k := range kept {
		out = append(out, skippedJSON{k.Path, k.Why})
	}
	return out
}

func short8(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func checkpointPrune(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	keep := c.Int("keep")
	if !c.IsSet("keep") {
		var err error
		if keep, err = keepFromEnv(); err != nil {
			return err
		}
	} else if keep < 1 {
		return usageErrorf("invalid --keep %d: keep at least 1 checkpoint", keep)
	}
	s, err := openStore(c)
	if err != nil {
		return err
	}
	if !s.Exists() {
		// Nothing to prune, and no store is made to prune it.
		if o.JSON {
			return writeJSON(o, map[string]any{"evicted": []string{}, "kept_count": keep, "bytes_before": 0, "bytes_after": 0, "bytes_reclaimed": 0})
		}
		fmt.Fprintf(o.Stdout, "Nothing to prune: %s has no checkpoint store yet (%s).\n", s.WorkTree, s.Dir)
		return nil
	}
	if err := o.confirm(fmt.Sprintf("Prune the store of %s: evict all but the newest %s and delete what only they held?", s.WorkTree, plural(keep, "checkpoint", "checkpoints"))); err != nil {
		return err
	}
	done := trackProgress(o, s, "prune")
	evicted, before, after, err := s.Prune(c.Context, keep)
	done()
	if err != nil {
		return err
	}
	if o.JSON {
		ids := []string{}
		for _, e := range evicted {
			ids = append(ids, e.ID)
		}
		return writeJSON(o, map[string]any{"evicted": ids, "kept_count": keep, "bytes_before": before, "bytes_after": after, "bytes_reclaimed": before - after})
	}
	fmt.Fprintf(o.Stdout, "Pruned: evicted %s, kept the newest %d; the store's repository went from %d to %d bytes.\n", plural(len(evicted), "checkpoint", "checkpoints"), keep, before, after)
	return nil
}

func checkpointStatus(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	s, err := openStoreReadOnly(c)
	if err != nil {
		return err
	}
	cps, err := s.List(c.Context)
	health := "ok"
	switch {
	case !s.Exists():
		health = "no store yet (the first checkpoint creates it)"
	case err != nil:
		health = "unreadable: " + err.Error() + " (a checkpoint moves the repository aside only when git cannot open it; otherwise the store stays as it is)"
	case s.Interrupted() != nil:
		health = s.Interrupted().Error()
	}
	var newest *checkpoint.Checkpoint
	if len(cps) > 0 {
		newest = cps[len(cps)-1]
	}
	size := s.Size()
	if o.JSON {
		doc := map[string]any{"work_tree": s.WorkTree, "store": s.Dir, "checkpoints_count": len(cps), "size_bytes": size, "health": health, "newest": nil}
		if newest != nil {
			doc["newest"] = toJSON(newest)
		}
		return writeJSON(o, doc)
	}
	w := o.Stdout
	fmt.Fprintf(w, "work tree:   %s\n", s.WorkTree)
	fmt.Fprintf(w, "store:       %s\n", s.Dir)
	fmt.Fprintf(w, "checkpoints: %d\n", len(cps))
	fmt.Fprintf(w, "size:        %d bytes\n", size)
	if newest != nil {
		fmt.Fprintf(w, "newest:      %s %s (%s)\n", newest.Short(), newest.Reason, newest.Time.Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "newest:      none\n")
	}
	fmt.Fprintf(w, "health:      %s\n", health)
	return nil
}

// restoreFiles turns the --file arguments into absolute paths as git takes a
// path: relative to the current directory (to the work tree itself with
// --work-tree/-C, or when the current directory is outside it), and, with a
// leading ":/" (git's top-level magic), relative to the work tree's top. A
// path outside the work tree is a usage error that says so.
func restoreFiles(c *cli.Context, workTree string) ([]string, error) {
	args := c.StringSlice("file")
	if len(args) == 0 {
		return nil, nil
	}
	base := workTree
	if c.String("work-tree") == "" {
		if wd, err := os.Getwd(); err == nil {
			if real, err := filepath.EvalSymlinks(wd); err == nil {
				wd = real
			}
			if within(workTree, wd) {
				base = wd
			}
		}
	}
	var out []string
	for _, p := range args {
		var abs string
		switch {
		case strings.HasPrefix(p, ":/"):
			abs = filepath.Join(workTree, p[2:])
		case filepath.IsAbs(p):
			abs = filepath.Clean(p)
			// The work tree is a physical path: so must the argument's directory be.
			if real, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
				abs = filepath.Join(real, filepath.Base(abs))
			}
		default:
			abs = filepath.Join(base, p)
		}
		if !within(workTree, abs) {
			from := ""
			if !strings.HasPrefix(p, ":/") && !filepath.IsAbs(p) {
				from = fmt.Sprintf(" (a relative --file is taken from %s, as git takes it)", base)
			}
			return nil, withHint(usageErrorf("--file %s is outside the work tree %s%s", p, workTree, from),
				"name the path from the work tree's top with :/, for example: --file :/"+filepath.ToSlash(filepath.Base(abs)))
		}
		out = append(out, abs)
	}
	return out, nil
}

// within reports whether path is dir or lies below it (both clean and absolute).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
