package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// commit writes a style-2 update by the skill's protocol: phase.json first
// says interruption_safe false (when it is there to say it), then every changed
// file is written atomically, and phase.json is written last with
// interruption_safe true. A kill at any instant leaves each file whole, old or
// new; a kill between the first and the last write leaves interruption_safe
// false, which check reports and Recover clears.
func (s *PhaseStore) commit(phase *PhaseState, exec *Execution) error {
	if err := os.MkdirAll(filepath.Dir(s.PhasePath), 0o755); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if s.Phase != nil && s.Phase.InterruptionSafe {
		marked := *s.Phase
		marked.InterruptionSafe = false
		if err := writeFileAtomic(s.PhasePath, marked.Bytes()); err != nil {
			return err
		}
	}
	if exec != nil {
		if err := writeFileAtomic(s.ExecPath, exec.Bytes()); err != nil {
			return err
		}
		s.Exec = exec
	}
	if phase == nil {
		if s.Phase == nil {
			return nil
		}
		phase = s.Phase
	}
	done := *phase
	done.InterruptionSafe = true
	if err := writeFileAtomic(s.PhasePath, done.Bytes()); err != nil {
		return err
	}
	s.Phase = &done
	return nil
}

// TaskRepair is one task Recover changed.
type TaskRepair struct {
	ID       string
	From, To string
	Attempts int64
	Why      string
}

// RecoverResult says what Recover did; nothing when Repairs is empty and
// ClearedInterrupted false.
type RecoverResult struct {
	Store              *PhaseStore
	Repairs            []TaskRepair
	ClearedInterrupted bool
}

// Changed reports whether Recover wrote anything.
func (r *RecoverResult) Changed() bool { return len(r.Repairs) > 0 || r.ClearedInterrupted }

// OutputStatusError is a running task whose output exists but says no status
// Recover can take.
type OutputStatusError struct {
	Task, Output, Why string
}

func (e *OutputStatusError) Error() string {
	return fmt.Sprintf("task %s: its output %s exists but %s", e.Task, e.Output, e.Why)
}

// terminalStatuses are the statuses a task's output may report.
var terminalStatuses = []string{"complete", "failed", "skipped"}

// Recover repairs the skill's two crash scenarios in execution.json: a running
// task without its output goes back to pending with one more attempt (Ctrl-C
// during a subagent); a running task whose output exists takes the status the
// output reports, with its completed_at (crash after the write, before the
// state update). It also clears an interrupted update's interruption_safe
// false once both files have validated. Nothing is written when nothing needs
// repair, and nothing when a repair cannot be decided.
func Recover(root string, now time.Time) (*RecoverResult, error) {
	s, err := LoadPhaseStore(root)
	if err != nil {
		return nil, err
	}
	if s.Phase == nil && s.Exec == nil {
		return nil, fmt.Errorf("%s: %w", StateDirOf(root), ErrNoState)
	}
	res := &RecoverResult{Store: s}
	ts := now.UTC().Format(time.RFC3339)
	var exec *Execution
	if s.Exec != nil {
		x := *s.Exec
		x.Tasks = append([]Task(nil), s.Exec.Tasks...)
		for i := range x.Tasks {
			t := &x.Tasks[i]
			if t.Status != "running" {
				continue
			}
			r := TaskRepair{ID: t.ID, From: t.Status}
			if t.Output == "" || !exists(s.resolve(t.Output)) {
				t.Status, t.Attempts, t.StartedAt = "pending", t.Attempts+1, ""
				r.Why = "no output: interrupted, back to pending for another attempt"
				if t.Output != "" {
					r.Why = "its output " + t.Output + " is missing: interrupted, back to pending for another attempt"
				}
			} else {
				status, completed, err := outputStatus(s.resolve(t.Output))
				if err != nil {
					return nil, &OutputStatusError{Task: t.ID, Output: t.Output, Why: err.Error()}
				}
				t.Status = status
				t.CompletedAt = completed
				if t.CompletedAt == "" {
					t.CompletedAt = ts
				}
				r.Why = "its output " + t.Output + " exists and reports " + status
			}
			r.To, r.Attempts = t.Status, t.Attempts
			res.Repairs = append(res.Repairs, r)
		}
		if len(res.Repairs) > 0 {
			x.LastUpdated = ts
			exec = &x
		}
	}
	var phase *PhaseState
	if s.Phase != nil && (exec != nil || !s.Phase.InterruptionSafe) {
		res.ClearedInterrupted = !s.Phase.InterruptionSafe
		p := *s.Phase
		p.LastUpdated = ts
		phase = &p
	}
	if !res.Changed() {
		return res, nil
	}
	if err := s.commit(phase, exec); err != nil {
		return nil, err
	}
	return res, nil
}

