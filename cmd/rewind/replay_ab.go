package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/replay"
)

// A/B replay: `rewind replay PATH --mutate ORIG=REPL ...` runs the replayed
// dispatches in isolated arms (clones of the project), a control and the
// mutation, and `rewind replay diff` compares them.

// maxRepeat bounds --repeat: each run of each arm is a clone of the project, so
// a typo (--repeat 100000) would start preparing hundreds of thousands of them.
const maxRepeat = 100

func abFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "mutate", Usage: "A/B replay (`ORIG=REPL`, repeatable): the dispatches written from template file ORIG get REPL's text, with the original's placeholder fillings and added sections; a control arm and the mutated arm run in clones of the project"},
		&cli.StringFlag{Name: "template-ref", Usage: "A/B replay: read the templates at `REF` of the git repository holding --templates DIR"},
		&cli.IntFlag{Name: "repeat", Value: 1, Usage: "A/B replay: run each arm `N` times"},
		&cli.BoolFlag{Name: "no-control", Usage: "A/B replay: run only the mutated arm (compared with the original run)"},
		&cli.StringFlag{Name: "arms-dir", Usage: "A/B replay: keep the arms (clones and dispatch directories) in `DIR` (default: removed at the end)", TakesFile: true},
		&cli.BoolFlag{Name: "diff", Usage: "A/B replay: write the diff report when the runs end (and append it to replay-diff.jsonl)"},
	}
}

// abRequested reports whether the replay is an A/B one.
func abRequested(c *cli.Context) bool { return len(c.StringSlice("mutate")) > 0 }

// abCheckFlags refuses, before anything is read or written, A/B flags without
// --mutate, bad numbers, and a --mutate whose REPL cannot be read.
func abCheckFlags(c *cli.Context) ([]replay.MutationSpec, error) {
	if !abRequested(c) {
		for _, f := range []string{"template-ref", "repeat", "no-control", "arms-dir", "diff"} {
			if c.IsSet(f) {
				return nil, withHint(usageErrorf("--%s is for an A/B replay, which needs --mutate ORIG=REPL", f),
					"rewind replay PATH --mutate build-reviewer-prompt.md=new-reviewer.md --"+f+" ...")
			}
		}
		return nil, nil
	}
	if n := c.Int("repeat"); n < 1 || n > maxRepeat {
		return nil, usageErrorf("invalid --repeat %d: want 1 to %d runs per arm (each run is a clone of the project)", n, maxRepeat)
	}
	for _, f := range []string{"no-restore", "keep-head", "takeover"} {
		if c.Bool(f) {
			return nil, usageErrorf("--%s does not apply to an A/B replay: its arms start from the resume checkpoint in clones of the project, never in the work tree", f)
		}
	}
	var muts []replay.MutationSpec
	for _, s := range c.StringSlice("mutate") {
		m, err := replay.ParseMutation(s)
		if err != nil {
			return nil, named("mutation_invalid", withHint(withCode(exitUsage, err), "--mutate ORIG=REPL: ORIG is a template file name (build-reviewer-prompt.md), REPL a readable file"))
		}
		muts = append(muts, m)
	}
	return muts, nil
}

// abInput is what replayRun hands over once the plan is made.
type abInput struct {
	src       *replaySource
	plan      *replay.Plan
	report    replay.Report
	store     *checkpoint.Store
	muts      []replay.MutationSpec
	path      string
	skill     string
	firstTime time.Time
}

