package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/gitexec"
	"github.com/rewind-cli/rewind/manifest"
	"github.com/rewind-cli/rewind/replay"
)

// `rewind replay` resumes an interrupted pipeline from its last verified
// boundary: plan, verify, restore, rebuild the orchestrator's state, re-dispatch.

func replayCommand() *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "resume an interrupted pipeline from its last verified boundary",
		ArgsUsage: "[PATH]",
		Description: "PATH is resolved as `rewind manifest show` resolves it; without PATH (or with . where\n" +
			"no manifest is), this project's run: the scratch directory's .pipeline-active, else its one\n" +
			"durable dispatch copy (several are listed, and one must be named). The plan: the newest boundary\n" +
			"checkpoint taken before the earliest dispatch that is not done or not verified; every\n" +
			"dispatch taken after it is re-executed. Without --exec, the dispatch files and\n" +
			"`dispatched` entries are written and the plan printed for the calling skill to carry\n" +
			"out (recording completions with `rewind dispatch after`); with --exec, CMD runs each\n" +
			"dispatch (sh -c, in the work tree). When the restored checkpoint recorded the project's\n" +
			"HEAD and the branch has moved on from it, the confirmed restore moves the branch back to\n" +
			"that commit (the old HEAD stays in the reflog and ORIG_HEAD); --keep-head leaves it.",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "print the plan and change nothing"},
			&cli.StringFlag{Name: "from-phase", Usage: "resume from the start of phase `P` (overrides the automatic point)"},
			&cli.IntFlag{Name: "from-seq", Usage: "resume from the start of the phase holding seq `N`"},
			&cli.StringFlag{Name: "exec", Usage: "run each re-dispatch with `CMD` (sh -c in the work tree; stdin is empty (/dev/null): the dispatch file is $REWIND_DISPATCH_FILE, and other REWIND_* variables describe it; stdout is the result)"},
			&cli.IntFlag{Name: "jobs", Value: 1, Usage: "run up to `N` dispatches of a wave in parallel (with --exec)"},
			&cli.StringFlag{Name: "templates", Usage: "regenerate lost dispatch files from <template>.md or <template>-prompt.md in `DIR` or its skills/*/ (a crucible checkout)", TakesFile: true},
			&cli.BoolFlag{Name: "allow-unfaithful", Usage: "re-dispatch even when a dispatch file and its template are both lost"},
			&cli.BoolFlag{Name: "no-restore", Usage: "resume on the current disk state, restoring no checkpoint"},
			&cli.BoolFlag{Name: "keep-head", Usage: "restore files only: leave the project's branch where it is, even when it has moved on from the checkpoint's commit"},
			&cli.StringSliceFlag{Name: "role-kind", Usage: "verify ROLE's dispatches as KIND: mutating, output or none (`ROLE=KIND`; repeatable)"},
			&cli.StringFlag{Name: "scratch", EnvVars: []string{"REWIND_SCRATCH"}, Usage: "the pipeline's scratch `DIR` (default: PATH when it is one)", TakesFile: true},
			&cli.StringFlag{Name: "session", EnvVars: []string{"REWIND_SESSION"}, Usage: "the replay session `ID` (default: fresh)"},
			&cli.BoolFlag{Name: "takeover", Usage: "replay even while an earlier replay session still has dispatches in flight (they are replayed as usual)"},
		}, abFlags()...),
		Subcommands: []*cli.Command{replayDiffCommand()},
		Action:      replayRun,
	}
}

// replayPath is the PATH argument, or, without one (or with "." where no
// manifest is, from inside the project), this project's run as pipeline
// status finds it: the scratch directory (--scratch, else crucible's
// ~/.claude/projects/<h>/memory/) when it holds .pipeline-active, else its
// one durable dispatch copy. Several copies are listed, and one must be named
// (exit 2).
func replayPath(c *cli.Context) (string, error) {
	o := opts(c)
	if c.NArg() == 1 {
		path := c.Args().First()
		if path != "." {
			return path, nil
		}
		_, err := manifest.Locate(path)
		wd, _ := os.Getwd()
		if real, rerr := filepath.EvalSymlinks(wd); rerr == nil {
			wd = real
		}
		if !errors.Is(err, manifest.ErrNoManifest) || !within(o.WorkTree, wd) {
			return path, nil
		}
	}
	scratch, err := scratchDir(c)
	if err != nil {
		return "", err
	}
	if isFile(filepath.Join(scratch, manifest.ActiveMarker)) {
		o.notef("replaying this project's run: %s (its %s)", scratch, manifest.ActiveMarker)
		return scratch, nil
	}
	loc, err := manifest.Locate(scratch)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, manifest.ErrNoManifest) {
		return "", withHint(exitErrorf(exitFailure, "no pipeline run found for %s: its scratch directory %s holds no %s and no crucible-dispatch-*/ copy",
			o.WorkTree, scratch, manifest.ActiveMarker),
			"name the run: rewind replay PATH (a manifest.jsonl, a dispatch directory, or a scratch directory)",
			"or name the scratch directory: rewind replay --scratch DIR")
	}
	if err != nil {
		return "", err
	}
	if len(loc.Candidates) > 1 {
		hints := make([]string, 0, len(loc.Candidates))
		for i, m := range loc.Candidates {
			h := "rewind replay " + shellArg(filepath.Dir(m))
			if i == 0 {
				h += " (the newest)"
			}
			hints = append(hints, h)
		}
		return "", withHint(usageErrorf("%d finished runs of %s in %s and no active one; name the one to replay", len(loc.Candidates), o.WorkTree, scratch), hints...)
	}
	dir := filepath.Dir(loc.Path)
	o.notef("replaying this project's run: %s (its durable copy in %s)", dir, scratch)
	return dir, nil
}

