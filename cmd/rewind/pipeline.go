package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/gitexec"
	"github.com/rewind-cli/rewind/manifest"
	"github.com/rewind-cli/rewind/replay"
)

// `rewind pipeline` writes and reads the lifecycle markers of a pipeline run in
// its scratch directory, so a skill needs one command per step.

func scratchFlag() cli.Flag {
	return &cli.StringFlag{Name: "scratch", EnvVars: []string{"REWIND_SCRATCH"}, TakesFile: true,
		Usage: "the scratch `DIR` (default: ~/.claude/projects/<sha256(work tree)[:16]>/memory/)"}
}

func pipelineCommand() *cli.Command {
	return &cli.Command{
		Name:  "pipeline",
		Usage: "the lifecycle markers of a pipeline run: start, phase, finish, status",
		Subcommands: []*cli.Command{
			{
				Name:      "start",
				Usage:     "create the dispatch directory and the markers; print the dispatch directory",
				ArgsUsage: " ",
				Description: "Creates /tmp/crucible-dispatch-<session>/ (REWIND_TMPDIR replaces /tmp) itself, mode 0700,\n" +
					"never one that exists; writes <scratch>/.pipeline-active (with the project's branch and\n" +
					"HEAD) and <scratch>/.dispatch-active-<session>, and prints the dispatch directory. The\n" +
					"session defaults to the current Unix time (<time>-2, -3, ... when that one is taken); a\n" +
					"--session that is taken (its directory, or its copy in the scratch directory, exists) is\n" +
					"refused. A marker of the --session given is compaction recovery; any other marker means\n" +
					"that pipeline crashed, or, when the process it recorded is alive on this host, that it still\n" +
					"runs: refused (exit 1) unless --force, which archives the old marker as\n" +
					".pipeline-crashed-<id> and its .dispatch-active-<id> as .dispatch-crashed-<id>. The marker\n" +
					"records the pipeline's process (--pid, default the parent of rewind) and this host.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "skill", Usage: "the `NAME` of the skill that runs the pipeline (build, quality-gate, ...)"},
					scratchFlag(),
					&cli.StringFlag{Name: "session", Usage: "the session `ID` (default: the Unix time, made unique)"},
					&cli.StringFlag{Name: "phase", Usage: "the first `PHASE`"},
					&cli.BoolFlag{Name: "force", Usage: "archive another session's marker instead of refusing"},
					&cli.Int64Flag{Name: "pid", EnvVars: []string{"REWIND_PIPELINE_PID"}, Usage: "the `PID` of the process whose life is the pipeline's (default: the shell that runs this command; an agent that runs every command in a new shell passes its own, e.g. --pid $PPID)"},
				},
				Action: pipelineStart,
			},
			{
				Name:      "phase",
				Usage:     "record the current phase in .pipeline-active (atomically)",
				ArgsUsage: "PHASE",
				Flags:     []cli.Flag{scratchFlag()},
				Action:    pipelinePhase,
			},
			{
				Name:      "finish",
				Usage:     "clean up the dispatch directory as crucible does and remove the markers",
				ArgsUsage: " ",
				Description: "Success: copies manifest.jsonl and receipt-ledger.jsonl to\n" +
					"<scratch>/crucible-dispatch-<id>/ and deletes the dispatch directory (a run that never had\n" +
					"a receipt ledger has its manifest copied alone, and says so). --failed: copies\n" +
					"the whole dispatch directory there and leaves it in place. Then removes .pipeline-active\n" +
					"and .dispatch-active-<id>. A refused cleanup keeps the markers. When the dispatch\n" +
					"directory is gone, --failed copies nothing and removes the markers.",
				Flags: []cli.Flag{
					scratchFlag(),
					&cli.BoolFlag{Name: "failed", Usage: "the pipeline failed or escalated: keep the whole dispatch directory"},
				},
				Action: pipelineFinish,
			},
			{
				Name:      "status",
				Usage:     "report the active (or crashed) pipeline",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					scratchFlag(),
					&cli.StringFlag{Name: "session", Usage: "the caller's session `ID`: another session's marker is reported as crashed"},
				},
				Action: pipelineStatus,
			},
		},
	}
}

// scratchDir is --scratch, or crucible's default for the work tree.
func scratchDir(c *cli.Context) (string, error) {
	o := opts(c)
	if s := c.String("scratch"); s != "" {
		abs, err := filepath.Abs(s)
		if err != nil {
			return "", usageErrorf("--scratch %q: %v", s, err)
		}
		return abs, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", withHint(fmt.Errorf("no home directory for the default scratch directory: %w", err), "pass --scratch DIR")
	}
	sum := sha256.Sum256([]byte(o.WorkTree))
	return filepath.Join(home, ".claude", "projects", hex.EncodeToString(sum[:])[:16], "memory"), nil
}

