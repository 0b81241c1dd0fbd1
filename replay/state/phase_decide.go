package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoState is an operation that needs style-2 state where there is none.
var ErrNoState = errors.New("no state")

// MaxAge is how old a workflow may be (by started_at) before check calls its
// state stale: the skill's "ancient state file".
const MaxAge = 7 * 24 * time.Hour

// PhaseStore is the style-2 state of one project: memory/state/ under Root.
type PhaseStore struct {
	Root      string
	PhasePath string
	ExecPath  string
	Phase     *PhaseState // nil when phase.json is absent
	Exec      *Execution  // nil when execution.json is absent
}

// StateDirOf is memory/state under root.
func StateDirOf(root string) string { return filepath.Join(root, filepath.FromSlash(StateDir)) }

// LoadPhaseStore reads both files of root's state; a file that is there but
// does not fit its schema is an error (*SchemaError).
func LoadPhaseStore(root string) (*PhaseStore, error) {
	dir := StateDirOf(root)
	s := &PhaseStore{Root: root, PhasePath: filepath.Join(dir, PhaseFile), ExecPath: filepath.Join(dir, ExecutionFile)}
	data, err := readState(s.PhasePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if s.Phase, err = ParsePhase(s.PhasePath, data); err != nil {
			return nil, err
		}
	}
	data, err = readState(s.ExecPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if s.Exec, err = ParseExecution(s.ExecPath, data); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// resolve is a path a state file names: absolute as it is, else from the
// project root.
func (s *PhaseStore) resolve(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.Root, filepath.FromSlash(p))
}

// PhaseDecision is what rewind state check decides for style-2 state.
type PhaseDecision struct {
	Decision string
	Store    *PhaseStore
	Reason   string
	Phase    string   // the phase to resume in ("" unless resume)
	Action   string   // what to do there
	Advanced []string // phases whose output was found, so they count as done
	Findings []Finding
	Blocking []Finding // the validation failures that make the decision blocked
	Tasks    map[string]int
	Orphaned []string // running tasks an interrupted session left (recover repairs them)
}

// CheckOptions are the knobs of DecidePhase.
type CheckOptions struct {
	Now        time.Time
	AllowStale bool // a workflow older than MaxAge is a warning, not a block
}

// The reports the per-phase resume logic looks for, under the project root.
const (
	demandReport       = "memory/reports/demand.json"
	designsDir         = "memory/reports/designs"
	finalDesignReport  = "memory/reports/final_design.json"
	verificationReport = "memory/reports/verification.json"
)

var reflectionReports = []string{"memory/reports/reflection.json", "memory/reports/reflection.md"}

// DecidePhase validates root's style-2 state (the skill's Step 2) and decides
// where to resume by its per-phase logic (Step 3).
//
// Where the skill leaves room, the rules are: only a workflow whose phase is
// failed is started afresh; one whose current phase is pending or already
// complete resumes too (the skill's own "advance current_phase, set
// phase_status = complete" leaves exactly that state between phases, and
// starting afresh there would throw the finished phases away); a phase whose
// report is there counts as done and the logic goes on with the next; a
// workflow whose reflection is written is complete (fresh).
func DecidePhase(root string, opt CheckOptions) (*PhaseDecision, error) {
	s, err := LoadPhaseStore(root)
	if err != nil {
		return nil, err
	}
	d := &PhaseDecision{Store: s, Tasks: map[string]int{}}
	if s.Exec != nil {
		for _, t := range s.Exec.Tasks {
			d.Tasks[t.Status]++
			if t.Status == "running" {
				d.Orphaned = append(d.Orphaned, t.ID)
			}
		}
	}
	ph := s.Phase
	if ph == nil {
		if s.Exec != nil {
			d.Decision = DecisionBlocked
			d.Blocking = append(d.Blocking, Finding{"phase_missing", fmt.Sprintf("%s has no %s beside it (an interrupted archive?)", s.ExecPath, PhaseFile)})
			d.Reason = d.Blocking[0].Message
			return d, nil
		}
		d.Decision, d.Reason = DecisionFresh, "no "+s.PhasePath
		return d, nil
	}
	if ph.complete() {
		d.Decision, d.Reason = DecisionFresh, "workflow "+ph.WorkflowID+" is complete (REFLECTION done): nothing to resume"
		return d, nil
	}
	if ph.PhaseStatus == "failed" {
		d.Decision, d.Reason = DecisionStartFresh, fmt.Sprintf("workflow %s failed in %s: it is not resumed; archive it and start afresh", ph.WorkflowID, ph.CurrentPhase)
		return d, nil
	}

	d.validate(opt)
	if len(d.Blocking) > 0 {
		d.Decision = DecisionBlocked
		d.Reason = "the state does not validate: " + d.Blocking[0].Message
		if n := len(d.Blocking) - 1; n > 0 {
			d.Reason += fmt.Sprintf(" (and %d more)", n)
		}
		return d, nil
	}
	d.decidePhase()
	return d, nil
}

// complete reports whether the workflow's last phase is done.
func (s *PhaseState) complete() bool {
	for _, c := range s.CompletedPhases {
		if c.Phase == Phases[len(Phases)-1] {
			return true
		}
	}
	return false
}

func (s *PhaseState) completedSet() map[string]bool {
	m := map[string]bool{}
	for _, c := range s.CompletedPhases {
		m[c.Phase] = true
	}
	return m
}

// progression checks that the completed phases are the first phases in order,
// each once, and that the current phase is the one after them (or the last of
// them, marked complete); approvals may only name phases reached.
func (s *PhaseState) progression() []string {
	var problems []string
	for i, c := range s.CompletedPhases {
		if i >= len(Phases) || c.Phase != Phases[i] {
			want := "nothing more"
			if i < len(Phases) {
				want = Phases[i]
			}
			problems = append(problems, fmt.Sprintf("completed_phases[%d] is %s where the phase order needs %s", i, c.Phase, want))
			break
		}
	}
	k, cur := len(s.CompletedPhases), PhaseIndex(s.CurrentPhase)
	if len(problems) == 0 && cur != k && !(cur == k-1 && s.PhaseStatus == "complete") {
		switch {
		case cur < k:
			problems = append(problems, fmt.Sprintf("current_phase %s is already in completed_phases but phase_status is %s", s.CurrentPhase, s.PhaseStatus))
		default:
			problems = append(problems, fmt.Sprintf("current_phase %s skips %s, which is not in completed_phases", s.CurrentPhase, Phases[k]))
		}
	}
	for i, u := range s.UserCheckpoints {
		if PhaseIndex(u.Phase) > cur {
			problems = append(problems, fmt.Sprintf("user_checkpoints[%d] approves %s, which the workflow has not reached", i, u.Phase))
		}
	}
	return problems
}

// validate is the skill's Step 2: outputs exist, timestamps are neither in the
// future nor too old, the phases progress in order, and the last write was not
// interrupted.
func (d *PhaseDecision) validate(opt CheckOptions) {
	s, ph := d.Store, d.Store.Phase
	block := func(kind, format string, a ...any) {
		d.Blocking = append(d.Blocking, Finding{kind, fmt.Sprintf(format, a...)})
	}
	if !ph.InterruptionSafe {
		block("interrupted_write", "interruption_safe is false: an update of the state was interrupted")
	}
	for _, c := range ph.CompletedPhases {
		if c.Output != "" && !exists(s.resolve(c.Output)) {
			block("output_missing", "the %s output %s is missing", c.Phase, c.Output)
		}
	}
	for _, p := range ph.progression() {
		block("phase_progression", "%s", p)
	}
	if s.Exec != nil && s.Exec.WorkflowID != "" && s.Exec.WorkflowID != ph.WorkflowID {
		block("workflow_mismatch", "%s belongs to workflow %s, %s to %s", s.ExecPath, s.Exec.WorkflowID, s.PhasePath, ph.WorkflowID)
	}

	type stamp struct{ where, value string }
	stamps := []stamp{{"started_at", ph.StartedAt}, {"last_updated", ph.LastUpdated}}
	for i, c := range ph.CompletedPhases {
		stamps = append(stamps, stamp{fmt.Sprintf("completed_phases[%d].completed_at", i), c.CompletedAt})
	}
	for i, u := range ph.UserCheckpoints {
		stamps = append(stamps, stamp{fmt.Sprintf("user_checkpoints[%d].approved_at", i), u.ApprovedAt})
	}
	if s.Exec != nil {
		stamps = append(stamps, stamp{ExecutionFile + " last_updated", s.Exec.LastUpdated})
		for _, t := range s.Exec.Tasks {
			stamps = append(stamps, stamp{"task " + t.ID + " started_at", t.StartedAt}, stamp{"task " + t.ID + " completed_at", t.CompletedAt})
		}
	}
	for _, st := range stamps {
		if st.value == "" {
			continue
		}
		t, _ := ParseTime(st.value) // the schema check read them all
		if t.After(opt.Now) {
			block("timestamp_in_future", "%s %s is in the future (now is %s)", st.where, st.value, opt.Now.UTC().Format(time.RFC3339))
		}
	}
	started, _ := ParseTime(ph.StartedAt)
	if updated, _ := ParseTime(ph.LastUpdated); updated.Before(started) {
		block("timestamp_order", "last_updated %s is before started_at %s", ph.LastUpdated, ph.StartedAt)
	}
	if age := opt.Now.Sub(started); age > MaxAge {
		msg := fmt.Sprintf("the workflow started %s, %d days ago: the state is stale", ph.StartedAt, int(age/(24*time.Hour)))
		if opt.AllowStale {
			d.Findings = append(d.Findings, Finding{"stale", msg + " (allowed by --allow-stale: proceed with caution)"})
		} else {
			block("stale", "%s", msg)
		}
	}
}

// decidePhase is the skill's per-phase resume logic, from the first phase not
// yet done.
func (d *PhaseDecision) decidePhase() {
	s, ph := d.Store, d.Store.Phase
	phase := ph.CurrentPhase
	if ph.completedSet()[phase] {
		phase = Phases[PhaseIndex(phase)+1] // complete() ruled out the last phase
	}
	advance := func(why string) bool {
		d.Advanced = append(d.Advanced, phase)
		d.Findings = append(d.Findings, Finding{"phase_advanced", fmt.Sprintf("%s: %s, so the phase is done", phase, why)})
		i := PhaseIndex(phase) + 1
		if i == len(Phases) {
			return false
		}
		phase = Phases[i]
		return true
	}
	for {
		switch phase {
		case "REQUIREMENTS":
			if ok, why := validJSONFile(s.resolve(demandReport)); ok {
				if advance(demandReport + " exists and is valid") {
					continue
				}
			} else {
				d.resume(phase, fmt.Sprintf("Re-spawn the PM agent (%s %s).", demandReport, why))
				return
			}
		case "ARCHITECTURE":
			if ok, _ := validJSONFile(s.resolve(finalDesignReport)); ok {
				if advance(finalDesignReport + " exists") {
					continue
				}
			} else if designs := listDesigns(s.resolve(designsDir)); len(designs) > 0 {
				d.resume(phase, fmt.Sprintf("Spawn the Roundtable over the %d designs in %s/ and present its options to the user for approval; do not re-run the Architects.", len(designs), designsDir))
				return
			} else {
				d.resume(phase, fmt.Sprintf("Re-spawn the Architects (no designs in %s/).", designsDir))
				return
			}
		case "IMPLEMENTATION":
			d.resume(phase, d.executionAction())
			if d.Action == "" {
				d.Phase = ""
				if advance("every task in " + ExecutionFile + " is complete or skipped") {
					continue
				}
			}
			return
		case "VERIFICATION":
			if ok, _ := validJSONFile(s.resolve(verificationReport)); ok {
				if advance(verificationReport + " exists") {
					continue
				}
			} else {
				d.resume(phase, fmt.Sprintf("Re-spawn QA (no valid %s).", verificationReport))
				return
			}
		case "REFLECTION":
			for _, r := range reflectionReports {
				if exists(s.resolve(r)) {
					advance(r + " exists")
					d.Decision = DecisionFresh
					d.Reason = "workflow " + ph.WorkflowID + " is complete (its reflection is written): nothing to resume"
					return
				}
			}
			d.resume(phase, "Re-spawn the Reflector (no reflection report in memory/reports/).")
			return
		}
	}
}

func (d *PhaseDecision) resume(phase, action string) {
	d.Decision, d.Phase, d.Action = DecisionResume, phase, action
	d.Reason = "continue in " + phase
}

// executionAction is the IMPLEMENTATION step: recover the tasks an interrupted
// session left running, then continue the execution loop; "" when every task
// is done.
func (d *PhaseDecision) executionAction() string {
	x := d.Store.Exec
	if x == nil {
		return "Start the execution loop (no " + ExecutionFile + " yet)."
	}
	if len(d.Orphaned) > 0 {
		return fmt.Sprintf("Recover the interrupted tasks %s (rewind state recover), then continue the execution loop.", strings.Join(d.Orphaned, ", "))
	}
	for _, t := range x.Tasks {
		switch t.Status {
		case "pending":
			return fmt.Sprintf("Continue the execution loop at task %s (%d attempts so far).", t.ID, t.Attempts)
		case "failed":
			return fmt.Sprintf("Continue the execution loop: task %s failed after %d attempts; retry or escalate it.", t.ID, t.Attempts)
		}
	}
	if len(x.Tasks) == 0 {
		return "Start the execution loop (" + ExecutionFile + " lists no tasks yet)."
	}
	return ""
}

// validJSONFile: the file exists and holds valid JSON; else why not.
func validJSONFile(path string) (bool, string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, "is missing"
	}
	if !json.Valid(data) {
		return false, "is not valid JSON"
	}
	return true, ""
}

func listDesigns(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != filepath.Base(finalDesignReport) {
			out = append(out, e.Name())
		}
	}
	return out
}