// replaySource is what PATH resolved to.
type replaySource struct {
	manifest    string   // the manifest read and appended to
	dispatchDir string   // its directory: new dispatch files go there
	lookup      []string // where dispatch files are looked for, in order
	scratch     string   // "" when unknown
	marker      *manifest.Marker
}

// openReplaySource resolves path as resolveReplaySource does and opens the
// manifest it names; the caller closes the index.
func openReplaySource(c *cli.Context, path string) (*replaySource, *manifest.Index, error) {
	src, err := resolveReplaySource(c, path)
	if err != nil {
		return nil, nil, err
	}
	ix, err := src.open()
	if err != nil {
		return nil, nil, err
	}
	return src, ix, nil
}

// open opens the source's manifest, naming it in the error; the caller closes
// the index.
func (src *replaySource) open() (*manifest.Index, error) {
	ix, err := manifest.Open(src.manifest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.manifest, err)
	}
	return ix, nil
}

func resolveReplaySource(c *cli.Context, path string) (*replaySource, error) {
	o := opts(c)
	loc, err := manifest.Locate(path)
	if err != nil {
		return nil, manifestPathError(path, err)
	}
	for _, n := range locateNotes(loc, path) {
		o.warnf("%s", n)
	}
	src := &replaySource{manifest: loc.Path, dispatchDir: filepath.Dir(loc.Path)}
	switch {
	case c.String("scratch") != "":
		src.scratch, _ = filepath.Abs(c.String("scratch"))
	case loc.How == "scratch":
		src.scratch, _ = filepath.Abs(path)
	case loc.How == "parent":
		// A directory holding crucible-dispatch-<id>/ copies without a marker: the
		// scratch directory after `pipeline finish --failed`.
		src.scratch, _ = filepath.Abs(path)
	case isFile(filepath.Join(filepath.Dir(src.dispatchDir), manifest.ActiveMarker)):
		// The durable copy <scratch>/crucible-dispatch-<id>/ sits in the scratch directory.
		src.scratch = filepath.Dir(src.dispatchDir)
	}
	src.lookup = []string{src.dispatchDir}
	if src.scratch != "" {
		if m, err := manifest.ReadMarker(src.scratch); err == nil {
			src.marker = m
			if m.DispatchDir != "" {
				live := filepath.Clean(m.DispatchDir)
				src.lookup = appendNew(src.lookup, live, filepath.Join(src.scratch, filepath.Base(live)))
			}
		}
	}
	return src, nil
}

// finished reports whether the source is what crucible's success cleanup
// leaves of a finished pipeline: no marker, and a directory holding the
// manifest and the receipt ledger without any dispatch or result file.
func (src *replaySource) finished() bool {
	if src.marker != nil || !isFile(filepath.Join(src.dispatchDir, "receipt-ledger.jsonl")) {
		return false
	}
	mds, err := filepath.Glob(filepath.Join(src.dispatchDir, "*.md"))
	return err == nil && len(mds) == 0
}