// abRun runs the A/B replay. Its errors carry their codes (named); run prints
// the error document under --json, unless the replay printed its own (a run
// that failed: the document says which).
func abRun(c *cli.Context, in abInput) error {
	o := opts(c)
	plan := in.plan
	if plan.Restore == nil {
		return named("ab_no_checkpoint", withHint(exitErrorf(exitFailure, "an A/B replay starts its arms from a checkpoint, and this plan restores none"),
			"pick the range to replay with --from-phase P or --from-seq N"))
	}
	if len(plan.Redo) == 0 {
		return named("nothing_to_replay", withHint(exitErrorf(exitFailure, "nothing to replay: every dispatch completed and was verified"),
			"pick the range to replay with --from-phase P or --from-seq N"))
	}
	tmpl := &replay.Templates{Dir: c.String("templates"), Skill: in.skill}
	if ref := c.String("template-ref"); c.IsSet("template-ref") {
		if err := tmpl.Pin(c.Context, ref); err != nil {
			return named("template_ref_invalid", withHint(withCode(exitUsage, err), "name a commit, branch or tag of the templates' repository: git -C "+shellArg(orDot(tmpl.Dir))+" log --oneline"))
		}
	}
	mp, err := replay.PlanMutations(c.Context, plan.Redo, in.src.lookup, tmpl, in.muts, in.firstTime)
	if errors.Is(err, replay.ErrMutation) {
		return named("mutation_invalid", withHint(withCode(exitUsage, err), "ORIG is the template file a dispatch was written from: <template>.md or <template>-prompt.md of its <seq>-<template>.md"))
	}
	if err != nil {
		return err
	}
	for _, w := range mp.Warnings {
		o.warnf("%s", w)
	}
	repeat, control := c.Int("repeat"), !c.Bool("no-control")
	arms := []string{replay.ArmMutated}
	if control {
		arms = []string{replay.ArmControl, replay.ArmMutated}
	}

	if c.Bool("dry-run") {
		if o.JSON {
			run := newReplayOutcome("dry_run")
			run.result = "planned"
			doc := replayDoc(in.report, run)
			doc["ab"] = abPlanJSON(mp, tmpl, arms, repeat)
			return writeJSON(o, doc)
		}
		// The arms start from the checkpoint; the work tree is not restored.
		text := replay.RenderDryRun(in.report)
		text = strings.Replace(text, "## Checkpoint to restore\n", "## Checkpoint the arms start from\n", 1)
		text = strings.Replace(text, "\nWould write (0):\nWould remove (0):\n", "The work tree is not restored: each arm is a clone of the project at the commit the checkpoint recorded, with the checkpoint's files on top.\n", 1)
		fmt.Fprint(o.Stdout, text)
		fmt.Fprint(o.Stdout, renderABPlan(mp, tmpl, arms, repeat))
		return nil
	}

	base := c.String("session")
	if base == "" {
		base = fmt.Sprintf("ab-%d-%d", o.Now().Unix(), os.Getpid())
	}
	var runs []*replay.ABRun
	var sessions []string
	for n := 1; n <= repeat; n++ {
		for _, arm := range arms {
			s := replay.RunSession(base, arm, n)
			runs = append(runs, &replay.ABRun{Arm: arm, Repeat: n, Session: s})
			sessions = append(sessions, s)
		}
	}
	delegate := c.String("exec") == ""
	armsDir, keep := c.String("arms-dir"), c.IsSet("arms-dir") || delegate
	if armsDir == "" {
		armsDir = filepath.Join(tmpDir(), "rewind-ab-"+base)
	}
	if abs, err := filepath.Abs(armsDir); err == nil {
		armsDir = abs
	}
	if err := replay.CheckArmsDir(armsDir, o.WorkTree, sessions); err != nil {
		return named("arms_dir_invalid", withHint(withCode(exitUsage, err), "pass --arms-dir DIR outside the work tree"))
	}
	if _, err := os.Stat(in.src.dispatchDir); err != nil {
		return err
	}
	rd := replay.Redispatcher{DispatchDir: in.src.dispatchDir, Lookup: in.src.lookup, Templates: c.String("templates"),
		AllowUnfaithful: c.Bool("allow-unfaithful"), Skill: in.report.Skill, Session: base, Now: o.Now(),
		Warn: func(s string) { o.warnf("%s", s) }, ManifestWarn: o.Stderr}
	if err := rd.Check(plan.Redo); err != nil {
		return withHint(err, "pass --templates DIR holding <template>.md or <template>-prompt.md (a crucible checkout), or --allow-unfaithful to re-dispatch from the manifest's record alone")
	}
	setup := &replay.ABSetup{Store: in.store, Restore: plan.Restore, WorkTree: o.WorkTree, ArmsDir: armsDir,
		DispatchDir: in.src.dispatchDir, Manifest: in.src.manifest, Lookup: in.src.lookup, Keep: plan.Skip, Redo: plan.Redo,
		Mutations: mp, Skill: in.report.Skill, Now: o.Now(), Redispatch: rd, ManifestOut: o.Stderr}
	removeArms := func() {
		if keep {
			return
		}
		if err := os.RemoveAll(armsDir); err != nil {
			o.warnf("could not remove the arms in %s: %v", armsDir, err)
			return
		}
		o.notef("removed the arms in %s (pass --arms-dir DIR to keep them)", armsDir)
	}
	var originalCP string
	if !control && c.String("exec") != "" {
		// Without a control, the artifact diff compares the mutated trees
		// with the work tree as the original run left it.
		made, err := in.store.Create(c.Context, checkpoint.CreateOptions{Reason: replay.ArmCheckpointReason(base + "-original"), Source: "replay"})
		if err != nil {
			return err
		}
		originalCP = made.Checkpoint.ID
	}
	for _, run := range runs {
		if err := setup.PrepareRun(c.Context, run); err != nil {
			why := "was not run: preparing the arms failed"
			if c.Context.Err() != nil {
				why = "was interrupted"
			}
			for _, prepared := range runs {
				if aerr := setup.Abandon(prepared, why); aerr != nil {
					err = errors.Join(err, aerr)
				}
			}
			removeArms()
			return err
		}
		o.notef("arm %s: work tree %s, dispatch directory %s", run.Session, run.WorkTree, run.DispatchDir)
	}

	if delegate {
		if o.JSON {
			return writeJSON(o, abResultJSON(in, abPlanJSON(mp, tmpl, arms, repeat), true, base, runs, armsDir, nil, nil))
		}
		printABDelegate(o, in, base, runs)
		return nil
	}

	var mu sync.Mutex
	record := func(run *replay.ABRun, j replay.Job, status, summary string) {
		mu.Lock()
		defer mu.Unlock()
		o.notef("%s: seq %d (%s, replays %d): %s", run.Session, j.Seq, orDash(j.From.Role), j.ReplayOf, status)
	}
	sem := make(chan struct{}, max(1, c.Int("jobs")))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := setup.Execute(c.Context, run, c.String("exec"), o.Now, record); err != nil {
				errs[i] = err
				return
			}
			errs[i] = setup.Finish(c.Context, run)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			removeArms()
			return err
		}
	}
	var failed []string
	for _, run := range runs {
		state := "completed"
		if run.Failed {
			state = "failed"
			failed = append(failed, run.Session)
		}
		o.notef("run %s %s: %s completed; its tree is checkpoint %s (%s)", run.Session, state,
			plural(run.Completed, "dispatch", "dispatches"), short8(run.Checkpoint), replay.ArmCheckpointReason(run.Session))
	}

	var diffs []abDiff
	if c.Bool("diff") {
		d, err := writeABDiff(c, in.src, in.report.Session, base, originalCP)
		if err != nil {
			removeArms()
			return err
		}
		diffs = append(diffs, d)
	}
	removeArms()
	if o.JSON {
		kept := "" // the arms were removed
		if keep {
			kept = armsDir
		}
		if err := writeJSON(o, abResultJSON(in, abPlanJSON(mp, tmpl, arms, repeat), false, base, runs, kept, diffs, failed)); err != nil {
			return err
		}
	} else {
		for _, d := range diffs {
			fmt.Fprint(o.Stdout, d.report)
		}
	}
	if len(diffs) == 0 {
		o.hintf("compare the arms: rewind replay diff %s --session %s", shellArg(in.path), base)
	}
	if len(failed) > 0 {
		// Under --json the document above says it already (result
		// "stopped", failed_runs): run prints no error document after one.
		return exitErrorf(exitFailure, "%s failed: %s (recorded in the manifest; the other runs went on)",
			plural(len(failed), "run", "runs"), strings.Join(failed, ", "))
	}
	return nil
}

