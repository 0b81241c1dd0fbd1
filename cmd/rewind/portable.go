package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/manifest"
	"github.com/rewind-cli/rewind/replay/portable"
)

// Portable runs: `rewind export` and `rewind import` carry a run and every
// checkpoint of its work tree to another machine in one git bundle;
// `rewind checkpoint push` and `pull` share them through any git remote,
// under refs named by the project's root commit. git in the store does all
// of it; the project's own .git is only read.

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a run and every checkpoint of the work tree to one git bundle",
		ArgsUsage: "PATH",
		Description: "PATH is the run, as rewind replay takes it (a manifest.jsonl, a dispatch directory or a\n" +
			"scratch directory). Its files (the dispatch directory; the scratch directory's markers,\n" +
			"pipeline-status.md, handoff and CSB files and durable copy; the debugging handoffs and build\n" +
			"mode file in /tmp) are recorded in the store as a commit under refs/rewind/runs/<session>,\n" +
			"and the bundle holds that ref and every checkpoint's. rewind import recreates it elsewhere.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the bundle to `FILE`", TakesFile: true},
			scratchFlag(),
			&cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long to wait for another rewind holding the store's lock"},
		},
		Action: exportRun,
	}
}

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "recreate a run and its checkpoints from a bundle rewind export wrote",
		ArgsUsage: "BUNDLE",
		Description: "The bundle is checked with git bundle verify before anything is written. Its checkpoints\n" +
			"join the work tree's store (--work-tree; one it has already is not added twice), and its run\n" +
			"is written to the scratch directory (--scratch, default the work tree's) and the dispatch\n" +
			"directory under /tmp (REWIND_TMPDIR), with the paths its markers record rebased. A file in\n" +
			"the way with other content, or a run the store holds that diverged, is refused (exit 4),\n" +
			"with nothing written; a newer export of the run replaces the files an earlier import wrote\n" +
			"that nobody changed since. Importing the same bundle again changes nothing.\n" +
			"With --session ID and no BUNDLE, the run the store holds (rewind checkpoint pull brought it)\n" +
			"is written out the same way.",
		Flags: []cli.Flag{
			scratchFlag(),
			&cli.StringFlag{Name: "session", Usage: "write out the run `ID` the store holds, instead of a bundle's"},
			&cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long to wait for another rewind holding the store's lock"},
		},
		Action: importRun,
	}
}

// shareCommands are checkpoint push and pull.
func shareCommands() []*cli.Command {
	wait := &cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long to wait for another rewind holding the store's lock"}
	return []*cli.Command{
		{
			Name:      "push",
			Usage:     "offer every checkpoint and run of the store to a git remote",
			ArgsUsage: "REMOTE",
			Description: "REMOTE is a git URL or path (a bare repository). Refs go under\n" +
				"refs/rewind/projects/<root commit>/ (checkpoints/<id>, runs/<session>), the same in every\n" +
				"clone of the project. Only fast-forwards: a run the remote holds that diverged is reported\n" +
				"and left as it is (exit 4). The project's .git is only read.",
			Flags:  []cli.Flag{wait},
			Action: checkpointPush,
		},
		{
			Name:      "pull",
			Usage:     "take the project's checkpoints and runs from a git remote into the store",
			ArgsUsage: "REMOTE",
			Description: "Checkpoints the store lacks are added (next sequence numbers, in time order); runs are\n" +
				"created or fast-forwarded; a run that diverged from the store's is reported and left as it\n" +
				"is (exit 4). rewind import --session ID writes a pulled run out.",
			Flags:  []cli.Flag{wait},
			Action: checkpointPull,
		},
	}
}

// portableErr maps the portable errors to exit codes.
func portableErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, checkpoint.ErrBadRemote), errors.Is(err, checkpoint.ErrBadSession):
		return withCode(exitUsage, err)
	case errors.Is(err, checkpoint.ErrNoProjectID):
		return withHint(err, "the project's id is its root commit: make the first commit, then push or pull")
	case errors.Is(err, checkpoint.ErrBadBundle):
		return withHint(err, "write the bundle again with rewind export PATH -o FILE, and copy it whole")
	}
	return err
}