func appendNew(list []string, more ...string) []string {
	for _, m := range more {
		found := false
		for _, l := range list {
			found = found || filepath.Clean(l) == filepath.Clean(m)
		}
		if !found {
			list = append(list, m)
		}
	}
	return list
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func replayRun(c *cli.Context) error {
	o := opts(c)
	if c.NArg() > 1 {
		return usageErrorf("replay takes one PATH argument (a manifest, a dispatch directory or a scratch directory), or none for this project's run; got %d", c.NArg())
	}
	if c.Int("jobs") < 1 {
		return usageErrorf("invalid --jobs %d: want 1 or more", c.Int("jobs"))
	}
	muts, err := abCheckFlags(c)
	if err != nil {
		return err
	}
	kinds := replay.DefaultRoleKinds()
	for _, rk := range c.StringSlice("role-kind") {
		if err := kinds.Set(rk); err != nil {
			return usageErrorf("--role-kind: %v", err)
		}
	}
	path, err := replayPath(c)
	if err != nil {
		return err
	}
	src, ix, err := openReplaySource(c, path)
	if err != nil {
		return err
	}
	defer ix.Close()
	skippedWarnings(o, ix)
	if ix.Seqs() == 0 {
		return manifest.ErrEmpty
	}
	attempts, err := replay.LoadAttempts(ix, src.lookup, time.Local)
	if err != nil {
		return err
	}
	attempts = replay.WorkTreeTimeline(attempts)

	skill := ""
	if src.marker != nil {
		skill = src.marker.Skill
	}
	if skill == "" {
		skill = skillFromHeaders(src.lookup, attempts)
	}

	store, err := openStore(c)
	if err != nil {
		return err
	}
	planCps, err := pipelineCheckpoints(c, store, skill)
	if err != nil {
		return err
	}
	var boundaryTimes []time.Time
	for _, cp := range planCps {
		if replay.IsBoundaryReason(cp.Reason) {
			boundaryTimes = append(boundaryTimes, cp.Time)
		}
	}
	verification := &replay.Verification{
		Kinds: kinds, ResultDirs: src.lookup, Checkpoints: boundaryTimes, WorkTree: o.WorkTree,
		Warn: func(s string) { o.warnf("%s", s) }, CleanedUp: src.finished(),
	}
	verification.Replayed = map[int]bool{}
	for _, a := range attempts {
		if a.ReplayOf != nil {
			verification.Replayed[a.Seq] = true
		}
	}
	verification.Lineage = replay.ProjectLineage(c.Context, o.WorkTree)
	verification.Commits, err = projectCommits(c, attempts, src.marker)
	if err != nil {
		o.warnf("cannot read the project's history (%v): mutating dispatches cannot be verified", err)
	}

	plan, err := replay.Build(attempts, planCps, verification.Verify, replay.Options{
		FromPhase: c.String("from-phase"), FromSeq: c.Int("from-seq"), NoRestore: c.Bool("no-restore"),
	})
	noteLegacyReplayed(o, attempts)
	if plan != nil && muts == nil { // an A/B replay runs in arms, beside any replay of the work tree
		if err := inFlightGuard(c, plan, path); err != nil {
			return err
		}
	}
	if plan != nil {
		for _, f := range plan.Findings {
			if !f.OK {
				o.warnf("verification failed for seq %d (%s): %s; resuming from an earlier boundary", f.Seq, orDash(f.Role), f.Detail)
			}
		}
	}
	if errors.Is(err, replay.ErrNoBoundary) {
		phase := "phase " + plan.ProblemPhase
		if plan.ProblemPhase == "" {
			phase = "no phase recorded"
		}
		msg := fmt.Sprintf("no verified boundary with a checkpoint remains before seq %d (%s); cannot restore a safe state", plan.ProblemSeq, phase)
		if len(boundaryTimes) == 0 {
			msg = fmt.Sprintf("no checkpoint to resume from: the store holds no boundary checkpoint (the crash is at seq %d, %s); cannot restore a safe state", plan.ProblemSeq, phase)
		}
		return withHint(exitErrorf(exitGuard, "%s", msg),
			"resume on the current disk state, restoring nothing: "+replayAgain(c, path, "--no-restore"),
			"or start fresh: rewind pipeline start --force")
	}
	if err != nil {
		return withCode(exitUsageIf(err), err)
	}
	for _, w := range plan.Warnings {
		o.warnf("%s", w)
	}
	if plan.Fallback {
		o.warnf("%s", replay.FallbackMessage(plan))
	}
	report := replay.Report{Source: src.manifest, Plan: plan, Session: sessionOf(src)}
	if abs, err := filepath.Abs(src.manifest); err == nil {
		report.Source = abs
	}
	if src.marker != nil {
		report.Skill = src.marker.Skill
		if t, err := replay.ParseTime(src.marker.StartTime, time.Local); err == nil {
			report.Started = t
		}
	}
	if report.Started.IsZero() && len(plan.Dispatches) > 0 {
		report.Started = earliest(plan.Dispatches)
	}
	if report.Skill == "" {
		report.Skill = skill
	}
	if n := len(verification.Unkept); n > 0 {
		seqs := make([]string, n)
		for i, q := range verification.Unkept {
			seqs[i] = strconv.Itoa(q)
		}
		o.notef("note: %s not kept by the cleanup of the finished pipeline (seq %s); those dispatches are taken as completed",
			plural(n, "result file was", "result files were"), strings.Join(seqs, ", "))
	}
	if n := len(verification.NoEvidence); n > 0 {
		o.notef("note: the run leaves no result files and no receipt-ledger entries; %s taken on %s manifest status (seq %s)",
			plural(n, "output dispatch", "output dispatches"), pick(n, "its", "their"), joinInts(verification.NoEvidence))
	}
	if muts != nil {
		return abRun(c, abInput{src: src, plan: plan, report: report, store: store, muts: muts, path: path,
			skill: skill, firstTime: earliest(plan.Dispatches)})
	}
	run := newReplayOutcome(replayMode(c.Bool("dry-run"), c.String("exec")))
	if plan.Complete {
		o.notef("nothing to resume: every dispatch completed and was verified")
		if o.JSON {
			run.result = "nothing_to_resume"
			return writeJSON(o, replayDoc(report, run))
		}
		return nil
	}

	head, err := planHeadMove(c, plan, store)
	if err != nil {
		return err
	}
	report.Head = head

	lock := staleIndexLock(c)
	if c.Bool("dry-run") {
		// What the real run would trip on: warned on stderr, and in the
		// --json document's warnings, which is what a script reads.
		var warnings []string
		if lock != "" {
			warnings = append(warnings, fmt.Sprintf("%s exists: a git command in the project died and left it, or one runs now; the agents' git commands would fail while it is there", lock))
			o.warnf("%s", warnings[len(warnings)-1])
			o.hintf("if no git command runs in the project, remove it: rm %s", shellArg(lock))
		}
		if plan.Restore != nil {
			// The real run would refuse: say so now.
			if err := branchGuard(c, src.marker); err != nil {
				warnings = append(warnings, err.Error())
				o.warnf("%v", err)
			}
			if head != nil && head.Refused != nil {
				warnings = append(warnings, head.Refused.Error())
				o.warnf("%v", head.Refused)
			}
		}
		if plan.Restore != nil {
			preview, err := store.Restore(c.Context, plan.Restore.ID, checkpoint.RestoreOptions{DryRun: true})
			if err != nil {
				return err
			}
			report.Writes, report.Removes = preview.Write, preview.Remove
		}
		if o.JSON {
			run.result = "planned"
			doc := replayDoc(report, run)
			doc["warnings"] = append(append([]string{}, report.Plan.Warnings...), warnings...)
			return writeJSON(o, doc)
		}
		_, err := fmt.Fprint(o.Stdout, replay.RenderDryRun(report))
		return err
	}

	session := c.String("session")
	if session == "" {
		session = fmt.Sprintf("replay-%d-%d", o.Now().Unix(), os.Getpid())
	}
	rd := replay.Redispatcher{
		DispatchDir: src.dispatchDir, Lookup: src.lookup, Templates: c.String("templates"),
		AllowUnfaithful: c.Bool("allow-unfaithful"), Skill: report.Skill, Session: session, Now: o.Now(),
		Warn: func(s string) { o.warnf("%s", s) }, ManifestWarn: o.Stderr,
	}
	unfaithfulHint := "pass --templates DIR holding <template>.md or <template>-prompt.md (a crucible checkout), or --allow-unfaithful to re-dispatch from the manifest's record alone"
	// Refuse an unfaithful replay before restoring anything.
	if err := rd.Check(plan.Redo); err != nil {
		return withHint(err, unfaithfulHint)
	}

	// A lock left in the project's .git would fail every agent's commit: refuse
	// before anything changes (with --exec), or warn the calling skill.
	if lock != "" {
		if c.String("exec") != "" {
			return withHint(exitErrorf(exitFailure, "%s exists: a git command in the project died and left it, or one runs now; every agent's git command would fail, so no agent was run and nothing was changed", lock),
				"if no git command runs in the project, remove it: rm "+shellArg(lock),
				"then: "+replayAgain(c, path))
		}
		o.warnf("%s exists: the agents' git commands will fail while it is there; if no git command runs in the project, remove it: rm %s", lock, shellArg(lock))
	}

	// Guards: the branch the pipeline ran on, then confirmation.
	var restored, removed []string
	if plan.Restore != nil {
		if err := branchGuard(c, src.marker); err != nil {
			return err
		}
		if head != nil && head.Refused != nil {
			return headRefusal(head, replayAgain(c, path, "--keep-head"))
		}
		q := fmt.Sprintf("About to restore working directory to checkpoint %s (taken at %s", plan.Restore.Reason, plan.Restore.Time.Format(time.RFC3339))
		if src.marker != nil && src.marker.Branch != nil {
			q += ", branch " + *src.marker.Branch
		}
		q += ")"
		if !o.Yes {
			// The question in numbers, as checkpoint restore's. (With --yes
			// it is not asked, and the preview, which costs as much as the
			// safety checkpoint, is skipped.)
			preview, err := store.Restore(c.Context, plan.Restore.ID, checkpoint.RestoreOptions{DryRun: true})
			if err != nil {
				return err
			}
			q += fmt.Sprintf(". This writes %s and removes %s", plural(len(preview.Write), "file", "files"), plural(len(preview.Remove), "file", "files"))
			if committed := committedWork(c, store, plan.Restore.ID, append(append([]string{}, preview.Write...), preview.Remove...)); len(committed) > 0 {
				if len(committed) > 10 {
					committed = append(committed[:10], fmt.Sprintf("and %d more", len(committed)-10))
				}
				q += "; committed work in these files: " + strings.Join(committed, ", ")
			}
			q += "; uncommitted changes are reset (a safety checkpoint keeps them)"
		}
		if head != nil {
			q += fmt.Sprintf(". Branch %s moves back from %s to the checkpoint's commit %s; %s leave the branch: %s",
				head.Branch, short8(head.From), short8(head.To), plural(len(head.Leaving), "commit", "commits"), replay.NameCommits(head.Leaving))
		}
		q += ". Proceed?"
		if err := o.confirm(q); err != nil {
			return err
		}
		done := trackProgress(o, store, "replay: restore")
		res, err := store.Restore(c.Context, plan.Restore.ID, checkpoint.RestoreOptions{})
		done()
		if err != nil {
			return err
		}
		o.notef("restored to checkpoint %s (%s); safety checkpoint %s undoes it", res.Target.Short(), res.Target.Reason, res.Safety.Short())
		if head != nil {
			if err := moveHeadBack(c, head, res, session, path); err != nil {
				return err
			}
		} else {
			noteHeadMoved(o, res)
		}
		restored, removed = res.Write, res.Remove
		run.restored, run.headMoved = res, head != nil
	}
	run.session = session

	jobs, err := rd.Write(plan.Redo)
	if err != nil {
		if errors.Is(err, replay.ErrUnfaithful) {
			return withHint(err, unfaithfulHint)
		}
		return err
	}

	// The orchestrator's state, as a synthetic Compression State Block.
	redispatched := map[int]int{}
	for _, j := range jobs {
		redispatched[j.From.Seq] = j.Seq
	}
	var handoffDirs []string
	if id := sessionOf(src); id != "" {
		// The debugging skill keeps its handoff manifests in its own scratch directory.
		handoffDirs = append(handoffDirs, filepath.Join(tmpDir(), "crucible-debug-"+id))
	}
	// The build mode file is the build skill's (an unknown skill may be build).
	modeFile := ""
	if report.Skill == "" || report.Skill == "build" {
		modeFile = filepath.Join(tmpDir(), "crucible-build-mode.md")
	}
	st, warnings := replay.LoadState(src.scratch, handoffDirs, modeFile)
	for _, w := range warnings {
		o.warnf("%s", w)
	}
	csb := replay.RenderCSB(replay.CSBInput{State: st, Plan: plan, Skill: report.Skill, Session: session,
		Scratch: src.scratch, Restored: restored, Removed: removed, Redispatched: redispatched})
	csbDir := src.scratch
	if csbDir == "" {
		csbDir = src.dispatchDir
	}
	csbPath := filepath.Join(csbDir, "replay-"+session+"-csb.md")
	if err := manifest.WriteFileAtomic(csbPath, []byte(csb), 0o644); err != nil {
		return err
	}
	run.csbFile, run.csb = csbPath, csb
	if !o.JSON {
		fmt.Fprint(o.Stdout, csb)
	}

	waves := replay.Waves(jobs, planCps)
	run.waves = waves
	if c.String("exec") == "" {
		if o.JSON {
			run.result = "delegated"
			return writeJSON(o, replayDoc(report, run))
		}
		printDelegatePlan(o, src, session, report.Skill, waves)
		return nil
	}
	err = runReplay(c, store, src, session, report.Skill, waves, path, run)
	if o.JSON && (err == nil || run.result == "stopped") {
		// A stopped replay's document says what ran and what failed; its
		// exit code stays 1.
		if werr := writeJSON(o, replayDoc(report, run)); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// exitUsageIf gives plan errors caused by a bad flag (an unknown phase or seq)
// the usage exit code.
func exitUsageIf(err error) int {
	if strings.HasPrefix(err.Error(), "--from-") {
		return exitUsage
	}
	return 0
}

// sessionOf is the original pipeline's session id: the marker's, else the
// dispatch directory's name (crucible-dispatch-<id>).
func sessionOf(src *replaySource) string {
	if src.marker != nil && src.marker.PipelineID != "" {
		return src.marker.PipelineID
	}
	base := filepath.Base(src.dispatchDir)
	for _, p := range []string{"crucible-dispatch-", "dispatch-"} {
		if id, ok := strings.CutPrefix(base, p); ok {
			return id
		}
	}
	return ""
}

func earliest(ds []replay.Dispatch) time.Time {
	var t time.Time
	for _, d := range ds {
		for _, a := range d.Attempts {
			if !a.Time.IsZero() && (t.IsZero() || a.Time.Before(t)) {
				t = a.Time
			}
		}
	}
	return t
}

// skillFromHeaders takes the pipeline's skill from the first dispatch file's
// audit header when no marker names it.
func skillFromHeaders(dirs []string, attempts []replay.Attempt) string {
	for _, a := range attempts {
		if p := replay.FindDispatchFile(dirs, a.File); p != "" {
			data, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if h, _, ok := replay.ParseDispatchFile(string(data)); ok && h.Pipeline != "" {
				return h.Pipeline
			}
		}
	}
	return ""
}

// projectCommits reads the project's history since the pipeline started,
// through the read-only runner: the commits since the marker's baseline
// commit, else those dated from an hour before the first dispatch.
func projectCommits(c *cli.Context, attempts []replay.Attempt, marker *manifest.Marker) ([]replay.Commit, error) {
	p := gitexec.Project{Dir: opts(c).WorkTree}
	args := []string{"log", "-z", "--format=" + replay.LogFormat, "HEAD"}
	if baseline := markerBaseline(c, p, marker); baseline != "" {
		// By ancestry, not by date: git log --since stops at the first commit
		// dated before the limit, so one commit with an older date (a skewed
		// clock, a pinned GIT_COMMITTER_DATE) would hide everything below it.
		args = append(args, "^"+baseline)
	} else {
		var since time.Time
		for _, a := range attempts {
			if !a.Time.IsZero() && (since.IsZero() || a.Time.Before(since)) {
				since = a.Time
			}
		}
		if !since.IsZero() {
			args = append(args, "--since=@"+strconv.FormatInt(since.Add(-time.Hour).Unix(), 10))
		}
	}
	out, err := p.Run(c.Context, append(args, "--")...)
	if err != nil {
		return nil, err
	}
	return replay.ParseLog(out), nil
}

// markerBaseline is the pipeline's baseline commit from its marker, when it
// names one the project has.
func markerBaseline(c *cli.Context, p gitexec.Project, m *manifest.Marker) string {
	if m == nil || m.BaselineSHA == nil {
		return ""
	}
	id := *m.BaselineSHA
	if len(id) != 40 && len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return ""
	}
	if _, err := p.Run(c.Context, "cat-file", "-e", id+"^{commit}"); err != nil {
		return ""
	}
	return id
}

// branchGuard refuses to restore when the pipeline ran on another branch.
func branchGuard(c *cli.Context, m *manifest.Marker) error {
	if m == nil || m.Branch == nil || *m.Branch == "" {
		return nil
	}
	out, err := gitexec.Project{Dir: opts(c).WorkTree}.Run(c.Context, "branch", "--show-current")
	if err != nil {
		return nil
	}
	current := strings.TrimSpace(string(out))
	if current == *m.Branch {
		return nil
	}
	return exitErrorf(exitGuard, "Pipeline was running on branch %s but you are on %s. Switch to %s before resuming — restoring a checkpoint from a different branch would contaminate your working directory.",
		*m.Branch, orDash(current), *m.Branch)
}

func printDelegatePlan(o *options, src *replaySource, session, skill string, waves []replay.Wave) {
	n := 0
	for _, w := range waves {
		n += len(w.Jobs)
	}
	fmt.Fprintf(o.Stdout, "\n# Re-dispatch plan (session %s)\n\n", session)
	fmt.Fprintf(o.Stdout, "%s in %s; the dispatch files and `dispatched` entries are written in %s.\n", plural(n, "dispatch", "dispatches"), plural(len(waves), "wave", "waves"), src.dispatchDir)
	for i, w := range waves {
		fmt.Fprintf(o.Stdout, "\n## Wave %d", i+1)
		if w.Checkpoint != "" {
			fmt.Fprintf(o.Stdout, " (first: rewind checkpoint create --reason %s --source %s)", shellArg(w.Checkpoint), shellArg(checkpointSource(skill)))
		}
		fmt.Fprintf(o.Stdout, "\n| Seq | Replays | Role | Phase | Task | Dispatch file |\n|-----|---------|------|-------|------|---------------|\n")
		for _, j := range w.Jobs {
			task := "-"
			if j.From.Task != nil {
				task = strconv.Itoa(*j.From.Task)
			}
			fmt.Fprintf(o.Stdout, "| %d | %d | %s | %s | %s | %s |\n", j.Seq, j.ReplayOf, orDash(j.From.Role), orDash(j.From.Phase), task, filepath.Base(j.DispatchFile))
		}
	}
	fmt.Fprintf(o.Stdout, "\nRecord each completion with: rewind dispatch after --dir %s --seq N --status completed --summary TEXT\n", shellArg(src.dispatchDir))
}

// runReplay runs the waves through --exec, recording each outcome in the
// manifest, taking a checkpoint at each boundary crossed, and stopping at the
// first wave with a failed dispatch.
func runReplay(c *cli.Context, store *checkpoint.Store, src *replaySource, session, skill string, waves []replay.Wave, path string, run *replayOutcome) error {
	o := opts(c)
	r := replay.Runner{Command: c.String("exec"), WorkTree: o.WorkTree, DispatchDir: src.dispatchDir,
		Session: session, Jobs: c.Int("jobs")}
	done, total := 0, 0
	for _, w := range waves {
		total += len(w.Jobs)
	}
	bar := o.startProgress("replay")
	defer bar.end(o)
	finished := 0 // dispatches that ended, whatever their status
	for i, w := range waves {
		if w.Checkpoint != "" && i > 0 {
			waitNextSecond(o)
			bar.update("checkpoint "+w.Checkpoint, 0, 0)
			made, err := store.Create(c.Context, checkpoint.CreateOptions{Reason: w.Checkpoint, Source: checkpointSource(skill)})
			if err != nil {
				return err
			}
			o.notef("checkpoint %s %s", made.Checkpoint.Short(), w.Checkpoint)
			run.taken[i] = made.Checkpoint
		}
		// The wave is dispatched now: its files say so, for a later replay to
		// compare with the checkpoint just taken.
		for _, j := range w.Jobs {
			if err := replay.Restamp(j.DispatchFile, o.Now()); err != nil {
				return err
			}
		}
		bar.update("dispatches ended", finished, total)
		outcomes, err := r.RunWave(c.Context, w, func(out replay.Outcome) error {
			finished++
			bar.update("dispatches ended", finished, total)
			summary := out.Summary
			chars, dur := int64(out.OutputChars), int64(out.Duration)
			_, err := manifest.After(src.dispatchDir, manifest.Completion{Seq: int64(out.Job.Seq), Status: out.Status,
				Summary: &summary, OutputChars: &chars, Duration: &dur}, o.Stderr)
			o.notef("seq %d (%s, replays %d): %s", out.Job.Seq, orDash(out.Job.From.Role), out.Job.ReplayOf, out.Status)
			run.outcomes[out.Job.Seq] = out
			return err
		})
		if err != nil {
			return err
		}
		var failed *replay.Outcome
		for k, out := range outcomes {
			switch {
			case out.NotSent:
			case out.Status != "completed":
				if failed == nil {
					failed = &outcomes[k]
				}
			default:
				done++
			}
		}
		if failed != nil {
			// The stop rule (see replay.Runner.RunWave): the jobs of this wave
			// that never started and the later waves were never sent: stamp
			// them now, after everything this replay ran, so the next replay
			// orders them after the failed wave and can resume from the
			// checkpoint taken before it; and close their entries as `error`
			// (not sent), so no later replay takes this stopped session for one
			// still at work.
			notSent := fmt.Sprintf("not sent: replay session %s stopped after seq %d failed", session, failed.Job.Seq)
			var unsent []replay.Job
			for _, out := range outcomes {
				if out.NotSent {
					unsent = append(unsent, out.Job)
				}
			}
			for _, later := range waves[i+1:] {
				unsent = append(unsent, later.Jobs...)
			}
			for _, j := range unsent {
				if err := replay.Restamp(j.DispatchFile, o.Now()); err != nil {
					o.warnf("%v", err)
				}
				if _, err := manifest.After(src.dispatchDir, manifest.Completion{Seq: int64(j.Seq), Status: "error", Summary: &notSent}, o.Stderr); err != nil {
					o.warnf("%v", err)
				}
				o.notef("seq %d (%s, replays %d): not sent", j.Seq, orDash(j.From.Role), j.ReplayOf)
				run.outcomes[j.Seq] = replay.Outcome{Job: j, NotSent: true}
			}
			run.result, run.completed = "stopped", done
			var hints []string
			if failed.ExitCode == 126 || failed.ExitCode == 127 {
				// sh's own codes: the command was not found, or not executable.
				what := map[int]string{126: "found but could not be run (not executable?)", 127: "not found"}[failed.ExitCode]
				hints = append(hints, fmt.Sprintf("exit status %d is sh's: the --exec command was %s. --exec runs CMD with sh -c in the work tree, so pass it as one quoted argument with a path sh can find, e.g. --exec './agent.sh --fast'; the agent's messages are in %s",
					failed.ExitCode, what, shellArg(strings.TrimSuffix(failed.Job.DispatchFile, ".md")+"-stderr.log")))
			}
			hints = append(hints, "resume it again: "+replayAgain(c, path))
			return withHint(exitErrorf(exitFailure, "seq %d (%s, phase %s) failed (exit status %d); the replay stopped with its state recorded in the manifest",
				failed.Job.Seq, orDash(failed.Job.From.Role), orDash(failed.Job.From.Phase), failed.ExitCode), hints...)
		}
	}
	o.notef("replay %s complete: %s completed", session, plural(done, "dispatch", "dispatches"))
	run.result, run.completed = "completed", done
	return nil
}

// waitNextSecond makes sure a checkpoint taken between two waves carries a
// later second than the wave before it: times have one-second resolution, and a
// later replay must see the wave as taken before the checkpoint, not redo it.
// With a pinned --now there is no clock to wait for.
func waitNextSecond(o *options) {
	if o.NowSet {
		return
	}
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now))
}

