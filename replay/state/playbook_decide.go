package state

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The decisions rewind state check prints, for both styles.
const (
	DecisionFresh           = "fresh"             // nothing to resume: start a new run
	DecisionStartFresh      = "start-fresh"       // the run failed: never resume it, start again
	DecisionBlocked         = "blocked"           // a fail-closed guard: a human must look first
	DecisionWaitingForHuman = "waiting-for-human" // a human checkpoint is pending
	DecisionResume          = "resume"            // continue at Stage (style 1) or Phase (style 2)
)

// SpecFile is the feature's spec, whose SHA-256 the state records as spec_hash.
const SpecFile = "feature.spec.md"

// StageAction is what the playbook's table says to do when resuming at a stage.
type StageAction struct {
	Idempotent bool // false: partial, continue and never restart
	Action     string
}

// stageActions is the playbook's "Resume Rules by Stage" table.
var stageActions = map[string]StageAction{
	"spec":        {true, "Re-dispatch the Spec Agent with the existing spec as input; tell it to continue, not restart."},
	"clarify":     {true, "Re-dispatch the Spec Agent in clarify mode with the existing [NEEDS CLARIFICATION] markers."},
	"architect":   {true, "Re-dispatch the Architect Agent with the existing research.md and constitution.md."},
	"tasks":       {true, "Regenerate tasks.md from the ADR (safe to overwrite)."},
	"tdd":         {true, "Re-dispatch the TDD Agent with the existing partial test file, if there is one."},
	"programmer":  {false, "Re-dispatch the Programmer with all existing code as context: continue from the failing tests, never restart."},
	"testrunner":  {true, "Re-run the test runner (pure reporting, no state)."},
	"code-review": {true, "Re-dispatch the code review (read-only)."},
	"security":    {true, "Re-dispatch the security review (read-only)."},
	"refactor":    {true, "Re-dispatch the refactor with the same code review findings."},
}

// ActionFor is the resume action of stage.
func ActionFor(stage string) StageAction { return stageActions[stage] }

// actionAllDone is the action when every stage's artifact is present.
const actionAllDone = "Every stage is done: record the run as COMPLETE."

// defaultArtifacts are the files the playbook names for a stage, relative to the
// feature folder: what an in-progress stage leaves when it has produced its
// artifact. Stages without one are judged only by an artifact their Completed
// Stages line names.
var defaultArtifacts = map[string]string{
	"spec":      SpecFile,
	"clarify":   SpecFile,
	"architect": "adr.md",
	"tasks":     "tasks.md",
}

// Finding is one thing a validation found, for the report.
type Finding struct {
	Kind    string // a stable snake_case name
	Message string
}

// PlaybookDecision is what rewind state check decides for a playbook run.
type PlaybookDecision struct {
	Decision   string
	File       string // the state file; "" when there is none
	Playbook   *Playbook
	Reason     string // one line: why this decision
	PriorStage string // current_stage as the file records it
	Stage      string // where to resume ("" for fresh/start-fresh/blocked, and when every stage is done)
	Action     string
	Partial    bool   // the stage is not idempotent: continue, never restart
	Pending    string // the pending human checkpoint (waiting-for-human)
	Findings   []Finding
	Blocking   []Finding // what makes the decision blocked
	Reopened   []string  // completed stages the validations made incomplete again

	// What Resume writes besides the note and Reopened: a stage to record as
	// done (an in-progress stage whose artifact is complete), and its artifact.
	advanced      string
	advancedPath  string
	allStagesDone bool
}

// LoadPlaybook reads and parses the state file in featureDir; (nil, nil) when
// there is none.
func LoadPlaybook(featureDir string) (*Playbook, string, error) {
	file := filepath.Join(featureDir, PlaybookFile)
	data, err := readState(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, file, nil
	}
	if err != nil {
		return nil, file, err
	}
	p, err := ParsePlaybook(file, data)
	return p, file, err
}

func readState(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &ParseError{File: file, Msg: "not a regular file"}
	}
	if fi.Size() > maxStateSize {
		return nil, &ParseError{File: file, Msg: fmt.Sprintf("%d bytes: too large for a state file", fi.Size())}
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return buf.Bytes(), nil
}

