package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/replay/state"
)

// `rewind state` gives pipelines that keep their progress in state files of
// their own (the recovery playbook's .pipeline-state.md, the checkpoint skill's
// memory/state/phase.json and execution.json) what rewind gives manifest
// pipelines: validation before a resume, one deterministic decision, atomic
// writes.

const stateDirHelp = "DIR (default: the work tree) is a feature folder holding .pipeline-state.md, a project root\n" +
	"whose specs/*/.pipeline-state.md are searched for the unfinished run, or a project root\n" +
	"holding memory/state/ (or that directory itself)."

func stateCommand() *cli.Command {
	return &cli.Command{
		Name:  "state",
		Usage: "resume decisions and safe writes for pipelines that keep state files",
		Subcommands: []*cli.Command{
			{
				Name:      "check",
				Usage:     "validate the state and print one decision: fresh, start-fresh, blocked, waiting-for-human or resume",
				ArgsUsage: "[DIR]",
				Description: stateDirHelp + "\n\nExit 0 for every decision but blocked, which is exit 4 (the spec changed, the state\n" +
					"is stale or does not validate: a human looks first). A state file that cannot be read as\n" +
					"its format is exit 1.",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "allow-stale", Usage: "a workflow started over 7 days ago is a warning, not a block (style 2)"},
				},
				Action: stateAction(stateCheck),
			},
			{
				Name:        "resume",
				Usage:       "apply a resume decision to .pipeline-state.md: stage, last_updated_at and the resume note",
				ArgsUsage:   "[DIR]",
				Description: stateDirHelp,
				Action:      stateAction(stateResume),
			},
			{
				Name:      "recover",
				Usage:     "repair memory/state/execution.json after a crash: orphaned running tasks, an interrupted update",
				ArgsUsage: "[DIR]",
				Description: "A running task without its output goes back to pending with attempts + 1; a running task\n" +
					"whose output exists takes the status the output reports. interruption_safe false is\n" +
					"cleared once both files validate.",
				Action: stateAction(stateRecover),
			},
			{
				Name:      "archive",
				Usage:     "move phase.json and execution.json to memory/state/.archive/<workflow_id>_<time>/, keeping 5",
				ArgsUsage: "[DIR]",
				Action:    stateAction(stateArchive),
			},
			{
				Name:      "write",
				Usage:     "validate the document on stdin against FILE's schema and write it atomically",
				ArgsUsage: "FILE",
				Description: "FILE is a phase.json, an execution.json or a .pipeline-state.md. A document that does not\n" +
					"fit is refused (exit 1) and nothing is written.",
				Action: stateAction(stateWrite),
			},
			{
				Name:      "set",
				Usage:     "update memory/state/phase.json: phase, status, output, approval",
				ArgsUsage: "[DIR]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "phase", Usage: "set current_phase to `PHASE` (REQUIREMENTS, ARCHITECTURE, IMPLEMENTATION, VERIFICATION, REFLECTION)"},
					&cli.StringFlag{Name: "status", Usage: "set phase_status to `STATUS` (pending, in_progress, complete, failed); complete records the phase as completed"},
					&cli.StringFlag{Name: "output", Usage: "with --status complete: the phase's output `PATH`"},
					&cli.BoolFlag{Name: "approve", Usage: "record the user's approval of the phase"},
					&cli.StringFlag{Name: "workflow-id", Usage: "create phase.json for workflow `ID` when there is none"},
				},
				Action: stateAction(stateSet),
			},
		},
	}
}

// stateOutput is what a state command prints on success (or, for a blocked
// decision, alongside its error): a JSON document and its text form.
type stateOutput struct {
	doc  any
	text func(w io.Writer)
}

// stateAction prints a command's output; an error with no output is printed
// by run (under --json as the error document).
func stateAction(fn func(*cli.Context) (*stateOutput, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		o := opts(c)
		out, err := fn(c)
		if out != nil {
			if o.JSON {
				if werr := writeJSON(o, out.doc); werr != nil && err == nil {
					err = werr
				}
			} else {
				w := bufio.NewWriter(o.Stdout)
				out.text(w)
				if werr := w.Flush(); werr != nil && err == nil {
					err = werr
				}
			}
		}
		return err
	}
}