// tmpDir is where dispatch directories go: REWIND_TMPDIR, else /tmp (crucible's
// fixed location, not $TMPDIR).
func tmpDir() string {
	if d := os.Getenv("REWIND_TMPDIR"); d != "" {
		return d
	}
	return "/tmp"
}

// projectHead reads the branch and HEAD of the project through the read-only
// git runner; nil values when they cannot be read.
func projectHead(c *cli.Context) (branch, sha *string, err error) {
	p := gitexec.Project{Dir: opts(c).WorkTree}
	out, err := p.Run(c.Context, "rev-parse", "--verify", "HEAD")
	if err == nil {
		s := strings.TrimSpace(string(out))
		sha = &s
	}
	out, berr := p.Run(c.Context, "branch", "--show-current")
	if berr == nil {
		b := strings.TrimSpace(string(out))
		branch = &b
	}
	if err == nil {
		err = berr
	}
	return branch, sha, err
}

func pipelineStart(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	skill := c.String("skill")
	if skill == "" {
		return usageErrorf("pipeline start needs --skill NAME")
	}
	session := c.String("session")
	if session != "" && !manifest.ValidSession(session) {
		return usageErrorf("invalid --session %q: use letters, digits, '_', '-' and '.' (it names a directory)", session)
	}
	scratch, err := scratchDir(c)
	if err != nil {
		return err
	}
	branch, sha, gerr := projectHead(c)
	if gerr != nil {
		if errors.Is(gerr, gitexec.ErrGitNotFound) {
			return gerr
		}
		what := "baseline_sha"
		if branch == nil {
			what = "branch and baseline_sha"
		}
		o.warnf("cannot read the project's HEAD in %s; %s recorded as null", o.WorkTree, what)
	}
	pid := int64(os.Getppid())
	if c.IsSet("pid") {
		if pid = c.Int64("pid"); pid < 1 {
			return usageErrorf("invalid --pid %d: want a process id (1 or more)", pid)
		}
	}
	res, err := manifest.Start(manifest.StartOptions{
		Skill: skill, Scratch: scratch, Session: session, Phase: c.String("phase"),
		TmpDir: tmpDir(), Now: o.Now(), Branch: branch, SHA: sha, Force: c.Bool("force"),
		PID: pid, Host: hostname(),
	})
	var crash *manifest.CrashedError
	if errors.As(err, &crash) {
		return crashHints(crash, branch, scratch)
	}
	var taken *manifest.SessionTakenError
	if errors.As(err, &taken) {
		return withHint(err, "pass another --session, or none: an automatic session id is always a new directory")
	}
	if err != nil {
		return fmt.Errorf("pipeline start: %w", err)
	}
	m := res.Marker
	switch {
	case res.Resumed:
		o.notef("pipeline %s is already active; continuing it (compaction recovery)", m.PipelineID)
	case res.Archived != "" && res.Previous != nil && res.Previous.Liveness(hostname()) == manifest.Running:
		o.warnf("pipeline %s is still running (process %d); archived its marker as %s", res.Previous.PipelineID, res.Previous.PID, res.Archived)
		for _, p := range res.ArchivedDispatch {
			o.notef("archived its dispatch marker as %s", p)
		}
	case res.Archived != "":
		o.notef("archived the marker of crashed pipeline %s as %s", prevID(res.Previous), res.Archived)
		for _, p := range res.ArchivedDispatch {
			o.notef("archived its dispatch marker as %s", p)
		}
	}
	if o.JSON {
		var archived *string
		if res.Archived != "" {
			archived = &res.Archived
		}
		return writeJSON(o, pipelineStartJSON{markerToJSON(scratch, m), res.Resumed, archived, nonNil(res.ArchivedDispatch)})
	}
	fmt.Fprintln(o.Stdout, m.DispatchDir)
	return nil
}

// markerJSON is a pipeline's marker (.pipeline-active) in --json output: null
// for what it does not record.
type markerJSON struct {
	PipelineID  string  `json:"pipeline_id"`
	Skill       *string `json:"skill"`
	Phase       *string `json:"phase"`
	StartTime   *string `json:"start_time"`
	ScratchDir  string  `json:"scratch_dir"`
	DispatchDir *string `json:"dispatch_dir"`
	Branch      *string `json:"branch"`
	BaselineSHA *string `json:"baseline_sha"`
	PID         *int64  `json:"pid"`
	Host        *string `json:"host"`
}