// DecidePlaybook applies the recovery playbook to the run in featureDir: its
// status (Step 1), its validations (Step 2) and its decision tree (Step 3).
//
// Where the playbook leaves room, the rules are: a relative artifact path is
// taken from the feature folder, else from the project root above specs/; the
// earliest completed stage whose artifact is gone becomes the resume stage; an
// in-progress stage advances once when its artifact is complete (see
// artifactComplete); spec_hash may be empty only while the run is at its spec
// stage; WAITING_FOR_HUMAN with every checkpoint cleared resumes.
func DecidePlaybook(featureDir string) (*PlaybookDecision, error) {
	p, file, err := LoadPlaybook(featureDir)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return &PlaybookDecision{Decision: DecisionFresh, Reason: "no " + PlaybookFile + " in " + featureDir}, nil
	}
	d := &PlaybookDecision{File: file, Playbook: p, PriorStage: p.CurrentStage()}
	switch st := p.Status(); st {
	case StatusComplete, StatusCancelled:
		d.Decision, d.Reason = DecisionFresh, "the run is "+st+": nothing to resume"
		return d, nil
	case StatusFailed:
		d.Decision, d.Reason = DecisionStartFresh, "the run FAILED: it is never resumed; start a new run"
		if p.NotesLine > 0 {
			d.Reason += fmt.Sprintf(" and read the failed run's Notes (%s:%d) for context", file, p.NotesLine)
		}
		return d, nil
	}

	if d.PriorStage == "" {
		return nil, &ParseError{File: file, Line: 0, Msg: "no current_stage in the header of an unfinished run (" + p.Status() + ")"}
	}
	if blocked := checkSpecHash(featureDir, p); blocked != nil {
		d.Decision, d.Reason = DecisionBlocked, blocked.Message
		d.Blocking = append(d.Blocking, *blocked)
		return d, nil
	}

	d.decideStage(featureDir)

	if p.Status() == StatusWaitingForHuman {
		if pending := p.PendingCheckpoint(); pending != "" {
			d.Decision, d.Pending = DecisionWaitingForHuman, pending
			d.Reason = fmt.Sprintf("human checkpoint %q is pending: present it and wait for approval, then %s", pending, orAllDone(d.Stage))
			return d, nil
		}
		d.Findings = append(d.Findings, Finding{"no_pending_checkpoint", "the status is WAITING_FOR_HUMAN but every human checkpoint is cleared"})
	}
	// A run is never recorded COMPLETE past a pending human checkpoint (the
	// release approval sits at the end of the Human Checkpoints), whatever its
	// status says.
	if d.allStagesDone {
		if pending := p.PendingCheckpoint(); pending != "" {
			d.Decision, d.Pending = DecisionWaitingForHuman, pending
			d.Reason = fmt.Sprintf("every stage is done, but human checkpoint %q is pending: present it and wait for approval, then %s", pending, orAllDone(d.Stage))
			return d, nil
		}
	}
	d.Decision = DecisionResume
	if d.allStagesDone {
		d.Reason = "every stage's artifact is present"
		d.Action = actionAllDone
	} else {
		a := ActionFor(d.Stage)
		d.Action, d.Partial = a.Action, !a.Idempotent
		d.Reason = "continue at stage " + d.Stage
	}
	return d, nil
}

// orAllDone is what follows an approval: the stage to continue at, or the
// run's completion when every stage is done.
func orAllDone(stage string) string {
	if stage == "" {
		return "record the run as COMPLETE"
	}
	return "continue at stage " + stage
}

// checkSpecHash is the playbook's first validation: the spec must hash to
// spec_hash, or a human reviews it before anything resumes.
func checkSpecHash(featureDir string, p *Playbook) *Finding {
	want := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(p.SpecHash()), "sha256:"))
	spec := filepath.Join(featureDir, SpecFile)
	if want == "" {
		if p.CurrentStage() == "spec" {
			return nil // the spec is still being written: nothing to compare yet
		}
		return &Finding{"spec_hash_missing", "the state records no spec_hash, so an edited spec cannot be told apart: a human must review before resuming"}
	}
	if len(want) != 64 || strings.Trim(want, "0123456789abcdef") != "" {
		return &Finding{"spec_hash_invalid", fmt.Sprintf("spec_hash %q is not a SHA-256 (64 hex digits): a human must review before resuming", clip(p.SpecHash()))}
	}
	data, err := os.ReadFile(spec)
	if err != nil {
		return &Finding{"spec_missing", fmt.Sprintf("cannot read %s to compare with spec_hash: %v", spec, unwrapPath(err))}
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return &Finding{"spec_changed", fmt.Sprintf("%s changed since the state was written (sha256 %s, spec_hash %s): a human must review it before resuming", spec, got[:12], want[:12])}
	}
	return nil
}