func exportRun(c *cli.Context) error {
	o := opts(c)
	path, err := oneArg(c, "PATH (a manifest, a dispatch directory or a scratch directory)")
	if err != nil {
		return err
	}
	out := c.String("output")
	if out == "" {
		return withHint(usageErrorf("export needs the bundle's file: -o FILE"), "rewind export "+shellArg(path)+" -o run.bundle")
	}
	if err := checkpoint.CheckRemote("bundle path", out); err != nil {
		return portableErr(err)
	}
	src, err := resolveReplaySource(c, path)
	if err != nil {
		return err
	}
	if src.scratch == "" {
		// A dispatch directory named alone: the work tree's scratch directory
		// holds its markers when its .pipeline-active names it.
		if scratch, err := scratchDir(c); err == nil {
			if m, err := manifest.ReadMarker(scratch); err == nil && filepath.Clean(m.DispatchDir) == filepath.Clean(src.dispatchDir) {
				src.scratch, src.marker = scratch, m
			}
		}
	}
	if src.marker != nil && filepath.Base(filepath.Clean(src.marker.DispatchDir)) != filepath.Base(filepath.Clean(src.dispatchDir)) {
		// The scratch directory's marker is another pipeline's (a finished
		// run's durable copy named beside a newer active run): not this run's.
		src.marker = nil
	}
	session := sessionOf(src)
	if session == "" {
		return withHint(exitErrorf(exitFailure, "cannot tell the session of the run in %s: no %s names it and the directory is not crucible-dispatch-<session>", src.dispatchDir, ".pipeline-active"),
			"name the scratch directory that holds its .pipeline-active: rewind export SCRATCH -o FILE")
	}
	if err := checkpoint.CheckSession(session); err != nil {
		return portableErr(err)
	}
	s, err := openStore(c)
	if err != nil {
		return err
	}
	project, _, perr := checkpoint.ProjectID(c.Context, o.WorkTree)
	if perr != nil && !errors.Is(perr, checkpoint.ErrNoProjectID) {
		return perr
	}
	skill := ""
	live := ""
	if src.marker != nil {
		skill, live = src.marker.Skill, src.marker.DispatchDir
	}
	files, meta, err := portable.Collect(portable.Source{Session: session, Skill: skill, Project: project, WorkTree: o.WorkTree,
		ScratchDir: src.scratch, DispatchDir: src.dispatchDir, LiveDir: live, TmpDir: tmpDir(), Marker: src.marker != nil},
		func(w string) { o.warnf("%s", w) })
	if err != nil {
		return err
	}
	saved, err := s.SaveRun(c.Context, session, files, "run "+session)
	if err != nil {
		return portableErr(err)
	}
	refs, err := s.WriteBundle(c.Context, out, []string{session})
	if err != nil {
		return portableErr(err)
	}
	checkpoints := len(refs) - 1
	abs, _ := filepath.Abs(out)
	if o.JSON {
		return writeJSON(o, map[string]any{"bundle": abs, "session": session, "skill": nullIfEmpty(skill), "project_id": nullIfEmpty(project),
			"run_id": saved.ID, "run_updated": saved.Updated, "files_count": len(meta.Files), "checkpoints_count": checkpoints, "refs": bundleRefsJSON(refs)})
	}
	fmt.Fprintf(o.Stdout, "Exported run %s (%s, run %s) and %s to %s.\n", session, plural(len(meta.Files), "file", "files"), short8(saved.ID), plural(checkpoints, "checkpoint", "checkpoints"), out)
	if project == "" {
		o.warnf("%s has no commit: the run records no project id", o.WorkTree)
	}
	o.hintf("on the other machine, in the project's clone: rewind import %s", shellArg(filepath.Base(out)))
	return nil
}

func bundleRefsJSON(refs []checkpoint.BundleRef) []map[string]string {
	out := make([]map[string]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, map[string]string{"name": r.Name, "id": r.ID})
	}
	return out
}

// importedRun is one run an import wrote, for the output.
type importedRun struct {
	plan   *portable.ImportPlan
	update string // what happened to the run's ref
}

// runSource is where an import reads runs: a verified bundle, or the store.
type runSource interface {
	RunFiles(ctx context.Context, commit string) ([]checkpoint.RunFile, error)
	RunHistory(ctx context.Context, commit string, max int) ([]string, error)
}