func orDot(s string) string {
	if s == "" {
		return "."
	}
	return s
}

// renderABPlan is the dry run's A/B part: the seed's ## Template Mutations,
// and for each mutated dispatch the path taken and the placeholders.
func renderABPlan(mp *replay.MutationPlan, tmpl *replay.Templates, arms []string, repeat int) string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("")
	line("## Template Mutations")
	for _, m := range mp.Mutations {
		line("- %s", m.Label())
	}
	if ref := tmpl.Pinned(); ref != "" {
		line("")
		line("Templates pinned at %s.", ref)
	}
	line("")
	line("## Mutated Dispatches")
	line("| Seq | Template | Mutation | Path | Placeholders recovered | New in REPL | Added sections |")
	line("|-----|----------|----------|------|------------------------|-------------|----------------|")
	for _, seq := range mp.Order {
		md := mp.Dispatches[seq]
		path := md.Path
		if md.Path == replay.PathAligned || md.Path == replay.PathFallback {
			path = fmt.Sprintf("%s (%.0f%% of the template matched)", md.Path, 100*md.Ratio)
		}
		line("| %d | %s | %s | %s | %s | %s | %d |", seq, md.Template, md.Mutation, path,
			listCell(md.Recovered), listCell(md.Unfilled), md.Added)
	}
	line("")
	line("## Arms")
	line("%s, %s each, in clones of the project at the restored checkpoint; the work tree is never touched.",
		strings.Join(arms, " and "), plural(repeat, "run", "runs"))
	return b.String()
}