// unwrapPath drops the path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// decideStage applies the artifact validations to find the resume stage.
func (d *PlaybookDecision) decideStage(featureDir string) {
	p := d.Playbook
	stage := d.PriorStage
	// Completed stages whose artifact is gone are incomplete again; the earliest
	// of them is where the run resumes.
	for _, e := range p.Completed {
		if !e.Done || e.Artifact == "" {
			continue
		}
		if _, ok := resolveArtifact(featureDir, e.Artifact); ok {
			continue
		}
		d.Reopened = append(d.Reopened, e.Stage)
		d.Findings = append(d.Findings, Finding{"artifact_missing", fmt.Sprintf("stage %s: its artifact %s is missing, so the stage is incomplete again", e.Stage, e.Artifact)})
		if StageIndex(e.Stage) < StageIndex(stage) {
			stage = e.Stage
		}
	}
	// An in-progress stage whose artifact exists and looks complete is done.
	if stage == d.PriorStage {
		if path, rel, ok := d.inProgressArtifact(featureDir, stage); ok {
			if complete, why := artifactComplete(stage, path); complete {
				d.Findings = append(d.Findings, Finding{"stage_advanced", fmt.Sprintf("stage %s: its artifact %s is complete, so the stage is done", stage, rel)})
				d.advanced, d.advancedPath = stage, rel
				if next := StageIndex(stage) + 1; next < len(Stages) {
					stage = Stages[next]
				} else {
					stage, d.allStagesDone = "", true
				}
			} else if why != "" {
				d.Findings = append(d.Findings, Finding{"stage_partial", fmt.Sprintf("stage %s: its artifact %s is partial (%s)", stage, rel, why)})
			}
		}
	}
	// At or after architect, the ADR must hold a completed Constitution Check.
	if stage == "" || StageIndex(stage) > StageIndex("architect") {
		adr := filepath.Join(featureDir, "adr.md")
		for _, e := range p.Completed {
			if e.Stage == "architect" && e.Artifact != "" {
				if path, ok := resolveArtifact(featureDir, e.Artifact); ok {
					adr = path
				}
			}
		}
		if ok, why := constitutionCheckComplete(adr); !ok {
			d.Findings = append(d.Findings, Finding{"constitution_check_missing", fmt.Sprintf("%s: %s, so the architect stage runs again", adr, why)})
			stage, d.allStagesDone = "architect", false
			if d.advanced != "" && StageIndex(d.advanced) >= StageIndex("architect") {
				d.advanced = ""
			}
			if !contains(d.Reopened, "architect") {
				d.Reopened = append(d.Reopened, "architect")
			}
		}
	}
	d.Stage = stage
}

// inProgressArtifact is the artifact of the stage in progress: the one its
// Completed Stages line names, else the playbook's file for the stage.
func (d *PlaybookDecision) inProgressArtifact(featureDir, stage string) (path, rel string, ok bool) {
	for _, e := range d.Playbook.Completed {
		if e.Stage == stage && e.Artifact != "" {
			path, ok = resolveArtifact(featureDir, e.Artifact)
			return path, e.Artifact, ok
		}
	}
	rel = defaultArtifacts[stage]
	if rel == "" {
		return "", "", false
	}
	path, ok = resolveArtifact(featureDir, rel)
	return path, rel, ok
}