func importRun(c *cli.Context) error {
	o := opts(c)
	session := c.String("session")
	var bundlePath string
	switch {
	case session != "" && c.NArg() > 0:
		return usageErrorf("import takes a BUNDLE or --session ID, not both")
	case session != "":
		if err := checkpoint.CheckSession(session); err != nil {
			return portableErr(err)
		}
	default:
		var err error
		if bundlePath, err = oneArg(c, "BUNDLE"); err != nil {
			return err
		}
		if err := checkpoint.CheckRemote("bundle path", bundlePath); err != nil {
			return portableErr(err)
		}
	}
	scratch, err := scratchDir(c)
	if err != nil {
		return err
	}
	target := portable.Target{WorkTree: o.WorkTree, ScratchDir: scratch, TmpDir: tmpDir()}

	// Everything is read and checked before anything is written: the bundle
	// (verified, read whole into a throwaway repository), its runs' files,
	// the project, the files in the way.
	var src runSource
	var runs map[string]string
	var bundle *checkpoint.Bundle
	var s *checkpoint.Store
	if bundlePath != "" {
		if bundle, err = checkpoint.OpenBundle(c.Context, bundlePath); err != nil {
			return portableErr(err)
		}
		defer bundle.Close()
		src, runs = bundle, bundle.Runs()
		if len(runs) == 0 {
			return withHint(exitErrorf(exitFailure, "the bundle %s holds no run (no %s* ref)", bundlePath, checkpoint.RunPrefix),
				"make one with rewind export PATH -o FILE")
		}
	} else {
		if s, err = openStore(c); err != nil {
			return err
		}
		have, err := s.Runs(c.Context)
		if err != nil {
			return err
		}
		if have[session] == "" {
			return withHint(exitErrorf(exitFailure, "the store %s holds no run %s", s.Dir, session),
				"bring it with rewind checkpoint pull REMOTE, or import its bundle")
		}
		src, runs = s, map[string]string{session: have[session]}
	}
	here, _, err := checkpoint.ProjectID(c.Context, o.WorkTree)
	if err != nil && !errors.Is(err, checkpoint.ErrNoProjectID) {
		return err
	}
	sessions := make([]string, 0, len(runs))
	for id := range runs {
		sessions = append(sessions, id)
	}
	sort.Strings(sessions)
	var imported []*importedRun
	var conflicts []string
	for _, id := range sessions {
		plan, err := planRun(c, src, id, runs[id], target, here)
		if errors.Is(err, errProjectMismatch) {
			return named("project_mismatch", err)
		}
		if err != nil {
			return err
		}
		for _, cf := range plan.Conflicts {
			conflicts = append(conflicts, cf.Path)
		}
		imported = append(imported, &importedRun{plan: plan, update: "up to date"})
	}
	if len(conflicts) > 0 {
		err := exitErrorf(exitGuard, "%s in the way, with other content than the run's (nothing was imported): %s",
			plural(len(conflicts), "file is", "files are"), strings.Join(conflicts, ", "))
		return named("import_conflict", withHint(err, "import it into another scratch directory: rewind import BUNDLE --scratch DIR",
			"or move those files away first, if they are an older copy of the run"))
	}

	var accepted *checkpoint.Accepted
	if bundle != nil {
		keep, err := keepFromEnv()
		if err != nil {
			return err
		}
		if s, err = openStore(c); err != nil {
			return err
		}
		in, err := s.FetchBundle(c.Context, bundle.Path)
		if err != nil {
			return portableErr(err)
		}
		defer s.Drop(c.Context, in)
		if accepted, err = s.Accept(c.Context, in, true, keep); err != nil {
			return err
		}
		if cf := accepted.Conflicts(); len(cf) > 0 {
			var names []string
			for _, u := range cf {
				names = append(names, fmt.Sprintf("run %s (the store's %s, the bundle's %s)", u.Session, short8(u.Old), short8(u.New)))
			}
			err := exitErrorf(exitGuard, "the store's run diverged from the bundle's, so nothing was imported: %s", strings.Join(names, ", "))
			return named("run_conflict", withHint(err, "each machine continued the run on its own; import it into another work tree's store, or export this one instead"))
		}
		for _, u := range accepted.Runs {
			for i, id := range sessions {
				if id == u.Session {
					imported[i].update = u.Result
				}
			}
		}
	}
	for _, r := range imported {
		if _, err := r.plan.Apply(); err != nil {
			return err
		}
	}
	return printImport(o, s, bundlePath, imported, accepted)
}