// outputStatus reads the status a task's output reports: a JSON object whose
// "status" is complete, failed or skipped, and its "completed_at" when it is a
// time.
func outputStatus(path string) (status, completedAt string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("cannot be read: %v", unwrapPath(err))
	}
	var out struct {
		Status      *string `json:"status"`
		CompletedAt any     `json:"completed_at"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return "", "", errors.New("is not a JSON object with a status")
	}
	if out.Status == nil {
		return "", "", errors.New("has no \"status\"")
	}
	if !oneOf(*out.Status, terminalStatuses) {
		return "", "", fmt.Errorf("reports status %q, not one of %s", clip(*out.Status), strings.Join(terminalStatuses, ", "))
	}
	if ca, ok := out.CompletedAt.(string); ok {
		if _, err := ParseTime(ca); err == nil {
			completedAt = ca
		}
	}
	return *out.Status, completedAt, nil
}

// ArchiveKeep is how many archives Archive keeps, as the skill says.
const ArchiveKeep = 5

// ArchiveResult says where Archive put the state and which old archives it
// deleted.
type ArchiveResult struct {
	Dir     string   // the new archive
	Files   []string // the files moved there (base names)
	Removed []string // the archives deleted beyond the newest ArchiveKeep
}

var archiveNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.+)_(\d{8}T\d{6}Z)(?:-(\d+))?$`) })

// archiveStamp is the timestamp in an archive's name, sortable as text.
const archiveStamp = "20060102T150405Z"

// ArchiveSeqFile is the file in each archive that holds its sequence number:
// one more than the highest of the archives there when it was made, so it only
// grows, whatever the clock (or --now) says.
const ArchiveSeqFile = ".sequence"

// archiveEntry is one archive directory, as rotation ranks it.
type archiveEntry struct {
	name, stamp string
	n           int   // the -N suffix (0 when none)
	seq         int64 // its sequence number; 0 for an archive made before they were recorded
}

// listArchives reads the archives in dir: directories named
// <id>_<YYYYMMDDTHHMMSSZ>[-N], with their sequence numbers.
func listArchives(archives string) ([]archiveEntry, error) {
	entries, err := os.ReadDir(archives)
	if err != nil {
		return nil, err
	}
	var list []archiveEntry
	for _, e := range entries {
		m := archiveNameRE().FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[3])
		a := archiveEntry{name: e.Name(), stamp: m[2], n: n}
		if data, err := os.ReadFile(filepath.Join(archives, e.Name(), ArchiveSeqFile)); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil && v > 0 {
				a.seq = v
			}
		}
		list = append(list, a)
	}
	return list, nil
}