func listCell(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.ReplaceAll(strings.Join(l, ", "), "|", `\|`)
}

// abPlanJSON is the "ab" member of every A/B document: the mutations, how
// each mutated dispatch is written, and the arms.
func abPlanJSON(mp *replay.MutationPlan, tmpl *replay.Templates, arms []string, repeat int) map[string]any {
	muts := []any{}
	for _, m := range mp.Mutations {
		muts = append(muts, m.Label())
	}
	ds := []any{}
	for _, seq := range mp.Order {
		md := mp.Dispatches[seq]
		var ratio any
		if md.Path == replay.PathAligned || md.Path == replay.PathFallback {
			ratio = float64(int(md.Ratio*1000)) / 1000
		}
		ds = append(ds, map[string]any{"seq": seq, "template": nullIfEmpty(md.Template), "mutation": md.Mutation, "written_as": md.Path,
			"alignment": ratio, "placeholders_recovered": nonNil(md.Recovered), "placeholders_new": nonNil(md.Unfilled),
			"added_sections_count": md.Added})
	}
	return map[string]any{"mutations": muts, "template_commit_id": nullIfEmpty(tmpl.Pinned()), "dispatches": ds,
		"arms": arms, "repeat_count": repeat, "warnings": nonNil(mp.Warnings)}
}

func printABDelegate(o *options, in abInput, base string, runs []*replay.ABRun) {
	fmt.Fprintf(o.Stdout, "# A/B replay %s: dispatch plan\n\n", base)
	fmt.Fprintf(o.Stdout, "Each run's dispatch files and `dispatched` entries are written. Dispatch each run's seqs in its work tree (REWIND_WORK_TREE=<work tree>), in order.\n")
	for _, run := range runs {
		fmt.Fprintf(o.Stdout, "\n## %s (%s, run %d)\n", run.Session, run.Arm, run.Repeat)
		fmt.Fprintf(o.Stdout, "Work tree: %s\nDispatch directory: %s\n", run.WorkTree, run.DispatchDir)
		fmt.Fprintf(o.Stdout, "| Seq | Replays | Role | Phase | Dispatch file |\n|-----|---------|------|-------|---------------|\n")
		for _, j := range run.Jobs {
			fmt.Fprintf(o.Stdout, "| %d | %d | %s | %s | %s |\n", j.Seq, j.ReplayOf, orDash(j.From.Role), orDash(j.From.Phase), filepath.Base(j.DispatchFile))
		}
	}
	fmt.Fprintf(o.Stdout, "\nRecord each completion with: rewind dispatch after --dir %s --seq N --status completed --summary TEXT\n", in.src.dispatchDir)
	fmt.Fprintf(o.Stdout, "Then compare the arms: rewind replay diff %s --session %s\n", in.path, base)
}