// errProjectMismatch is a run imported into another project than its own.
var errProjectMismatch = errors.New("a run of another project")

// planRun reads run id's files and plans writing them under target: the
// project must be the run's (its checkpoints restored into another project
// would replace that project's files with the run's), and files an earlier
// export of the run left here untouched are replaced, as a fast-forward.
func planRun(c *cli.Context, src runSource, id, commit string, target portable.Target, here string) (*portable.ImportPlan, error) {
	files, err := src.RunFiles(c.Context, commit)
	if err != nil {
		return nil, err
	}
	plan, err := portable.PlanImport(files, target)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	if plan.Meta.Project != "" && plan.Meta.Project != here {
		what := "has no commit"
		if here != "" {
			what = "is project " + shortProject(here)
		}
		err := withCode(exitGuard, fmt.Errorf("%w: run %s is of project %s (%s), and %s %s (nothing was imported)",
			errProjectMismatch, id, shortProject(plan.Meta.Project), plan.Meta.WorkTree, target.WorkTree, what))
		return nil, withHint(err, "import it in a clone of the run's project: rewind import BUNDLE --work-tree CLONE")
	}
	if len(plan.Conflicts) == 0 {
		return plan, nil
	}
	earlier, err := src.RunHistory(c.Context, commit, 50)
	if err != nil {
		return nil, err
	}
	for _, e := range earlier {
		files, err := src.RunFiles(c.Context, e)
		if err != nil {
			return nil, err
		}
		if plan.Supersede(files) == 0 {
			break
		}
	}
	return plan, nil
}

func printImport(o *options, s *checkpoint.Store, bundle string, imported []*importedRun, accepted *checkpoint.Accepted) error {
	added, known, tooOld := 0, 0, 0
	var skipped []string
	if accepted != nil {
		added, known, tooOld, skipped = len(accepted.Added), accepted.Known, accepted.TooOld, accepted.Skipped
	}
	if o.JSON {
		runs := []map[string]any{}
		for _, r := range imported {
			written, same := countWrites(r.plan)
			runs = append(runs, map[string]any{"session": r.plan.Meta.Session, "skill": nullIfEmpty(r.plan.Meta.Skill),
				"ref_update": r.update, "scratch_dir": r.plan.ScratchDir, "dispatch_dir": r.plan.DispatchDir,
				"written_count": written, "unchanged_count": same, "rebased_paths": nonNil(r.plan.Rebased), "updated_paths": nonNil(r.plan.Superseded), "from_work_tree": r.plan.Meta.WorkTree})
		}
		var b any
		if bundle != "" {
			abs, _ := filepath.Abs(bundle)
			b = abs
		}
		return writeJSON(o, map[string]any{"bundle": b, "work_tree": o.WorkTree, "store": s.Dir, "runs": runs,
			"checkpoints_added_count": added, "checkpoints_known_count": known, "checkpoints_too_old_count": tooOld, "skipped_commit_ids": nonNil(skipped)})
	}
	for _, r := range imported {
		written, same := countWrites(r.plan)
		skill := ""
		if r.plan.Meta.Skill != "" {
			skill = " (" + r.plan.Meta.Skill + ")"
		}
		fmt.Fprintf(o.Stdout, "Imported run %s%s from %s: %s written, %d already in place.\n", r.plan.Meta.Session, skill, r.plan.Meta.WorkTree, plural(written, "file", "files"), same)
		fmt.Fprintf(o.Stdout, "  scratch:  %s\n  dispatch: %s\n", r.plan.ScratchDir, r.plan.DispatchDir)
		for _, p := range r.plan.Superseded {
			o.notef("note: updated %s, which an earlier export of the run wrote", p)
		}
		for _, p := range r.plan.Rebased {
			o.notef("note: rebased the paths %s records", p)
		}
	}
	if bundle != "" {
		fmt.Fprintf(o.Stdout, "Checkpoints: %d added, %d already in the store.\n", added, known)
	}
	for _, id := range skipped {
		o.warnf("left out commit %s of the bundle: not a checkpoint", short8(id))
	}
	if accepted != nil && accepted.TooOld > 0 {
		o.notef("note: left out %s older than the newest %d the store keeps (REWIND_KEEP)", plural(accepted.TooOld, "checkpoint", "checkpoints"), mustKeep())
	}
	for _, r := range imported {
		if r.plan.Meta.ScratchDir == "" {
			o.hintf("resume it: rewind replay %s", shellArg(r.plan.DispatchDir))
		} else {
			o.hintf("resume it: rewind replay %s", shellArg(r.plan.ScratchDir))
		}
	}
	return nil
}

