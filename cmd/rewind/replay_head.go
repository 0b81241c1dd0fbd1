package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/gitexec"
	"github.com/rewind-cli/rewind/replay"
)

// A replay's restore moves the project's branch back to the commit the
// restored checkpoint recorded (see replay.PlanHeadMove); --keep-head opts out.

// planHeadMove is the branch move the plan's restore makes, nil when there is
// none (no restore, --keep-head, nothing recorded, nothing moved since).
func planHeadMove(c *cli.Context, plan *replay.Plan, store *checkpoint.Store) (*replay.HeadMove, error) {
	if plan.Restore == nil || c.Bool("keep-head") {
		return nil, nil
	}
	cps, err := store.List(c.Context)
	if err != nil {
		return nil, err
	}
	for _, cp := range cps {
		if cp.ID != plan.Restore.ID {
			continue
		}
		if cp.Head == "" {
			warnNoHead(c, cp)
			return nil, nil
		}
		return replay.PlanHeadMove(c.Context, opts(c).WorkTree, cp.Branch, cp.Head)
	}
	return nil, nil
}

// warnNoHead says that a checkpoint without a recorded HEAD (crucible's own
// checkpoint procedure records none) leaves the branch where it is, and names
// the commits made since it was taken, which stay: a redone dispatch starts on
// top of them.
func warnNoHead(c *cli.Context, cp *checkpoint.Checkpoint) {
	out, err := gitexec.Project{Dir: opts(c).WorkTree}.Run(c.Context, "log", "-z", "--format=%h %s", fmt.Sprintf("--since=@%d", cp.Time.Unix()), "HEAD")
	var commits []string
	if err == nil {
		for _, rec := range strings.Split(string(out), "\x00") {
			if rec = strings.TrimSpace(rec); rec != "" {
				commits = append(commits, rec)
			}
		}
	}
	msg := fmt.Sprintf("checkpoint %s (%s) recorded no project HEAD (crucible's checkpoint procedure records none): the restore puts files back and leaves the branch where it is", cp.Short(), cp.Reason)
	if n := len(commits); n > 0 {
		if n > 5 {
			commits = append(commits[:5], "...")
		}
		msg += fmt.Sprintf("; %s made since it stay on the branch: %s", plural(n, "commit", "commits"), strings.Join(commits, ", "))
	}
	opts(c).warnf("%s", msg)
}

// headRefusal is the fail-closed guard's error for a move that cannot be made;
// keepHead is the command line that replays with --keep-head.
func headRefusal(m *replay.HeadMove, keepHead string) error {
	return withHint(exitErrorf(exitGuard, "%s", m.Refused.Message),
		"restore the files and leave the branch where it is: "+keepHead)
}

// moveHeadBack makes the move, after the restore, and says what left the
// branch and how to bring it back.
func moveHeadBack(c *cli.Context, m *replay.HeadMove, res *checkpoint.Restored, session, path string) error {
	o := opts(c)
	msg := fmt.Sprintf("rewind replay %s: back to checkpoint %s (%s)", session, res.Target.Short(), res.Target.Reason)
	moved, err := gitexec.ProjectBranch{Dir: o.WorkTree}.MoveBack(c.Context, m.Branch, m.From, m.To, msg)
	if err != nil {
		return withHint(fmt.Errorf("the files are restored, but branch %s was not moved back: %w", m.Branch, err),
			undoRestore(o, res.Safety),
			"or resume without moving the branch: "+replayAgain(c, path, "--keep-head"))
	}
	o.notef("moved branch %s back from %s to %s, the commit checkpoint %s recorded; %s left it: %s",
		moved.Branch, short8(moved.From), short8(moved.To), res.Target.Reason,
		plural(len(m.Leaving), "commit", "commits"), replay.NameCommits(m.Leaving))
	o.notef("note: the old HEAD stays reachable (reflog, ORIG_HEAD); to bring it back: %s", moved.Undo())
	return nil
}

// headMoveJSON is the move in the --json plan: null when there is none.
func headMoveJSON(m *replay.HeadMove) any {
	if m == nil {
		return nil
	}
	leaving := []any{}
	for _, c := range m.Leaving {
		leaving = append(leaving, map[string]any{"id": c.ID, "subject": c.Subject})
	}
	var refused any
	if m.Refused != nil {
		refused = m.Refused.Message
	}
	var branch any // null when HEAD is detached
	if m.Branch != "" {
		branch = m.Branch
	}
	return map[string]any{"branch": branch, "from_id": m.From, "to_id": m.To, "leaving": leaving,
		"undo": m.Undo, "refused": refused}
}

// replayAgain is the command line that runs this replay again, for a hint: the
// path and every flag the user gave that shapes the run (--exec, --jobs, ...),
// shell-quoted so it can be pasted, then extra flags (--keep-head, ...).
// --dry-run and --session are left out: a new run is a new session.
func replayAgain(c *cli.Context, path string, extra ...string) string {
	words := []string{opts(c).hintCommand, "replay"}
	if path != "" {
		words = append(words, shellArg(path))
	}
	has := map[string]bool{}
	for _, name := range []string{"exec", "jobs", "templates", "scratch", "from-phase", "from-seq"} {
		if c.IsSet(name) {
			words = append(words, "--"+name, shellArg(c.String(name)))
			has[name] = true
		}
	}
	for _, rk := range c.StringSlice("role-kind") {
		words = append(words, "--role-kind", shellArg(rk))
	}
	for _, name := range []string{"allow-unfaithful", "no-restore", "keep-head", "takeover", "yes"} {
		if c.Bool(name) {
			words = append(words, "--"+name)
			has[name] = true
		}
	}
	for _, e := range extra {
		if !has[strings.TrimPrefix(e, "--")] {
			words = append(words, e)
		}
	}
	return strings.Join(words, " ")
}

// committedWork lists which of paths (relative to the work tree) hold work
// committed since the checkpoint id recorded the project's HEAD: the files the
// commits made since then changed. Nothing when the checkpoint recorded no
// HEAD or the project cannot be read.
func committedWork(c *cli.Context, store *checkpoint.Store, id string, paths []string) []string {
	cps, err := store.List(c.Context)
	if err != nil {
		return nil
	}
	recorded := ""
	for _, cp := range cps {
		if cp.ID == id {
			recorded = cp.Head
		}
	}
	if recorded == "" || len(paths) == 0 {
		return nil
	}
	p := gitexec.Project{Dir: opts(c).WorkTree}
	prefixOut, err := p.Run(c.Context, "rev-parse", "--show-prefix")
	if err != nil {
		return nil
	}
	prefix := strings.TrimSpace(string(prefixOut))
	out, err := p.Run(c.Context, "diff-tree", "-r", "-z", "--name-only", "--no-renames", recorded, "HEAD", "--")
	if err != nil {
		return nil
	}
	changed := map[string]bool{}
	for _, path := range strings.Split(string(out), "\x00") {
		if rel, ok := strings.CutPrefix(path, prefix); ok && rel != "" {
			changed[rel] = true
		}
	}
	var committed []string
	for _, path := range paths {
		if changed[path] {
			committed = append(committed, path)
		}
	}
	sort.Strings(committed)
	return committed
}