// stateError gives the domain's errors their exit codes and hints.
func stateError(err error, dir string) error {
	var se *state.SchemaError
	var pe *state.ParseError
	var ue *state.UsageError
	var oe *state.OutputStatusError
	var ve *state.ValidationError
	switch {
	case errors.As(err, &se):
		var hints []string
		for _, p := range se.Problems[1:] {
			hints = append(hints, "also: "+p)
		}
		hints = append(hints, "nothing was changed; fix the file, or move the state aside and start afresh: rewind state archive "+stateQuote(dir))
		return withHint(withCode(exitFailure, err), hints...)
	case errors.As(err, &pe):
		return withHint(withCode(exitFailure, err), "nothing was changed; fix the file by hand (the README's \"state\" section has the format)")
	case errors.As(err, &ve):
		var hints []string
		for _, f := range ve.Findings[1:] {
			hints = append(hints, "also: "+f.Message)
		}
		return withHint(withCode(exitUsage, err), append(hints, "rewind state check would block this state")...)
	case errors.Is(err, state.ErrInterrupted):
		return withHint(withCode(exitGuard, err), "check both files and clear it first: rewind state recover "+stateQuote(dir))
	case errors.As(err, &ue):
		return withCode(exitUsage, err)
	case errors.Is(err, state.ErrUnknownFile):
		return withCode(exitUsage, err)
	case errors.As(err, &oe):
		return withHint(withCode(exitFailure, err), "nothing was changed; set the task's status yourself with rewind state write")
	case errors.Is(err, state.ErrNoState):
		return withHint(withCode(exitFailure, err), "start one with: rewind state set "+stateQuote(dir)+" --workflow-id ID --phase REQUIREMENTS --status in_progress")
	}
	return err
}

// stateQuote quotes s, when it needs quoting, for a hint that can be pasted
// into a shell.
func stateQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// stateDir is the DIR argument, or the work tree ("." when it is the current
// directory, so the paths printed stay short).
func stateDir(c *cli.Context) (string, error) {
	switch c.NArg() {
	case 0:
		wt := opts(c).WorkTree
		if cwd, err := os.Getwd(); err == nil {
			if real, err := filepath.EvalSymlinks(cwd); err == nil && real == wt {
				return ".", nil
			}
		}
		return wt, nil
	case 1:
		return c.Args().First(), nil
	}
	return "", usageErrorf("%s takes at most one DIR; got %d arguments", commandName(c), c.NArg())
}

// stateLocate resolves DIR, asking which run on a terminal when a project root
// holds several unfinished ones.
func stateLocate(c *cli.Context, dir, only string) (*state.Target, error) {
	o := opts(c)
	t, err := state.Locate(dir, only)
	if err != nil {
		return nil, err
	}
	for _, n := range t.Notes {
		o.warnf("%s", n)
	}
	if len(t.Candidates) < 2 {
		return t, nil
	}
	describe := func(cand state.Candidate) string {
		if cand.Err != nil {
			return "an unreadable state file"
		}
		return fmt.Sprintf("%s at stage %s", cand.Status, orDash(cand.Stage))
	}
	if o.Interactive() && !o.JSON {
		fmt.Fprintf(o.Stderr, "rewind: %d unfinished runs in %s:\n", len(t.Candidates), dir)
		for i, cand := range t.Candidates {
			fmt.Fprintf(o.Stderr, "  %d) %s (%s)\n", i+1, cand.Dir, describe(cand))
		}
		fmt.Fprintf(o.Stderr, "which one? [1-%d] ", len(t.Candidates))
		line, _ := bufio.NewReader(o.Stdin).ReadString('\n')
		n, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || n < 1 || n > len(t.Candidates) {
			return nil, exitErrorf(exitFailure, "no run chosen; nothing was changed")
		}
		return &state.Target{Style: state.StylePlaybook, Dir: t.Candidates[n-1].Dir}, nil
	}
	hints := []string{"pass the feature folder of the run you mean:"}
	for _, cand := range t.Candidates {
		hints = append(hints, fmt.Sprintf("  rewind %s %s   # %s", commandName(c), stateQuote(cand.Dir), describe(cand)))
	}
	return nil, withHint(exitErrorf(exitFailure, "%s holds %d unfinished runs under specs/; which one?", dir, len(t.Candidates)), hints...)
}