func markerToJSON(scratch string, m *manifest.Marker) markerJSON {
	j := markerJSON{PipelineID: m.PipelineID, Skill: strPtr(m.Skill), Phase: strPtr(m.Phase), StartTime: strPtr(m.StartTime),
		ScratchDir: scratch, DispatchDir: strPtr(m.DispatchDir), Branch: m.Branch, BaselineSHA: m.BaselineSHA, Host: strPtr(m.Host)}
	if m.PID > 0 {
		pid := m.PID
		j.PID = &pid
	}
	return j
}

// pipelineStartJSON is `pipeline start --json`: the marker written, and what
// happened to a marker that was there.
type pipelineStartJSON struct {
	Marker           markerJSON `json:"marker"`
	Resumed          bool       `json:"resumed"`
	ArchivedMarker   *string    `json:"archived_marker"`
	ArchivedDispatch []string   `json:"archived_dispatch_markers"`
}

func prevID(m *manifest.Marker) string {
	if m == nil {
		return "(unreadable marker)"
	}
	return m.PipelineID
}

// hostname is this host's name, as markers record it ("" when unknown).
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// crashHints says what crashed (or still runs) and how to go on.
func crashHints(crash *manifest.CrashedError, current *string, scratch string) error {
	if crash.Live == manifest.Running {
		return withHint(crash, fmt.Sprintf("let it finish (rewind pipeline status --scratch %s follows it), or stop process %d first", shellArg(scratch), crash.Marker.PID),
			"or start another anyway with --force (its marker is archived as .pipeline-crashed-<id>; it keeps running)")
	}
	var hints []string
	if m := crash.Marker; m != nil && m.Branch != nil && current != nil && *m.Branch != *current {
		hints = append(hints, fmt.Sprintf("it ran on branch %s and you are on %s: switch to %s before resuming", *m.Branch, *current, *m.Branch))
	}
	if _, err := manifest.Locate(scratch); crash.Marker != nil && err != nil {
		hints = append(hints, lostManifestHints(crash.Marker, scratch)...)
	} else if crash.Marker != nil {
		hints = append(hints, "resume it with: rewind replay "+shellArg(scratch))
	}
	hints = append(hints, "or start afresh with --force (the old marker is kept as .pipeline-crashed-<id>)")
	return withHint(crash, hints...)
}

// lostManifestHints say what can still be recovered of a run whose dispatch
// manifest is gone (its dispatch directory deleted, no durable copy in the
// scratch directory): not a replay, which needs the manifest, but the work
// tree's checkpoints.
func lostManifestHints(m *manifest.Marker, scratch string) []string {
	checkpoints := "what remains is the work tree's checkpoints: rewind checkpoint list, then rewind checkpoint restore REF --dry-run to see one"
	if m != nil && m.DispatchDir != "" {
		dir := filepath.Clean(m.DispatchDir)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return []string{fmt.Sprintf("it recorded no dispatch (%s holds no manifest.jsonl), so there is nothing for rewind replay to resume", dir), checkpoints}
		}
		return []string{fmt.Sprintf("its dispatch manifest is gone with %s, and %s holds no durable copy, so rewind replay cannot plan a resume", dir, scratch), checkpoints}
	}
	return []string{"its marker names no dispatch directory, so rewind replay cannot plan a resume", checkpoints}
}

func markerError(err error) error {
	if errors.Is(err, manifest.ErrNoMarker) {
		return withHint(err, "start one with: rewind pipeline start --skill NAME")
	}
	return err
}

func pipelinePhase(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErrorf("pipeline phase takes one PHASE argument; got %d", c.NArg())
	}
	scratch, err := scratchDir(c)
	if err != nil {
		return err
	}
	m, err := manifest.SetPhase(scratch, c.Args().First())
	if err != nil {
		return markerError(err)
	}
	if o := opts(c); o.JSON {
		return writeJSON(o, map[string]any{"marker": markerToJSON(scratch, m)})
	}
	return nil
}