// abResultJSON is the document of an A/B replay that ran (exec) or prepared
// its arms (delegate): its runs, and the diff report when --diff asked for it.
// armsDir is "" when the arms were removed.
func abResultJSON(in abInput, ab map[string]any, delegate bool, base string, runs []*replay.ABRun, armsDir string, diffs []abDiff, failed []string) map[string]any {
	mode, result := "exec", "completed"
	switch {
	case delegate:
		mode, result = "delegate", "delegated"
	case len(failed) > 0:
		result = "stopped"
	}
	rs := []any{}
	for _, r := range runs {
		var wt, dd any
		if armsDir != "" {
			wt, dd = r.WorkTree, r.DispatchDir
		}
		jobs := []any{}
		for _, j := range r.Jobs {
			// The copy in the pipeline's dispatch directory: the arm's own
			// may be removed with the arms.
			jobs = append(jobs, map[string]any{"seq": j.Seq, "replay_of": j.ReplayOf, "role": nullIfEmpty(j.From.Role),
				"phase": nullIfEmpty(j.From.Phase), "task": j.From.Task, "dispatch_file": filepath.Join(in.src.dispatchDir, filepath.Base(j.DispatchFile))})
		}
		status, completed := "prepared", any(nil)
		switch {
		case r.Failed:
			status, completed = "failed", r.Completed
		case r.Checkpoint != "":
			status, completed = "completed", r.Completed
		}
		rs = append(rs, map[string]any{"session": r.Session, "arm": r.Arm, "repeat": r.Repeat, "status": status,
			"completed_count": completed, "work_tree": wt, "dispatch_dir": dd, "checkpoint_id": nullIfEmpty(r.Checkpoint),
			"dispatches": jobs})
	}
	var diff any
	if len(diffs) > 0 {
		diff = diffs[0].json()
	}
	return map[string]any{"mode": mode, "result": result, "manifest": in.report.Source, "dispatch_dir": in.src.dispatchDir,
		"session": nullIfEmpty(in.report.Session), "replay_session": base, "ab": ab, "runs": rs,
		"arms_dir": nullIfEmpty(armsDir), "failed_runs": nonNil(failed), "diff": diff}
}

// abDiff is one experiment's diff report.
type abDiff struct {
	base    string
	report  string
	records []replay.DiffRecord
	ex      *replay.Experiment
}

// json is the experiment in replay diff's document (and replay --diff's
// "diff"): the original and each run, the arms' spread of each metric, the
// records appended to replay-diff.jsonl, and the markdown report.
func (d abDiff) json() map[string]any {
	recs := make([]any, 0, len(d.records))
	for _, r := range d.records {
		recs = append(recs, r.Object())
	}
	runs := []any{}
	for _, r := range d.ex.Runs {
		runs = append(runs, runStatsJSON(r))
	}
	comparison := map[string]any{}
	for key, metric := range map[string]string{"dispatches_count": "dispatches", "gate_rounds_count": "gate_rounds", "wall_clock_s": "wall_clock_s"} {
		entry := map[string]any{}
		for _, arm := range []string{replay.ArmControl, replay.ArmMutated} {
			if s := d.ex.ArmSpread(arm, metric); s != nil {
				entry[arm] = map[string]any{"mean": s.Mean, "min": s.Min, "max": s.Max, "runs_count": s.N}
			} else {
				entry[arm] = nil
			}
		}
		c, mu := d.ex.ArmSpread(replay.ArmControl, metric), d.ex.ArmSpread(replay.ArmMutated, metric)
		if c != nil && mu != nil {
			entry["overlap"] = replay.Overlap(c, mu)
		} else {
			entry["overlap"] = nil
		}
		comparison[key] = entry
	}
	return map[string]any{"replay_session": d.base, "session": nullIfEmpty(d.ex.Original), "mutations": nonNil(d.ex.Mutations),
		"original": runStatsJSON(d.ex.Orig), "runs": runs, "comparison": comparison, "records": recs, "report": d.report}
}