type stateFindingJSON struct {
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	Blocking bool   `json:"blocking"`
}

// statePrintFindings lists the findings the reason line has not already said.
func statePrintFindings(w io.Writer, findings []stateFindingJSON, reason string) {
	for _, f := range findings {
		if !strings.Contains(reason, f.Message) {
			fmt.Fprintf(w, "finding: %s\n", f.Message)
		}
	}
}

func stateFindingsJSON(blocking, other []state.Finding) []stateFindingJSON {
	out := []stateFindingJSON{}
	for _, f := range blocking {
		out = append(out, stateFindingJSON{f.Kind, f.Message, true})
	}
	for _, f := range other {
		out = append(out, stateFindingJSON{f.Kind, f.Message, false})
	}
	return out
}

// statePlaybookJSON is `state check` and `state resume` for style 1 (and for a
// directory without any state).
type statePlaybookJSON struct {
	Style              *string            `json:"style"`
	StateFile          *string            `json:"state_file"`
	Decision           string             `json:"decision"`
	Reason             string             `json:"reason"`
	Status             *string            `json:"status"`
	Feature            *string            `json:"feature"`
	PriorStage         *string            `json:"prior_stage"`
	Stage              *string            `json:"stage"`
	Action             *string            `json:"action"`
	Partial            bool               `json:"partial"`
	PendingCheckpoint  *string            `json:"pending_checkpoint"`
	ClearedCheckpoints []string           `json:"cleared_checkpoints"`
	CompletedStages    []string           `json:"completed_stages"`
	ReopenedStages     []string           `json:"reopened_stages"`
	NotesLine          *int               `json:"notes_line"`
	Findings           []stateFindingJSON `json:"findings"`
	Written            *string            `json:"written_file"`
	Note               *string            `json:"note"`
}

func stateNullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func statePlaybookOutput(d *state.PlaybookDecision) *stateOutput {
	doc := statePlaybookJSON{Decision: d.Decision, Reason: d.Reason, Stage: stateNullable(d.Stage), Action: stateNullable(d.Action),
		Partial: d.Partial, PendingCheckpoint: stateNullable(d.Pending), PriorStage: stateNullable(d.PriorStage),
		ClearedCheckpoints: []string{}, CompletedStages: []string{}, ReopenedStages: append([]string{}, d.Reopened...), Findings: stateFindingsJSON(d.Blocking, d.Findings)}
	if p := d.Playbook; p != nil {
		doc.Style, doc.StateFile = stateNullable(state.StylePlaybook), stateNullable(d.File)
		doc.Status, doc.Feature = stateNullable(p.Status()), stateNullable(p.Feature())
		doc.ClearedCheckpoints = append(doc.ClearedCheckpoints, p.ClearedCheckpoints()...)
		for _, e := range p.Completed {
			if e.Done && !slices.Contains(d.Reopened, e.Stage) {
				doc.CompletedStages = append(doc.CompletedStages, e.Stage)
			}
		}
		if p.NotesLine > 0 {
			n := p.NotesLine
			doc.NotesLine = &n
		}
	}
	return &stateOutput{doc: &doc, text: func(w io.Writer) {
		fmt.Fprintf(w, "decision: %s\n", doc.Decision)
		fmt.Fprintf(w, "reason: %s\n", doc.Reason)
		if doc.StateFile == nil {
			return
		}
		fmt.Fprintf(w, "state file: %s\n", *doc.StateFile)
		status := *doc.Status
		if doc.Feature != nil {
			status += " (feature " + *doc.Feature + ")"
		}
		fmt.Fprintf(w, "status: %s\n", status)
		if doc.PriorStage != nil {
			fmt.Fprintf(w, "prior stage: %s\n", *doc.PriorStage)
		}
		if len(doc.CompletedStages) > 0 {
			fmt.Fprintf(w, "completed stages: %s\n", strings.Join(doc.CompletedStages, ", "))
		}
		if doc.PendingCheckpoint != nil {
			fmt.Fprintf(w, "pending checkpoint: %s\n", *doc.PendingCheckpoint)
		}
		if len(doc.ClearedCheckpoints) > 0 {
			fmt.Fprintf(w, "cleared checkpoints: %s (never asked again)\n", strings.Join(doc.ClearedCheckpoints, ", "))
		}
		if doc.Stage != nil && d.Decision != state.DecisionBlocked {
			fmt.Fprintf(w, "stage: %s\n", *doc.Stage)
		}
		if doc.Action != nil {
			kind := ""
			if doc.Partial {
				kind = " (partial: continue, never restart)"
			}
			fmt.Fprintf(w, "action%s: %s\n", kind, *doc.Action)
		}
		statePrintFindings(w, doc.Findings, doc.Reason)
		if doc.Written != nil {
			fmt.Fprintf(w, "wrote %s: %s\n", *doc.Written, *doc.Note)
		}
	}}
}