// planJSON is the dry-run plan as one JSON document.
func planJSON(r replay.Report) map[string]any {
	p := r.Plan
	dispatch := func(d replay.Dispatch) map[string]any {
		a := d.Latest()
		var when any // null: the manifest and the dispatch file say nothing
		if !a.Time.IsZero() {
			when = a.Time.UTC().Format(time.RFC3339)
		}
		return map[string]any{"seq": a.Seq, "original_seq": d.Seq(), "role": strPtr(a.Role), "phase": strPtr(d.Phase()),
			"status": a.Status, "summary": strPtr(a.Summary), "task": a.Task, "template": strPtr(replay.Template(a)), "time": when, "time_from": strPtr(a.TimeFrom)}
	}
	skip, redo := []any{}, []any{}
	for _, d := range p.Skip {
		skip = append(skip, dispatch(d))
	}
	for _, d := range p.Redo {
		redo = append(redo, dispatch(d))
	}
	findings := []any{}
	for _, f := range p.Findings {
		findings = append(findings, map[string]any{"seq": f.Seq, "role": strPtr(f.Role), "kind": string(f.Kind), "ok": f.OK, "detail": f.Detail})
	}
	var restore any
	if p.Restore != nil {
		restore = map[string]any{"id": p.Restore.ID, "reason": p.Restore.Reason, "timestamp": p.Restore.Time.UTC().Format(time.RFC3339),
			"write": nonNil(r.Writes), "remove": nonNil(r.Removes)}
	}
	var started any
	if !r.Started.IsZero() {
		started = r.Started.UTC().Format(time.RFC3339)
	}
	return map[string]any{
		"complete": p.Complete, "manifest": r.Source, "skill": strPtr(r.Skill), "session": strPtr(r.Session), "started": started,
		"crashed_at":   map[string]any{"phase": strPtr(p.CrashPhase), "context": strPtr(p.CrashContext)},
		"resume_phase": strPtr(p.ResumePhase), "restore": restore, "fallback": p.Fallback, "desired_checkpoint": strPtr(p.Desired),
		"skip": skip, "redo": redo, "findings": findings, "warnings": nonNil(p.Warnings),
		"head_move": headMoveJSON(r.Head),
	}
}