// Archive moves phase.json and execution.json into
// memory/state/.archive/<workflow_id>_<timestamp>/ and deletes the oldest
// archives beyond the newest keep. It works on state that does not validate
// (archiving corrupt state is what the skill does with it): a workflow_id it
// cannot read is "unknown". The archive is built under a temporary name and
// renamed into place before the originals are removed, so a kill leaves the
// state where it was or archived whole. Archives are ordered by the sequence
// number each records (the order they were made, never the time in their
// names, which --now or a clock set back can make go backwards); the archive
// just made is never deleted, a name's -N suffix is always above every suffix
// of that name already there, and directories not named as archives are never
// deleted.
func Archive(root string, now time.Time, keep int) (*ArchiveResult, error) {
	dir := StateDirOf(root)
	files := []string{}
	for _, f := range []string{PhaseFile, ExecutionFile} {
		if fi, err := os.Lstat(filepath.Join(dir, f)); err == nil && fi.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: %w to archive", dir, ErrNoState)
	}
	id := "unknown"
	for _, f := range files {
		if data, err := readState(filepath.Join(dir, f)); err == nil {
			var doc struct {
				WorkflowID string `json:"workflow_id"`
			}
			if json.Unmarshal(data, &doc) == nil && doc.WorkflowID != "" {
				id = safeName(doc.WorkflowID)
				break
			}
		}
	}
	archives := filepath.Join(dir, ArchiveDir)
	if err := os.MkdirAll(archives, 0o755); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	removeTempDirs(archives)
	existing, err := listArchives(archives)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	base := id + "_" + now.UTC().Format(archiveStamp)
	var seq int64
	suffix := 0 // the highest -N of base there (1 for base itself)
	for _, a := range existing {
		seq = max(seq, a.seq)
		if m := archiveNameRE().FindStringSubmatch(a.name); m != nil && m[1]+"_"+m[2] == base {
			suffix = max(suffix, max(a.n, 1))
		}
	}
	seq++
	name := base
	if suffix > 0 {
		name = base + "-" + strconv.Itoa(suffix+1)
	}
	for n := suffix + 2; exists(filepath.Join(archives, name)); n++ {
		name = base + "-" + strconv.Itoa(n) // a non-directory of that name
	}
	tmp := filepath.Join(archives, ".tmp-"+name)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil {
			err = writeFileAtomic(filepath.Join(tmp, f), data)
		}
		if err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("archive %s: %w", f, err)
		}
	}
	if err := writeFileAtomic(filepath.Join(tmp, ArchiveSeqFile), []byte(strconv.FormatInt(seq, 10)+"\n")); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("archive: %w", err)
	}
	final := filepath.Join(archives, name)
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("archive: %w", err)
	}
	if err := syncDir(archives); err != nil {
		return nil, err
	}
	// phase.json goes first: without it the state reads as none (or as an
	// execution.json left alone, which check reports), never as a workflow
	// that lost its tasks.
	for _, f := range files {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("archive: the state is copied to %s but %w", final, err)
		}
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	res := &ArchiveResult{Dir: final, Files: files}
	removed, err := rotateArchives(archives, name, keep)
	res.Removed = removed
	return res, err
}

// rotateArchives deletes the oldest archives beyond keep, never the archive
// just made (made). Archives rank by their sequence numbers; those made before
// sequence numbers were recorded rank below every other, among themselves by
// the time in their names.
func rotateArchives(archives, made string, keep int) ([]string, error) {
	all, err := listArchives(archives)
	if err != nil {
		return nil, fmt.Errorf("archive rotation: %w", err)
	}
	var list []archiveEntry
	for _, a := range all {
		if a.name != made {
			list = append(list, a)
		}
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.seq != b.seq {
			return a.seq > b.seq
		}
		if a.stamp != b.stamp {
			return a.stamp > b.stamp
		}
		if a.n != b.n {
			return a.n > b.n
		}
		return a.name > b.name
	})
	var removed []string
	for i := max(keep-1, 0); i < len(list); i++ {
		if err := os.RemoveAll(filepath.Join(archives, list[i].name)); err != nil {
			return removed, fmt.Errorf("archive rotation: %w", err)
		}
		removed = append(removed, list[i].name)
	}
	return removed, nil
}

func removeTempDirs(archives string) {
	entries, _ := os.ReadDir(archives)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), ".tmp-") {
			os.RemoveAll(filepath.Join(archives, e.Name()))
		}
	}
}

var unsafeNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })

// safeName makes a workflow id usable as part of a directory name.
func safeName(id string) string {
	s := strings.Trim(unsafeNameRE().ReplaceAllString(id, "_"), ".")
	if len(s) > 100 {
		s = s[:100]
	}
	if s == "" {
		return "unknown"
	}
	return s
}

// SetOptions is the common phase.json update.
type SetOptions struct {
	Phase      string // the phase to set ("" keeps current_phase)
	Status     string // the phase_status to set ("" keeps it)
	Output     string // with Status complete: the phase's output
	Approve    bool   // record the user's approval of the phase
	WorkflowID string // create phase.json for this workflow when there is none
	Now        time.Time
}

// UsageError is a Set or WriteDocument call that asks for something the
// schema does not allow; nothing is written.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// ValidationError is a Set or WriteDocument refused because the state it
// would write does not pass the validations check runs (all but staleness,
// which depends on the clock): check would block it. Nothing is written.
type ValidationError struct {
	File     string
	Findings []Finding
}

func (e *ValidationError) Error() string {
	msg := e.File + ": refused, nothing written: " + e.Findings[0].Message
	if n := len(e.Findings) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more)", n)
	}
	return msg
}