// statePhaseJSON is `state check` for style 2.
type statePhaseJSON struct {
	Style           string             `json:"style"`
	StateFile       string             `json:"state_file"`
	Decision        string             `json:"decision"`
	Reason          string             `json:"reason"`
	WorkflowID      *string            `json:"workflow_id"`
	StartedAt       *string            `json:"started_at"`
	LastUpdated     *string            `json:"last_updated"`
	CurrentPhase    *string            `json:"current_phase"`
	PhaseStatus     *string            `json:"phase_status"`
	CompletedPhases []string           `json:"completed_phases"`
	Approved        []string           `json:"approved_phases"`
	Phase           *string            `json:"phase"`
	Action          *string            `json:"action"`
	Advanced        []string           `json:"advanced"`
	Tasks           map[string]int     `json:"tasks"`
	Orphaned        []string           `json:"orphaned_tasks"`
	Findings        []stateFindingJSON `json:"findings"`
}

func statePhaseOutput(d *state.PhaseDecision) *stateOutput {
	doc := statePhaseJSON{Style: state.StylePhase, StateFile: d.Store.PhasePath, Decision: d.Decision, Reason: d.Reason,
		Phase: stateNullable(d.Phase), Action: stateNullable(d.Action), CompletedPhases: []string{}, Approved: []string{},
		Advanced: append([]string{}, d.Advanced...), Tasks: d.Tasks, Orphaned: append([]string{}, d.Orphaned...),
		Findings: stateFindingsJSON(d.Blocking, d.Findings)}
	if ph := d.Store.Phase; ph != nil {
		doc.WorkflowID, doc.StartedAt, doc.LastUpdated = stateNullable(ph.WorkflowID), stateNullable(ph.StartedAt), stateNullable(ph.LastUpdated)
		doc.CurrentPhase, doc.PhaseStatus = stateNullable(ph.CurrentPhase), stateNullable(ph.PhaseStatus)
		for _, cp := range ph.CompletedPhases {
			doc.CompletedPhases = append(doc.CompletedPhases, cp.Phase)
		}
		for _, u := range ph.UserCheckpoints {
			doc.Approved = append(doc.Approved, u.Phase)
		}
	}
	return &stateOutput{doc: &doc, text: func(w io.Writer) {
		fmt.Fprintf(w, "decision: %s\n", doc.Decision)
		fmt.Fprintf(w, "reason: %s\n", doc.Reason)
		fmt.Fprintf(w, "state file: %s\n", doc.StateFile)
		if doc.WorkflowID != nil {
			fmt.Fprintf(w, "workflow: %s (started %s, last updated %s)\n", *doc.WorkflowID, *doc.StartedAt, *doc.LastUpdated)
			fmt.Fprintf(w, "current phase: %s (%s)\n", *doc.CurrentPhase, *doc.PhaseStatus)
		}
		if len(doc.CompletedPhases) > 0 {
			fmt.Fprintf(w, "completed phases: %s\n", strings.Join(doc.CompletedPhases, ", "))
		}
		if len(doc.Approved) > 0 {
			fmt.Fprintf(w, "approved: %s\n", strings.Join(doc.Approved, ", "))
		}
		if len(doc.Tasks) > 0 {
			var parts []string
			for _, st := range state.TaskStatuses {
				if n := doc.Tasks[st]; n > 0 {
					parts = append(parts, fmt.Sprintf("%d %s", n, st))
				}
			}
			fmt.Fprintf(w, "tasks: %s\n", strings.Join(parts, ", "))
		}
		if doc.Phase != nil {
			fmt.Fprintf(w, "phase: %s\n", *doc.Phase)
		}
		if doc.Action != nil {
			fmt.Fprintf(w, "action: %s\n", *doc.Action)
		}
		statePrintFindings(w, doc.Findings, doc.Reason)
	}}
}