func countWrites(p *portable.ImportPlan) (written, same int) {
	for _, w := range p.Writes {
		if w.Same {
			same++
		} else {
			written++
		}
	}
	return written, same
}

// shareSetup reads REMOTE and the project's id, and opens the store.
func shareSetup(c *cli.Context) (remote, project string, s *checkpoint.Store, err error) {
	o := opts(c)
	remote, err = oneArg(c, "REMOTE (a git URL or path)")
	if err != nil {
		return "", "", nil, err
	}
	if err := checkpoint.CheckRemote("remote", remote); err != nil {
		return "", "", nil, portableErr(err)
	}
	// git runs in the work tree: a local path is made absolute first, so it
	// means what it meant where rewind was run.
	if _, serr := os.Stat(remote); serr == nil {
		if abs, aerr := filepath.Abs(remote); aerr == nil {
			remote = abs
		}
	}
	project, roots, err := checkpoint.ProjectID(c.Context, o.WorkTree)
	if err != nil {
		return "", "", nil, portableErr(err)
	}
	if roots > 1 {
		o.notef("note: the project's history has %d root commits; it is named by its main line's, %s (the same in every clone)", roots, shortProject(project))
	}
	s, err = openStore(c)
	return remote, project, s, err
}

func checkpointPush(c *cli.Context) error {
	o := opts(c)
	remote, project, s, err := shareSetup(c)
	if err != nil {
		return err
	}
	pushed, err := s.Push(c.Context, remote, project)
	if err != nil {
		return portableErr(err)
	}
	var conflicts, rejected []string
	refs := make([]map[string]any, 0, len(pushed))
	for _, r := range pushed {
		refs = append(refs, map[string]any{"kind": r.Kind, "name": r.Name, "ref": r.Ref, "commit_id": r.Local, "result": r.Result, "why": nullIfEmpty(r.Why)})
		switch r.Result {
		case "conflict":
			conflicts = append(conflicts, r.Kind+" "+r.Name)
		case "rejected":
			rejected = append(rejected, fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, r.Why))
		}
	}
	// The document (or the summary line) reports every ref, conflicts
	// included; a conflict or a refusal then ends the command non-zero.
	if o.JSON {
		if err := writeJSON(o, map[string]any{"remote": remote, "project_id": project, "refs": refs}); err != nil {
			return err
		}
	} else {
		printShare(o, "Pushed to", remote, project, pushed)
	}
	if len(rejected) > 0 {
		return exitErrorf(exitFailure, "the remote refused %s", strings.Join(rejected, ", "))
	}
	if len(conflicts) > 0 {
		err := exitErrorf(exitGuard, "%s diverged on the remote and %s left as it is: %s", plural(len(conflicts), "ref", "refs"), isAre(len(conflicts), "was", "were"), strings.Join(conflicts, ", "))
		return withHint(err, "the remote holds work on it that this store lacks (another machine went on with the run); everything else was pushed",
			"see both sides: rewind checkpoint pull "+shellArg(remote)+" reports the runs that diverged and takes the rest")
	}
	return nil
}