// resolveArtifact finds an artifact path: absolute as it is; relative, from the
// feature folder, else from the project root when the folder is
// <root>/specs/<feature>/.
func resolveArtifact(featureDir, artifact string) (string, bool) {
	if filepath.IsAbs(artifact) {
		return artifact, exists(artifact)
	}
	first := filepath.Join(featureDir, artifact)
	if exists(first) {
		return first, true
	}
	abs, err := filepath.Abs(featureDir)
	if err == nil && filepath.Base(filepath.Dir(abs)) == "specs" {
		root := filepath.Join(featureDir, "..", "..")
		if p := filepath.Join(root, artifact); exists(p) {
			return p, true
		}
	}
	return first, false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// artifactComplete says whether an in-progress stage's artifact looks
// complete: a non-empty file, and for the spec stages no [NEEDS CLARIFICATION]
// marker left (clarify) and for architect a completed Constitution Check. The
// reason is "" when the artifact is simply empty or unreadable.
func artifactComplete(stage, path string) (bool, string) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, ""
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		return err == nil && len(entries) > 0, ""
	}
	data, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return false, "empty"
	}
	switch stage {
	case "clarify":
		if bytes.Contains(data, []byte("[NEEDS CLARIFICATION")) {
			return false, "[NEEDS CLARIFICATION] markers remain"
		}
	case "architect":
		if ok, why := constitutionCheckComplete(path); !ok {
			return false, why
		}
	}
	return true, ""
}

var (
	headingRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(#{1,6})\s+(.*)$`) })
	tableSepRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$`) })
	pendingCell = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)^(\[ \]|todo|tbd|pending|\?+|…|\.\.\.|-|—)$`)
	})
)

// constitutionCheckComplete reads an ADR for a completed Constitution Check
// table: a heading that names it, then a Markdown table with at least one row,
// none of whose cells is empty or a placeholder ([ ], TODO, TBD, pending, ?,
// ..., -).
func constitutionCheckComplete(adr string) (bool, string) {
	data, err := os.ReadFile(adr)
	if err != nil {
		return false, "no ADR to hold the Constitution Check"
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxStateSize)
	level := 0 // the level of the Constitution Check heading, once found
	var rows [][]string
	sawSep := false
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if m := headingRE().FindStringSubmatch(l); m != nil {
			if level > 0 && len(m[1]) <= level {
				break
			}
			if level == 0 && strings.Contains(strings.ToLower(m[2]), "constitution check") {
				level = len(m[1])
			}
			continue
		}
		if level == 0 || !strings.HasPrefix(l, "|") {
			if level > 0 && sawSep && l != "" {
				break // the table ended
			}
			continue
		}
		if tableSepRE().MatchString(l) {
			sawSep = true
			continue
		}
		if sawSep {
			rows = append(rows, splitRow(l))
		}
	}
	switch {
	case level == 0:
		return false, "no Constitution Check section"
	case !sawSep:
		return false, "no Constitution Check table"
	case len(rows) == 0:
		return false, "the Constitution Check table has no rows"
	}
	for i, r := range rows {
		for _, cell := range r {
			if cell == "" || pendingCell().MatchString(cell) {
				return false, fmt.Sprintf("row %d of the Constitution Check table is not filled in", i+1)
			}
		}
	}
	return true, ""
}

func splitRow(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	cells := strings.Split(l, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// ResumeNote is the note Resume adds, as the playbook words it.
func ResumeNote(now time.Time, priorStage string) string {
	return fmt.Sprintf("Resumed from checkpoint at %s. Prior session ended at stage: %s.", now.UTC().Format(time.RFC3339), priorStage)
}

// ErrNotResumable is a Resume of a decision other than resume.
var ErrNotResumable = errors.New("nothing to resume")

// Resume applies a resume decision to its state file: the stages whose
// artifacts are gone are unchecked, a stage found complete is checked,
// current_stage becomes the resume stage and status IN_PROGRESS (COMPLETE when
// every stage is done), last_updated_at becomes now, and the playbook's note is
// added to Notes. The file is written atomically; its other lines are kept as
// they were.
func Resume(d *PlaybookDecision, now time.Time) error {
	if d.Decision != DecisionResume {
		return fmt.Errorf("%s: %w (the decision is %s)", d.File, ErrNotResumable, d.Decision)
	}
	p := d.Playbook
	for _, st := range d.Reopened {
		for _, e := range p.Completed {
			if e.Stage == st && e.Done {
				p.setStageDone(st, "", false)
			}
		}
	}
	if d.advanced != "" {
		p.setStageDone(d.advanced, d.advancedPath, true)
	}
	ts := now.UTC().Format(time.RFC3339)
	if d.allStagesDone {
		p.setHeader("status", StatusComplete)
	} else {
		p.setHeader("status", StatusInProgress)
		p.setHeader("current_stage", d.Stage)
	}
	p.setHeader("last_updated_at", ts)
	p.addNote(ResumeNote(now, d.PriorStage))
	return writeFileAtomic(d.File, p.Bytes())
}