// checkpointSource is the source a replay's boundary checkpoints carry: the
// pipeline's skill, so the next replay of the pipeline takes them as its own
// ("replay" when the skill is unknown).
func checkpointSource(skill string) string {
	if skill == "" || checkpoint.CheckLabel("source", skill) != nil {
		return "replay"
	}
	return skill
}

// pipelineCheckpoints lists the store's checkpoints a pipeline of skill may
// resume from: its own and those without a source (with a note), never those
// another skill took in the same work tree (with a note naming them).
func pipelineCheckpoints(c *cli.Context, store *checkpoint.Store, skill string) ([]replay.Checkpoint, error) {
	o := opts(c)
	cps, err := store.List(c.Context)
	if err != nil {
		return nil, err
	}
	var all []replay.Checkpoint
	for _, cp := range cps {
		all = append(all, replay.Checkpoint{ID: cp.ID, Reason: cp.Reason, Source: cp.Source, Time: cp.Time})
	}
	own, unsourced, foreign := replay.CheckpointsOf(all, skill)
	describe := func(cps []replay.Checkpoint, withSource bool) (int, string) {
		var names []string
		for _, cp := range cps {
			if !replay.IsBoundaryReason(cp.Reason) {
				continue
			}
			name := cp.ID[:min(8, len(cp.ID))] + " " + cp.Reason
			if withSource {
				name += " (" + cp.Source + ")"
			}
			names = append(names, name)
		}
		return len(names), strings.Join(names, ", ")
	}
	if n, names := describe(unsourced, false); n > 0 {
		o.notef("note: %s no source skill; used as %s: %s", plural(n, "boundary checkpoint names", "boundary checkpoints name"), skill, names)
	}
	if n, names := describe(foreign, true); n > 0 {
		o.notef("note: %s of other skills in this work tree ignored (a %s pipeline resumes only from its own): %s",
			plural(n, "boundary checkpoint", "boundary checkpoints"), skill, names)
	}
	return own, nil
}