// runStatsJSON is one run's metrics; the original run has no arm, repeat or
// checkpoint, and a run without dispatch times no wall clock.
func runStatsJSON(r replay.RunStats) map[string]any {
	var wall any
	if r.Wall != nil {
		wall = int(r.Wall.Seconds())
	}
	return map[string]any{"session": nullIfEmpty(r.Session), "arm": nullIfEmpty(r.Arm), "repeat": nullIfZero(r.Repeat),
		"dispatches_count": r.Dispatches, "gate_rounds_count": r.GateRounds, "wall_clock_s": wall, "acceptance": r.Acceptance,
		"status": strings.ReplaceAll(r.Status, " ", "_"), "checkpoint_id": nullIfEmpty(r.Checkpoint)}
}

func nullIfZero(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// writeABDiff builds experiment base from the manifest and the arms'
// checkpoints, appends its records to replay-diff.jsonl and returns the
// report. A delegated run whose tree has no checkpoint yet is checkpointed
// now from the work tree the arms file names, when it is still there.
func writeABDiff(c *cli.Context, src *replaySource, original, base, originalCP string) (abDiff, error) {
	o := opts(c)
	ix, err := src.open()
	if err != nil {
		return abDiff{}, err
	}
	defer ix.Close()
	attempts, err := replay.LoadAttempts(ix, src.lookup, time.Local)
	if err != nil {
		return abDiff{}, err
	}
	ex := replay.BuildExperiment(attempts, original, base)
	if len(ex.Runs) == 0 {
		return abDiff{}, named("ab_replay_not_found", withHint(usageErrorf("no A/B replay %s in %s", base, src.manifest), abSessionsHint(attempts)...))
	}
	store, err := openStore(c)
	if err != nil {
		return abDiff{}, err
	}
	cps, err := store.List(c.Context)
	if err != nil {
		return abDiff{}, err
	}
	byReason := map[string]string{}
	for _, cp := range cps {
		byReason[cp.Reason] = cp.ID // newest last
	}
	arms := replay.ReadArmRecords(src.dispatchDir)
	for i := range ex.Runs {
		r := &ex.Runs[i]
		r.Checkpoint = byReason[replay.ArmCheckpointReason(r.Session)]
		if r.Checkpoint != "" {
			continue
		}
		rec, ok := arms[r.Session]
		if !ok || !isDir(rec.WorkTree) {
			o.warnf("run %s has no checkpoint of its tree and its work tree is gone: no artifact diff for it", r.Session)
			continue
		}
		made, err := store.CreateFrom(c.Context, rec.WorkTree, checkpoint.CreateOptions{Reason: replay.ArmCheckpointReason(r.Session), Source: "replay"})
		if err != nil {
			return abDiff{}, err
		}
		r.Checkpoint = made.Checkpoint.ID
		o.notef("checkpoint %s %s: the tree of run %s, from %s", made.Checkpoint.Short(), replay.ArmCheckpointReason(r.Session), r.Session, rec.WorkTree)
	}
	if originalCP == "" {
		originalCP = byReason[replay.ArmCheckpointReason(base+"-original")]
	}
	control := map[int]replay.RunStats{}
	for _, r := range ex.ArmRuns(replay.ArmControl) {
		control[r.Repeat] = r
	}
	var artifacts []replay.ArtifactStat
	byRun := map[string]*replay.ArtifactStat{}
	for _, m := range ex.ArmRuns(replay.ArmMutated) {
		from, fromID := "original", originalCP
		if cr, ok := control[m.Repeat]; ok {
			from, fromID = cr.Session, cr.Checkpoint
		}
		if fromID == "" || m.Checkpoint == "" {
			continue
		}
		st, err := store.NumStat(c.Context, fromID, m.Checkpoint)
		if err != nil {
			return abDiff{}, err
		}
		a := replay.ArtifactStat{From: from, To: m.Session, FromID: fromID, ToID: m.Checkpoint, Files: st.FilesChanged, Ins: st.Insertions, Dels: st.Deletions}
		artifacts = append(artifacts, a)
		byRun[m.Session] = &artifacts[len(artifacts)-1]
	}
	d := abDiff{base: base, ex: ex, report: replay.RenderDiff(ex, artifacts)}
	d.records = replay.DiffRecords(ex, func(m replay.RunStats) *replay.ArtifactStat { return byRun[m.Session] })
	var out []byte
	for _, r := range d.records {
		line, err := r.Line()
		if err != nil {
			return abDiff{}, err
		}
		out = append(append(out, line...), '\n')
	}
	if err := replay.AppendFileSync(filepath.Join(src.dispatchDir, "replay-diff.jsonl"), out); err != nil {
		return abDiff{}, err
	}
	return d, nil
}

func abSessionsHint(attempts []replay.Attempt) []string {
	ex := replay.Experiments(attempts)
	if len(ex) == 0 {
		return []string{"run one first: rewind replay PATH --mutate ORIG=REPL --exec CMD"}
	}
	return []string{"its A/B replays: " + strings.Join(ex, ", ")}
}

func replayDiffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "compare the arms of an A/B replay (from the manifest and the arms' checkpoints)",
		ArgsUsage: "PATH",
		Description: "Writes the diff report of an A/B replay (the newest one, or each --session S) and appends\n" +
			"its records to <dispatch-dir>/replay-diff.jsonl. A delegated run whose tree has no checkpoint\n" +
			"yet is checkpointed from its work tree first.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "session", Usage: "the A/B session `S` (or one of its runs' sessions; repeatable)"},
		},
		Action: replayDiffRun,
	}
}