// writeFindings are the validations check runs (see validate) that the state
// in s fails, but staleness and the interruption marker (the write protocol
// sets it).
func writeFindings(s *PhaseStore, now time.Time) []Finding {
	if s.Phase == nil {
		return nil
	}
	d := &PhaseDecision{Store: s}
	d.validate(CheckOptions{Now: now, AllowStale: true})
	var out []Finding
	for _, f := range d.Blocking {
		if f.Kind != "interrupted_write" {
			out = append(out, f)
		}
	}
	return out
}

// ErrInterrupted is an update refused because phase.json says
// interruption_safe false: an earlier update was killed between its writes,
// and only Recover, which checks both files, may clear that.
var ErrInterrupted = errors.New("interruption_safe is false: an update of the state was interrupted")

// refuseInterrupted refuses an update over the marker a killed update left.
func (s *PhaseStore) refuseInterrupted() error {
	if s.Phase != nil && !s.Phase.InterruptionSafe {
		return fmt.Errorf("%s: %w; refused, nothing written", s.PhasePath, ErrInterrupted)
	}
	return nil
}

// Set updates phase.json: current_phase and phase_status, a completed phase
// (status complete adds the phase to completed_phases with its output), a user
// approval, last_updated. Setting an earlier phase than the current one runs
// it again: it and the phases after it leave completed_phases. The result must
// validate (schema and phase progression), or nothing is written.
func Set(root string, o SetOptions) (*PhaseState, error) {
	if o.Phase != "" && PhaseIndex(o.Phase) < 0 {
		return nil, &UsageError{fmt.Sprintf("invalid phase %q: want one of %s", o.Phase, strings.Join(Phases, ", "))}
	}
	if o.Status != "" && !oneOf(o.Status, PhaseStatuses) {
		return nil, &UsageError{fmt.Sprintf("invalid status %q: want one of %s", o.Status, strings.Join(PhaseStatuses, ", "))}
	}
	if o.Output != "" && o.Status != "complete" {
		return nil, &UsageError{"an output is recorded with a completed phase: add --status complete"}
	}
	s, err := LoadPhaseStore(root)
	if err != nil {
		return nil, err
	}
	if err := s.refuseInterrupted(); err != nil {
		return nil, err
	}
	ts := o.Now.UTC().Format(time.RFC3339)
	var p PhaseState
	switch {
	case s.Phase != nil:
		if o.WorkflowID != "" && o.WorkflowID != s.Phase.WorkflowID {
			return nil, &UsageError{fmt.Sprintf("%s belongs to workflow %s, not %s: archive it first (rewind state archive)", s.PhasePath, s.Phase.WorkflowID, o.WorkflowID)}
		}
		p = *s.Phase
		p.CompletedPhases = append([]CompletedPhase(nil), p.CompletedPhases...)
		p.UserCheckpoints = append([]UserCheckpoint(nil), p.UserCheckpoints...)
	case o.WorkflowID != "":
		p = PhaseState{WorkflowID: o.WorkflowID, StartedAt: ts, CurrentPhase: Phases[0], PhaseStatus: "in_progress"}
	default:
		return nil, fmt.Errorf("%s: %w", s.PhasePath, ErrNoState)
	}
	target := p.CurrentPhase
	if o.Phase != "" {
		target = o.Phase
	}
	if PhaseIndex(target) < PhaseIndex(p.CurrentPhase) {
		kept := p.CompletedPhases[:0]
		for _, c := range p.CompletedPhases {
			if PhaseIndex(c.Phase) < PhaseIndex(target) {
				kept = append(kept, c)
			}
		}
		p.CompletedPhases = kept
	}
	p.CurrentPhase = target
	if o.Status != "" {
		p.PhaseStatus = o.Status
	}
	if o.Status == "complete" && !p.completedSet()[target] {
		p.CompletedPhases = append(p.CompletedPhases, CompletedPhase{Phase: target, CompletedAt: ts, Output: o.Output})
	}
	if o.Approve {
		p.UserCheckpoints = append(p.UserCheckpoints, UserCheckpoint{Phase: target, ApprovedAt: ts})
	}
	p.LastUpdated = ts
	if problems := p.progression(); len(problems) > 0 {
		return nil, &UsageError{fmt.Sprintf("%s: refused, nothing written: %s", s.PhasePath, problems[0])}
	}
	if _, err := ParsePhase(s.PhasePath, p.Bytes()); err != nil {
		return nil, err
	}
	next := *s
	next.Phase = &p
	if f := writeFindings(&next, o.Now); len(f) > 0 {
		return nil, &ValidationError{File: s.PhasePath, Findings: f}
	}
	if err := s.commit(&p, nil); err != nil {
		return nil, err
	}
	return s.Phase, nil
}