func stateCheck(c *cli.Context) (*stateOutput, error) {
	o := opts(c)
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	t, err := stateLocate(c, dir, "")
	if err != nil {
		return nil, err
	}
	switch {
	case t.Style == state.StylePhase:
		d, err := state.DecidePhase(t.Dir, state.CheckOptions{Now: o.Now(), AllowStale: c.Bool("allow-stale")})
		if err != nil {
			return nil, stateError(err, t.Dir)
		}
		out := statePhaseOutput(d)
		if d.Decision == state.DecisionBlocked {
			return out, statePhaseBlocked(d, t.Dir)
		}
		if d.Store.Phase != nil && (d.Decision == state.DecisionStartFresh || d.Decision == state.DecisionFresh) {
			o.hintf("archive the old state before starting afresh: rewind state archive %s", stateQuote(t.Dir))
		}
		return out, nil
	case t.Dir == "":
		reason := "no state file in " + dir
		if len(t.Finished) > 0 {
			reason = fmt.Sprintf("no unfinished run in %s (%d finished: %s)", dir, len(t.Finished), strings.Join(t.Finished, ", "))
		}
		return statePlaybookOutput(&state.PlaybookDecision{Decision: state.DecisionFresh, Reason: reason}), nil
	}
	d, err := state.DecidePlaybook(t.Dir)
	if err != nil {
		return nil, stateError(err, t.Dir)
	}
	out := statePlaybookOutput(d)
	if d.Decision == state.DecisionBlocked {
		return out, statePlaybookBlocked(d)
	}
	return out, nil
}

func statePlaybookBlocked(d *state.PlaybookDecision) error {
	return withHint(exitErrorf(exitGuard, "blocked: %s", d.Reason),
		"once a human has reviewed the spec, record its hash as spec_hash in "+d.File+": sha256sum "+stateQuote(filepath.Join(filepath.Dir(d.File), state.SpecFile)))
}

func statePhaseBlocked(d *state.PhaseDecision, dir string) error {
	var hints []string
	kinds := map[string]bool{}
	for _, f := range d.Blocking {
		kinds[f.Kind] = true
	}
	if kinds["interrupted_write"] {
		hints = append(hints, "rewind state recover "+stateQuote(dir)+" checks both files and clears it")
	}
	if kinds["stale"] {
		hints = append(hints, "to resume anyway, proceed with caution: rewind state check "+stateQuote(dir)+" --allow-stale")
	}
	if kinds["output_missing"] {
		hints = append(hints, "bring the missing output back (from a checkpoint: rewind checkpoint restore REF --file PATH)")
	}
	archive := "archive the state and start afresh: rewind state archive " + stateQuote(dir)
	if len(hints) > 0 {
		archive = "or " + archive
	}
	hints = append(hints, archive)
	return withHint(exitErrorf(exitGuard, "blocked: %s", d.Reason), hints...)
}