func pipelineFinish(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	scratch, err := scratchDir(c)
	if err != nil {
		return err
	}
	res, err := manifest.Finish(scratch, c.Bool("failed"))
	var de *manifest.DispatchError
	var cf *manifest.CopyFailures
	if errors.As(err, &cf) {
		var lines []string
		for _, l := range append(cf.Lines(), cf.Error()) {
			lines = append(lines, strings.TrimPrefix(l, "dispatch cleanup: "))
		}
		return withHint(errors.New(strings.Join(lines, "\n")), "the markers are kept; everything else was copied: "+
			"remove or fix those entries and run rewind pipeline finish --failed again")
	}
	if errors.As(err, &de) {
		msg := errors.New(strings.TrimPrefix(de.Msg, "dispatch cleanup: "))
		if de.Foreign {
			return withHint(msg, "the markers are kept; rewind never uses a dispatch directory another user owns: "+
				"find out who made it, and start a new pipeline")
		}
		if de.Inside {
			return withHint(msg, "the markers are kept; the copy goes to <scratch>/<name of the dispatch directory>, "+
				"so the scratch directory must lie outside the dispatch directory: check --scratch and REWIND_TMPDIR")
		}
		if de.NoManifest {
			return withHint(msg, "the markers are kept; a success finish keeps only manifest.jsonl (and receipt-ledger.jsonl) and deletes the rest: "+
				"rewind pipeline finish --failed copies the whole dispatch directory to the scratch directory and leaves it in place")
		}
		if de.DirMissing {
			return withHint(msg, "the markers are kept; with the dispatch directory gone there is nothing to copy: "+
				"rewind pipeline finish --failed removes the markers")
		}
		return withHint(msg, "the markers are kept; fix the dispatch directory, or finish with --failed "+
			"(copies the whole dispatch directory and leaves it in place)")
	}
	if err != nil {
		return markerError(err)
	}
	if o.JSON {
		if err := writeJSON(o, pipelineFinishJSON{markerToJSON(scratch, res.Marker), c.Bool("failed"), res.Message, res.DirGone, res.NoLedger}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(o.Stdout, res.Message)
	}
	if res.NoLedger && strings.HasPrefix(res.Message, "copied") {
		o.notef("note: the run never had a receipt ledger: receipt-ledger.jsonl, one receipt per accepted dispatch, is written by crucible's skills, not by rewind; the copy holds the manifest alone")
		o.hintf("readers of the finished run's receipts (crucible's post-run consumers) find none; rewind replay of it verifies commits and takes output dispatches on their manifest status, since the result files went with the dispatch directory")
	}
	return nil
}

// statusJSON is `pipeline status --json`; every field is there, null when the
// marker (or the manifest) does not say.
// pipelineFinishJSON is `pipeline finish --json`: the marker removed, and the
// cleanup's message (dispatch.py's).
type pipelineFinishJSON struct {
	Marker   markerJSON `json:"marker"`
	Failed   bool       `json:"failed"`
	Message  string     `json:"message"`
	DirGone  bool       `json:"dispatch_dir_gone"`
	NoLedger bool       `json:"no_ledger"`
}

type statusJSON struct {
	Active        bool    `json:"active"`
	State         string  `json:"state"`
	Why           *string `json:"why"`
	Scratch       string  `json:"scratch_dir"`
	PipelineID    *string `json:"pipeline_id"`
	Skill         *string `json:"skill"`
	Phase         *string `json:"phase"`
	StartTime     *string `json:"start_time"`
	AgeS          *int64  `json:"age_s"`
	PID           *int64  `json:"pid"`
	Host          *string `json:"host"`
	DispatchDir   *string `json:"dispatch_dir"`
	Branch        *string `json:"branch"`
	CurrentBranch *string `json:"current_branch"`
	BaselineSHA   *string `json:"baseline_sha"`
	Manifest      *string `json:"manifest"`
	Dispatches    int     `json:"dispatches_count"`
	InFlight      []int64 `json:"in_flight"`
}

// pipelineState is what a marker says of its pipeline: running (its process
// is alive on this host, or it is the caller's own --session), crashed (its
// process on this host has exited, or --session names another session),
// interrupted (its dispatch directory is gone), or unfinished (rewind cannot
// tell: the marker records no process, or one on another host); and why.
func pipelineState(m *manifest.Marker, session, host string) (state, why string) {
	live := m.Liveness(host)
	switch {
	case live == manifest.Running:
		why = fmt.Sprintf("its process %d on this host is alive", m.PID)
		if session != "" && session != m.PipelineID {
			why += "; this session is " + session
		}
		return "running", why
	case m.DispatchDir != "" && !isDir(m.DispatchDir):
		return "interrupted", "its dispatch directory is gone"
	case live == manifest.Gone:
		return "crashed", fmt.Sprintf("its process %d on this host has exited without finishing", m.PID)
	case session != "" && session != m.PipelineID:
		return "crashed", "this session is " + session
	case session != "":
		return "running", "this session"
	case m.PID > 0 && m.Host != "":
		return "unfinished", fmt.Sprintf("its process %d runs or ran on host %s, not this one", m.PID, m.Host)
	}
	return "unfinished", "its marker records no process: it still runs, or it crashed"
}

// age is a duration as a person reads it: 45s, 12m, 2h 5m, 3d 4h.
func age(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 86400:
		if m := s % 3600 / 60; m > 0 {
			return fmt.Sprintf("%dh %dm", s/3600, m)
		}
		return fmt.Sprintf("%dh", s/3600)
	}
	if h := s % 86400 / 3600; h > 0 {
		return fmt.Sprintf("%dd %dh", s/86400, h)
	}
	return fmt.Sprintf("%dd", s/86400)
}