// noteLegacyReplayed says once which entries carry the status an older replay
// wrote: they are read as finished, not as corruption.
func noteLegacyReplayed(o *options, attempts []replay.Attempt) {
	var seqs []int
	for _, a := range attempts {
		if a.Status == replay.LegacyReplayed {
			seqs = append(seqs, a.Seq)
		}
	}
	if len(seqs) > 0 {
		o.notef("note: seq %s %s the legacy status \"replayed\" an older replay wrote; read as finished",
			joinInts(seqs), pick(len(seqs), "carries", "carry"))
	}
}

// inFlightGuard refuses a replay while an earlier replay session still has
// dispatches in flight (exit 4): a skill is carrying that session's plan out,
// or its --exec run is still going, and a second replay would redo the same
// dispatches under it. --takeover replays them as usual; a dry run only warns.
func inFlightGuard(c *cli.Context, plan *replay.Plan, path string) error {
	o := opts(c)
	sessions := replay.InFlightReplays(plan.Dispatches, c.String("session"))
	if len(sessions) == 0 || c.Bool("takeover") {
		return nil
	}
	var parts []string
	for _, s := range sessions {
		var seqs []string
		for _, a := range s.Attempts {
			when := "at an unknown time"
			if !a.Time.IsZero() && a.TimeFrom != "inferred" {
				when = a.Time.UTC().Format(time.RFC3339)
			}
			seqs = append(seqs, fmt.Sprintf("seq %d (%s, dispatched %s)", a.Seq, orDash(a.Role), when))
		}
		parts = append(parts, fmt.Sprintf("replay session %s still has %s in flight: %s",
			s.Session, plural(len(s.Attempts), "dispatch", "dispatches"), strings.Join(seqs, ", ")))
	}
	msg := strings.Join(parts, "; ")
	if c.Bool("dry-run") {
		o.warnf("%s; a replay would refuse without --takeover", msg)
		return nil
	}
	return withHint(exitErrorf(exitGuard, "%s", msg),
		"let it finish: its skill records each completion with rewind dispatch after",
		"or take its dispatches over (they are replayed again): "+replayAgain(c, path, "--takeover"))
}

// pick is one when n is 1, else many.
func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// staleIndexLock is the project's .git/index.lock when it exists, else "".
func staleIndexLock(c *cli.Context) string {
	o := opts(c)
	out, err := gitexec.Project{Dir: o.WorkTree}.Run(c.Context, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return ""
	}
	lock := filepath.Join(strings.TrimSpace(string(out)), "index.lock")
	if _, err := os.Lstat(lock); err != nil {
		return ""
	}
	return lock
}