func replayDiffRun(c *cli.Context) error {
	o := opts(c)
	if c.NArg() != 1 {
		return usageErrorf("replay diff takes one PATH argument (a manifest, a dispatch directory or a scratch directory); got %d", c.NArg())
	}
	path := c.Args().First()
	src, ix, err := openReplaySource(c, path)
	if err != nil {
		return err
	}
	attempts, err := replay.LoadAttempts(ix, src.lookup, time.Local)
	ix.Close()
	if err != nil {
		return err
	}
	all := replay.Experiments(attempts)
	var bases []string
	for _, s := range c.StringSlice("session") {
		b := s
		if base, _, _, ok := replay.SplitRunSession(s); ok {
			b = base
		}
		found := false
		for _, e := range all {
			found = found || e == b
		}
		if !found {
			return named("ab_replay_not_found", withHint(usageErrorf("no A/B replay %s in %s", s, src.manifest), abSessionsHint(attempts)...))
		}
		bases = appendNew(bases, b)
	}
	if len(bases) == 0 {
		if len(all) == 0 {
			return named("ab_replay_not_found", withHint(exitErrorf(exitFailure, "no A/B replay in %s", src.manifest), abSessionsHint(attempts)...))
		}
		bases = []string{all[len(all)-1]}
	}
	var diffs []abDiff
	for _, b := range bases {
		d, err := writeABDiff(c, src, sessionOf(src), b, "")
		if err != nil {
			return err
		}
		diffs = append(diffs, d)
	}
	if o.JSON {
		docs := make([]any, 0, len(diffs))
		for _, d := range diffs {
			docs = append(docs, d.json())
		}
		manifestPath := src.manifest
		if abs, err := filepath.Abs(manifestPath); err == nil {
			manifestPath = abs
		}
		return writeJSON(o, map[string]any{"manifest": manifestPath, "dispatch_dir": src.dispatchDir, "diffs": docs})
	}
	for i, d := range diffs {
		if i > 0 {
			fmt.Fprintln(o.Stdout)
		}
		fmt.Fprint(o.Stdout, d.report)
	}
	return nil
}