// ErrUnknownFile is a write to a file that is none of the styles' state
// files.
var ErrUnknownFile = errors.New("not a state file rewind knows")

// WriteDocument writes data, a whole new state document, to file after
// validating it against the file's schema: phase.json and execution.json (the
// skill's schemas; phase.json's phase progression too), .pipeline-state.md (the
// playbook's format). A style-2 document must also pass the validations check
// runs, but staleness (a *ValidationError): phase.json all of them (outputs
// exist, no timestamp after now, last_updated not before started_at, the
// workflow of execution.json), execution.json those about it (its workflow is
// phase.json's, no timestamp after now). A JSON document is written in
// rewind's layout with interruption_safe set by the write protocol (see
// commit); a playbook file is written as given. Nothing is written when the
// document does not fit, nor over a phase.json that says interruption_safe
// false (ErrInterrupted). An unfinished playbook run must have a current_stage
// and a spec_hash check accepts, or it is refused the same way.
func WriteDocument(file string, data []byte, now time.Time) error {
	base := filepath.Base(file)
	switch base {
	case PhaseFile, ExecutionFile:
		dir := filepath.Dir(file)
		root := dir
		if abs, err := filepath.Abs(dir); err == nil && filepath.Base(abs) == "state" && filepath.Base(filepath.Dir(abs)) == "memory" {
			root = filepath.Join(dir, "..", "..")
		}
		s := &PhaseStore{Root: root, PhasePath: filepath.Join(dir, PhaseFile), ExecPath: filepath.Join(dir, ExecutionFile)}
		// The sibling phase.json carries interruption_safe for an
		// execution.json update; one that does not parse is left alone.
		if old, err := readState(s.PhasePath); err == nil {
			s.Phase, _ = ParsePhase(s.PhasePath, old)
		}
		if err := s.refuseInterrupted(); err != nil {
			return err
		}
		next := *s
		if base == PhaseFile {
			p, err := ParsePhase(file, data)
			if err != nil {
				return err
			}
			if problems := p.progression(); len(problems) > 0 {
				return &SchemaError{File: file, Problems: problems}
			}
			if old, err := readState(s.ExecPath); err == nil {
				next.Exec, _ = ParseExecution(s.ExecPath, old)
			}
			next.Phase = p
			if f := writeFindings(&next, now); len(f) > 0 {
				return &ValidationError{File: file, Findings: f}
			}
			return s.commit(p, nil)
		}
		x, err := ParseExecution(file, data)
		if err != nil {
			return err
		}
		next.Exec = x
		var mine []Finding
		for _, f := range writeFindings(&next, now) {
			if f.Kind == "workflow_mismatch" || f.Kind == "timestamp_in_future" && (strings.HasPrefix(f.Message, ExecutionFile+" ") || strings.HasPrefix(f.Message, "task ")) {
				mine = append(mine, f)
			}
		}
		if len(mine) > 0 {
			return &ValidationError{File: file, Findings: mine}
		}
		return s.commit(nil, x)
	case PlaybookFile:
		p, err := ParsePlaybook(file, data)
		if err != nil {
			return err
		}
		// An unfinished run must pass check's guards: a current_stage, and a
		// spec_hash that is the spec's (see checkSpecHash).
		if Unfinished(p.Status()) {
			if p.CurrentStage() == "" {
				return &ValidationError{File: file, Findings: []Finding{{"stage_missing", "no current_stage in the header of an unfinished run (" + p.Status() + ")"}}}
			}
			if f := checkSpecHash(filepath.Dir(file), p); f != nil {
				return &ValidationError{File: file, Findings: []Finding{*f}}
			}
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return err
		}
		return writeFileAtomic(file, data)
	}
	return fmt.Errorf("%s: %w (want %s, %s or %s)", file, ErrUnknownFile, PhaseFile, ExecutionFile, PlaybookFile)
}