func stateResume(c *cli.Context) (*stateOutput, error) {
	o := opts(c)
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	t, err := stateLocate(c, dir, state.StylePlaybook)
	if err != nil {
		return nil, err
	}
	if t.Dir == "" {
		hint := "start a new run"
		if isDir(filepath.Join(dir, "memory", "state")) || filepath.Base(dir) == "state" {
			hint = "state resume applies the playbook's decision to .pipeline-state.md; for memory/state use rewind state recover " +
				stateQuote(dir) + ", then rewind state set " + stateQuote(dir) + " --phase P --status in_progress"
		}
		return nil, withHint(exitErrorf(exitFailure, "nothing to resume: no unfinished %s in %s", state.PlaybookFile, dir), hint)
	}
	d, err := state.DecidePlaybook(t.Dir)
	if err != nil {
		return nil, stateError(err, t.Dir)
	}
	switch d.Decision {
	case state.DecisionBlocked:
		// --json prints the decision, as check does (written_file and note null);
		// the text form says it all on stderr.
		if o.JSON {
			return statePlaybookOutput(d), statePlaybookBlocked(d)
		}
		return nil, statePlaybookBlocked(d)
	case state.DecisionWaitingForHuman:
		return nil, withHint(exitErrorf(exitFailure, "not resumed: human checkpoint %q is pending", d.Pending),
			"present it; once approved, mark it cleared in "+d.File+" (- [x] "+d.Pending+") and run this again")
	case state.DecisionFresh, state.DecisionStartFresh:
		return nil, withHint(exitErrorf(exitFailure, "not resumed: %s", d.Reason), "start a new run")
	}
	now := o.Now()
	if err := state.Resume(d, now); err != nil {
		return nil, err
	}
	out := statePlaybookOutput(d)
	doc := out.doc.(*statePlaybookJSON)
	doc.Written, doc.Note = stateNullable(d.File), stateNullable(state.ResumeNote(now, d.PriorStage))
	return out, nil
}

type stateRecoverJSON struct {
	StateDir           string            `json:"state_dir"`
	Repairs            []stateRepairJSON `json:"repairs"`
	ClearedInterrupted bool              `json:"cleared_interrupted"`
	Written            []string          `json:"written_files"`
}

type stateRepairJSON struct {
	Task     string `json:"task"`
	From     string `json:"from"`
	To       string `json:"to"`
	Attempts int64  `json:"attempts"`
	Why      string `json:"why"`
}

// statePhaseRoot is DIR as a style-2 project root.
func statePhaseRoot(c *cli.Context) (string, error) {
	dir, err := stateDir(c)
	if err != nil {
		return "", err
	}
	abs, _ := filepath.Abs(dir)
	if filepath.Base(abs) == "state" && filepath.Base(filepath.Dir(abs)) == "memory" {
		return filepath.Join(dir, "..", ".."), nil
	}
	if !isDir(dir) {
		return "", fmt.Errorf("%s: not a directory", dir)
	}
	return dir, nil
}

func stateRecover(c *cli.Context) (*stateOutput, error) {
	o := opts(c)
	root, err := statePhaseRoot(c)
	if err != nil {
		return nil, err
	}
	res, err := state.Recover(root, o.Now())
	if errors.Is(err, state.ErrNoState) {
		return nil, withHint(withCode(exitFailure, err), "there is no memory/state/phase.json or execution.json in "+root+": nothing to recover")
	}
	if err != nil {
		return nil, stateError(err, root)
	}
	doc := stateRecoverJSON{StateDir: state.StateDirOf(root), Repairs: []stateRepairJSON{}, ClearedInterrupted: res.ClearedInterrupted, Written: []string{}}
	for _, r := range res.Repairs {
		doc.Repairs = append(doc.Repairs, stateRepairJSON{r.ID, r.From, r.To, r.Attempts, r.Why})
	}
	if len(res.Repairs) > 0 {
		doc.Written = append(doc.Written, res.Store.ExecPath)
	}
	if res.Changed() && res.Store.Phase != nil {
		doc.Written = append(doc.Written, res.Store.PhasePath)
	}
	return &stateOutput{doc: &doc, text: func(w io.Writer) {
		if !res.Changed() {
			fmt.Fprintf(w, "nothing to recover in %s\n", doc.StateDir)
			return
		}
		for _, r := range doc.Repairs {
			fmt.Fprintf(w, "task %s: %s -> %s (attempts %d): %s\n", r.Task, r.From, r.To, r.Attempts, r.Why)
		}
		if doc.ClearedInterrupted {
			fmt.Fprintf(w, "interruption_safe: false -> true (an interrupted update; both files validate)\n")
		}
		fmt.Fprintf(w, "wrote %s\n", strings.Join(doc.Written, ", "))
	}}, nil
}