func pipelineStatus(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	scratch, err := scratchDir(c)
	if err != nil {
		return err
	}
	m, err := manifest.ReadMarker(scratch)
	if errors.Is(err, manifest.ErrNoMarker) {
		if o.JSON {
			return writeJSON(o, statusJSON{State: "none", Scratch: scratch, InFlight: []int64{}})
		}
		fmt.Fprintf(o.Stdout, "no active pipeline in %s\n", scratch)
		return nil
	}
	if err != nil {
		return err
	}
	current, _, _ := projectHead(c)
	session := c.String("session")
	state, why := pipelineState(m, session, hostname())
	doc := statusJSON{Active: state == "running" || state == "unfinished", State: state, Why: &why, Scratch: scratch, PipelineID: strPtr(m.PipelineID), Skill: strPtr(m.Skill),
		Phase: strPtr(m.Phase), StartTime: strPtr(m.StartTime), DispatchDir: strPtr(m.DispatchDir), Branch: m.Branch, CurrentBranch: current,
		BaselineSHA: m.BaselineSHA, InFlight: []int64{}}
	if m.PID > 0 {
		pid := m.PID
		doc.PID = &pid
	}
	if m.Host != "" {
		host := m.Host
		doc.Host = &host
	}
	ageText := ""
	if t, err := replay.ParseTime(m.StartTime, time.Local); err == nil && !o.Now().Before(t) {
		s := int64(o.Now().Sub(t) / time.Second)
		doc.AgeS = &s
		ageText = ", started " + age(o.Now().Sub(t)) + " ago"
	}
	if loc, err := manifest.Locate(scratch); err == nil {
		if ix, err := manifest.Open(loc.Path); err == nil {
			doc.Manifest = &loc.Path
			doc.Dispatches = ix.Seqs()
			doc.InFlight = append(doc.InFlight, ix.InFlight()...)
			ix.Close()
		}
	}
	if o.JSON {
		return writeJSON(o, doc)
	}
	w := o.Stdout
	fmt.Fprintf(w, "pipeline %s (%s): %s%s (%s)\n", m.PipelineID, orDash(m.Skill), state, ageText, why)
	fmt.Fprintf(w, "phase: %s\n", orDash(m.Phase))
	fmt.Fprintf(w, "started: %s\n", orDash(m.StartTime))
	branchLine := "branch: " + ptrOr(m.Branch, "(unknown)")
	if current != nil && m.Branch != nil && *current != *m.Branch {
		branchLine += fmt.Sprintf(" (you are on %s)", *current)
	}
	fmt.Fprintln(w, branchLine)
	fmt.Fprintf(w, "baseline: %s\n", ptrOr(m.BaselineSHA, "(unknown)"))
	fmt.Fprintf(w, "scratch: %s\n", scratch)
	fmt.Fprintf(w, "dispatch dir: %s\n", orDash(m.DispatchDir))
	if doc.Manifest == nil {
		fmt.Fprintf(w, "dispatches: none recorded\n")
	} else {
		line := fmt.Sprintf("dispatches: %d", doc.Dispatches)
		if len(doc.InFlight) > 0 {
			var seqs []string
			for _, s := range doc.InFlight {
				seqs = append(seqs, fmt.Sprint(s))
			}
			line += fmt.Sprintf(", in flight: seq %s", strings.Join(seqs, ", "))
		}
		fmt.Fprintln(w, line)
	}
	switch {
	case state != "crashed" && state != "interrupted" && state != "unfinished":
	case doc.Manifest == nil:
		// rewind replay would only say "no manifest found": say what is left.
		for _, h := range lostManifestHints(m, scratch) {
			o.hintf("%s", h)
		}
	case state == "unfinished":
		o.hintf("if it crashed, resume it with: rewind replay %s", shellArg(scratch))
	default:
		o.hintf("resume it with: rewind replay %s", shellArg(scratch))
	}
	return nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ptrOr(p *string, def string) string {
	if p == nil {
		return def
	}
	if *p == "" {
		return "-"
	}
	return *p
}