func isAre(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func printShare(o *options, verb, remote, project string, refs []checkpoint.PushedRef) {
	counts := map[string]int{}
	for _, r := range refs {
		counts[r.Kind+" "+r.Result]++
	}
	var parts []string
	for _, kind := range []string{"checkpoint", "run"} {
		for _, res := range []string{"new", "fast-forward", "up to date", "conflict", "rejected"} {
			if n := counts[kind+" "+res]; n > 0 {
				many := kind + "s"
				parts = append(parts, fmt.Sprintf("%s %s", plural(n, kind, many), res))
			}
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing to share")
	}
	fmt.Fprintf(o.Stdout, "%s %s (project %s): %s.\n", verb, remote, shortProject(project), strings.Join(parts, ", "))
}

func checkpointPull(c *cli.Context) error {
	o := opts(c)
	remote, project, s, err := shareSetup(c)
	if err != nil {
		return err
	}
	keep, err := keepFromEnv()
	if err != nil {
		return err
	}
	in, err := s.FetchRemote(c.Context, remote, project)
	if err != nil {
		return portableErr(err)
	}
	acc, err := s.Accept(c.Context, in, false, keep)
	if err != nil {
		return err
	}
	runs := make([]map[string]any, 0, len(acc.Runs))
	var conflicts []string
	for _, u := range acc.Runs {
		runs = append(runs, map[string]any{"session": u.Session, "local_id": nullIfEmpty(u.Old), "remote_id": u.New, "result": u.Result})
		if u.Result == "conflict" {
			conflicts = append(conflicts, fmt.Sprintf("run %s (the store's %s, the remote's %s)", u.Session, short8(u.Old), short8(u.New)))
		}
	}
	added := make([]checkpointJSON, 0, len(acc.Added))
	for _, cp := range acc.Added {
		added = append(added, toJSON(cp))
	}
	if o.JSON {
		doc := map[string]any{"remote": remote, "project_id": project, "checkpoints_added": added, "checkpoints_known_count": acc.Known,
			"checkpoints_too_old_count": acc.TooOld, "runs": runs, "skipped_commit_ids": nonNil(acc.Skipped)}
		if err := writeJSON(o, doc); err != nil {
			return err
		}
	} else {
		printPull(o, remote, project, acc)
	}
	if len(conflicts) > 0 {
		err := exitErrorf(exitGuard, "%s diverged from the store's and %s left as it is: %s", plural(len(conflicts), "run", "runs"), isAre(len(conflicts), "was", "were"), strings.Join(conflicts, ", "))
		return withHint(err, "two machines went on with the same run apart; the store keeps its own and took everything else",
			"to work on the remote's instead, pull it into another clone of the project")
	}
	return nil
}

func printPull(o *options, remote, project string, acc *checkpoint.Accepted) {
	var parts []string
	parts = append(parts, fmt.Sprintf("%s added, %d already here", plural(len(acc.Added), "checkpoint", "checkpoints"), acc.Known))
	for _, u := range acc.Runs {
		parts = append(parts, fmt.Sprintf("run %s %s", u.Session, u.Result))
	}
	fmt.Fprintf(o.Stdout, "Pulled from %s (project %s): %s.\n", remote, shortProject(project), strings.Join(parts, ", "))
	for _, cp := range acc.Added {
		fmt.Fprintf(o.Stdout, "  %s %s (%s)\n", cp.Short(), cp.Reason, cp.Time.Format("2006-01-02T15:04:05Z07:00"))
	}
	for _, id := range acc.Skipped {
		o.warnf("left out commit %s of the remote: not a checkpoint", short8(id))
	}
	if acc.TooOld > 0 {
		o.notef("note: left out %s older than the newest %d the store keeps (REWIND_KEEP)", plural(acc.TooOld, "checkpoint", "checkpoints"), mustKeep())
	}
	for _, u := range acc.Runs {
		if u.Result == "new" || u.Result == "fast-forward" {
			o.hintf("write run %s out here: rewind import --session %s", u.Session, u.Session)
		}
	}
}

// withSubcommands adds subcommands to a command group (checkpoint push and
// pull join the checkpoint group from this file).
func withSubcommands(cmd *cli.Command, more ...*cli.Command) *cli.Command {
	cmd.Subcommands = append(cmd.Subcommands, more...)
	return cmd
}

// mustKeep is REWIND_KEEP as keepFromEnv read it already (without error).
func mustKeep() int {
	keep, _ := keepFromEnv()
	return keep
}

// shortProject is a project id as output shows it: its root commit's short
// id, and the hash of its directory in the repository when it has one.
func shortProject(id string) string {
	root, dir, ok := strings.Cut(id, "-")
	if !ok {
		return short8(id)
	}
	return short8(root) + "-" + dir
}