func stateArchive(c *cli.Context) (*stateOutput, error) {
	o := opts(c)
	root, err := statePhaseRoot(c)
	if err != nil {
		return nil, err
	}
	res, err := state.Archive(root, o.Now(), state.ArchiveKeep)
	if res == nil && err != nil {
		if errors.Is(err, state.ErrNoState) {
			return nil, withHint(withCode(exitFailure, err), "there is no memory/state/phase.json or execution.json to archive")
		}
		return nil, err
	}
	doc := struct {
		Archive string   `json:"archive"`
		Files   []string `json:"files"`
		Removed []string `json:"removed"`
	}{res.Dir, res.Files, append([]string{}, res.Removed...)}
	return &stateOutput{doc: &doc, text: func(w io.Writer) {
		fmt.Fprintf(w, "archived %s to %s\n", strings.Join(doc.Files, ", "), doc.Archive)
		for _, r := range doc.Removed {
			fmt.Fprintf(w, "removed the old archive %s (keeping the newest %d)\n", r, state.ArchiveKeep)
		}
	}}, err
}

// stateMaxDocument bounds what state write reads from stdin.
const stateMaxDocument = 4 << 20

func stateWrite(c *cli.Context) (*stateOutput, error) {
	o := opts(c)
	file, err := oneArg(c, "FILE")
	if err != nil {
		return nil, err
	}
	if isTerminal(o.Stdin) {
		return nil, withHint(usageErrorf("state write reads the new document on stdin, which is a terminal"),
			"pipe it in: rewind state write "+stateQuote(file)+" < new.json")
	}
	data, err := io.ReadAll(io.LimitReader(o.Stdin, stateMaxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	if len(data) > stateMaxDocument {
		return nil, exitErrorf(exitFailure, "the document on stdin is over %d bytes: not a state file; nothing written", stateMaxDocument)
	}
	if err := state.WriteDocument(file, data, o.Now()); err != nil {
		var se *state.SchemaError
		if errors.As(err, &se) {
			var hints []string
			for _, p := range se.Problems[1:] {
				hints = append(hints, "also: "+p)
			}
			return nil, withHint(withCode(exitFailure, err), append(hints, "nothing was written; "+file+" is as it was")...)
		}
		var pe *state.ParseError
		if errors.As(err, &pe) {
			return nil, withHint(withCode(exitFailure, err), "nothing was written; "+file+" is as it was")
		}
		return nil, stateError(err, filepath.Dir(file))
	}
	doc := struct {
		File string `json:"file"`
	}{file}
	return &stateOutput{doc: &doc, text: func(w io.Writer) { fmt.Fprintf(w, "wrote %s\n", file) }}, nil
}

func stateSet(c *cli.Context) (*stateOutput, error) {
	o := opts(c)
	root, err := statePhaseRoot(c)
	if err != nil {
		return nil, err
	}
	if !c.IsSet("phase") && !c.IsSet("status") && !c.Bool("approve") && !c.IsSet("workflow-id") && !c.IsSet("output") {
		return nil, usageErrorf("state set needs --phase, --status, --approve or --workflow-id")
	}
	p, err := state.Set(root, state.SetOptions{Phase: c.String("phase"), Status: c.String("status"), Output: c.String("output"),
		Approve: c.Bool("approve"), WorkflowID: c.String("workflow-id"), Now: o.Now()})
	if err != nil {
		return nil, stateError(err, root)
	}
	file := filepath.Join(state.StateDirOf(root), state.PhaseFile)
	doc := struct {
		File            string   `json:"file"`
		WorkflowID      string   `json:"workflow_id"`
		CurrentPhase    string   `json:"current_phase"`
		PhaseStatus     string   `json:"phase_status"`
		CompletedPhases []string `json:"completed_phases"`
		LastUpdated     string   `json:"last_updated"`
	}{File: file, WorkflowID: p.WorkflowID, CurrentPhase: p.CurrentPhase, PhaseStatus: p.PhaseStatus, CompletedPhases: []string{}, LastUpdated: p.LastUpdated}
	for _, cp := range p.CompletedPhases {
		doc.CompletedPhases = append(doc.CompletedPhases, cp.Phase)
	}
	return &stateOutput{doc: &doc, text: func(w io.Writer) {
		completed := "none"
		if len(doc.CompletedPhases) > 0 {
			completed = strings.Join(doc.CompletedPhases, ", ")
		}
		fmt.Fprintf(w, "wrote %s: workflow %s, %s %s (completed: %s)\n", file, doc.WorkflowID, doc.CurrentPhase, doc.PhaseStatus, completed)
	}}, nil
}
