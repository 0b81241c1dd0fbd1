package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/gitexec"
	"github.com/rewind-cli/rewind/manifest"
)

// A/B replay: the dispatches of a replay run again in isolated arms, a
// control (no mutation) and the mutation, each run in its own clone of the
// project, never in the user's work tree, and recorded in the original
// manifest with replay_of, replay_session, mutation, arm and repeat.

// Arm names.
const (
	ArmControl = "control"
	ArmMutated = "mutated"
)

// ArmsFile lists the runs of every A/B replay of a pipeline, one JSON object a
// line, in the dispatch directory: `replay diff` finds a delegated run's work
// tree there to checkpoint it.
const ArmsFile = "replay-arms.jsonl"

// ABRun is one run of one arm.
type ABRun struct {
	Arm         string `json:"arm"`
	Repeat      int    `json:"repeat"`
	Session     string `json:"session"`
	Dir         string `json:"dir"`          // the run's directory: its clone and its dispatch directory
	WorkTree    string `json:"work_tree"`    // where its agents run
	DispatchDir string `json:"dispatch_dir"` // its dispatch files, results and manifest copy
	Jobs        []Job  `json:"-"`

	Completed  int    `json:"-"`
	Failed     bool   `json:"-"`
	Checkpoint string `json:"-"` // the checkpoint of its tree at the end
}

// RunSession names the run of arm arm, repeat n, of A/B session base.
func RunSession(base, arm string, n int) string {
	return fmt.Sprintf("%s-%s-%d", base, arm, n)
}

// ArmCheckpointReason is the reason of the checkpoint of a run's tree taken at
// its end: it names the session (and so the arm), and is no boundary reason,
// so a resume of the pipeline never takes it for one.
func ArmCheckpointReason(session string) string { return "ab-" + session }

// ABSetup is what preparing the arms needs.
type ABSetup struct {
	Store       *checkpoint.Store
	Restore     *Checkpoint // the resume checkpoint
	WorkTree    string      // the user's work tree
	ArmsDir     string      // where the runs' directories go
	DispatchDir string      // the original dispatch directory (its manifest is appended to)
	Manifest    string      // its manifest.jsonl
	Lookup      []string    // where the original dispatch files are
	Keep        []Dispatch  // verified dispatches before the resume point
	Redo        []Dispatch  // the dispatches each run re-executes
	Mutations   *MutationPlan
	Skill       string
	Now         time.Time
	Redispatch  Redispatcher // for the unmutated dispatches' content
	ManifestOut io.Writer    // dispatch.py's [dispatch WARN] lines
}

// PrepareRun makes a run's directory: a clone of the project at the commit
// the resume checkpoint recorded, with the checkpoint's tree on top, and a
// dispatch directory holding a copy of the manifest up to the resume point.
// Then it writes the run's dispatch files (in its dispatch directory and, for
// the record, in the original one) and their dispatched entries in the
// original manifest.
func (s *ABSetup) PrepareRun(ctx context.Context, run *ABRun) error {
	run.Dir = filepath.Join(s.ArmsDir, run.Session)
	if err := os.MkdirAll(s.ArmsDir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(run.Dir, 0o755); err != nil {
		return fmt.Errorf("arm directory: %w", err)
	}
	clone := filepath.Join(run.Dir, "work")
	run.WorkTree = clone
	if err := s.makeClone(ctx, run, clone); err != nil {
		return err
	}
	run.DispatchDir = filepath.Join(run.Dir, "dispatch")
	if err := os.Mkdir(run.DispatchDir, 0o755); err != nil {
		return err
	}
	if err := s.copyManifest(run.DispatchDir); err != nil {
		return err
	}
	return s.writeDispatches(run)
}

// makeClone clones the project (when the work tree is in a git repository
// and the checkpoint recorded a HEAD) at that commit, index included, with no
// files checked out, and writes the checkpoint's files on top: the arm's git
// then sees what the project's saw when the checkpoint was taken.
func (s *ABSetup) makeClone(ctx context.Context, run *ABRun, clone string) error {
	cps, err := s.Store.List(ctx)
	if err != nil {
		return err
	}
	cp, err := checkpoint.Resolve(cps, s.Restore.ID)
	if err != nil {
		return err
	}
	p := gitexec.Project{Dir: s.WorkTree}
	top, err := p.Run(ctx, "rev-parse", "--show-toplevel")
	if err != nil || cp.Head == "" {
		// Not a git repository (or the checkpoint knows no commit): the
		// arm is the checkpoint's files alone.
		if err := os.Mkdir(clone, 0o755); err != nil {
			return err
		}
		_, err := s.Store.WriteTree(ctx, cp.ID, clone)
		return err
	}
	prefix, err := p.Run(ctx, "rev-parse", "--show-prefix")
	if err != nil {
		return err
	}
	home := filepath.Join(run.Dir, ".git-home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	arm := gitexec.Arm{Dir: clone, ConfigHome: home}
	if err := arm.Clone(ctx, strings.TrimSpace(string(top))); err != nil {
		return fmt.Errorf("cloning the project for arm %s: %w", run.Session, err)
	}
	if _, err := arm.Run(ctx, "cat-file", "-e", cp.Head+"^{commit}"); err != nil {
		return fmt.Errorf("checkpoint %s recorded commit %s, which no branch or tag of the project holds any more: an arm cannot start from it", cp.Short(), short(cp.Head))
	}
	// HEAD (the branch the checkpoint recorded, when the clone has it) and
	// the index at the commit; the work tree is empty until WriteTree.
	target := cp.Head
	if cp.Branch != "" {
		if _, err := arm.Run(ctx, "update-ref", "refs/heads/"+cp.Branch, cp.Head); err != nil {
			return err
		}
		if _, err := arm.Run(ctx, "symbolic-ref", "HEAD", "refs/heads/"+cp.Branch); err != nil {
			return err
		}
		target = "HEAD"
	}
	if _, err := arm.Run(ctx, "reset", "-q", "--mixed", target); err != nil {
		return err
	}
	// The work tree is a directory below the top level: outside it, the
	// commit's files, as the project had them.
	rel := strings.TrimSuffix(strings.TrimSpace(string(prefix)), "/")
	if rel != "" {
		list, err := arm.Run(ctx, "ls-files", "-z")
		if err != nil {
			return err
		}
		var outside []byte
		for _, p := range strings.Split(string(list), "\x00") {
			if p != "" && p != rel && !strings.HasPrefix(p, rel+"/") {
				outside = append(append(outside, p...), 0)
			}
		}
		if len(outside) > 0 {
			if _, err := arm.RunInput(ctx, bytes.NewReader(outside), "checkout-index", "-f", "-z", "--stdin"); err != nil {
				return err
			}
		}
	}
	run.WorkTree = filepath.Join(clone, filepath.FromSlash(rel))
	if err := os.MkdirAll(run.WorkTree, 0o755); err != nil {
		return err
	}
	_, err = s.Store.WriteTree(ctx, cp.ID, run.WorkTree)
	return err
}

// copyManifest writes the entries of the dispatches kept (verified before the
// resume point) into the run's dispatch directory, as they are in the
// original manifest.
func (s *ABSetup) copyManifest(dir string) error {
	keep := map[int]bool{}
	for _, d := range s.Keep {
		for _, a := range d.Attempts {
			keep[a.Seq] = true
		}
	}
	f, err := os.Open(s.Manifest)
	if err != nil {
		return err
	}
	defer f.Close()
	var out []byte
	err = manifest.Scan(f, func(l *manifest.Line) error {
		if l.Kind != manifest.Entry || !keep[int(l.Seq)] {
			return nil
		}
		out = append(out, l.Raw...)
		out = append(out, '\n')
		return nil
	})
	if err != nil {
		return err
	}
	return manifest.WriteFileAtomic(filepath.Join(dir, manifest.FileName), out, 0o644)
}

// writeDispatches gives each dispatch of the run a new seq of the original
// manifest, writes its dispatch file (the original's, or for a mutated one
// REPL's text with the original's fillings, under the original's audit header
// with a new timestamp) and appends its dispatched entry there.
func (s *ABSetup) writeDispatches(run *ABRun) error {
	rd := s.Redispatch
	rd.DispatchDir = s.DispatchDir
	sources, err := rd.check(s.Redo)
	if err != nil {
		return err
	}
	for i, d := range s.Redo {
		a := d.Latest()
		seq, err := manifest.NextSeq(s.DispatchDir)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%d-%s.md", seq, Template(a))
		var content string
		var mutation *string
		if md := s.Mutations.mutatedFor(run.Arm, d.Seq()); md != nil {
			h := Header{Template: Template(a), Pipeline: s.Skill, Phase: a.Phase, Task: TaskString(a.Task), DispatchDir: strings.TrimSuffix(s.DispatchDir, "/") + "/"}
			if md.Header != nil {
				h = *md.Header
			}
			h.Timestamp = s.Now.UTC().Format(time.RFC3339)
			content = h.Render() + md.Body
			label := md.Mutation
			mutation = &label
		} else {
			content, err = rd.content(a, sources[i])
			if err != nil {
				return err
			}
		}
		for _, dir := range []string{run.DispatchDir, s.DispatchDir} {
			if err := manifest.WriteFileAtomic(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				return err
			}
		}
		chars := int64(len([]rune(content)))
		arm, repeat := run.Arm, int64(run.Repeat)
		entry := replayEntry(d, a, seq, name, run.Session, &chars)
		entry.Mutation, entry.Arm, entry.Repeat = mutation, &arm, &repeat
		if _, err := manifest.Before(s.DispatchDir, entry, false, s.ManifestOut); err != nil {
			return err
		}
		run.Jobs = append(run.Jobs, Job{Seq: int(seq), ReplayOf: d.Seq(), From: a,
			DispatchFile: filepath.Join(run.DispatchDir, name), Original: d.Attempts[0].Time})
	}
	return appendArmRecord(s.DispatchDir, run)
}

// mutatedFor is the mutated dispatch of original seq in arm (nil in the control
// arm, and for a dispatch no mutation applies to).
func (mp *MutationPlan) mutatedFor(arm string, seq int) *MutatedDispatch {
	if mp == nil || arm != ArmMutated {
		return nil
	}
	return mp.Dispatches[seq]
}

func appendArmRecord(dir string, run *ABRun) error {
	line, err := json.Marshal(run)
	if err != nil {
		return err
	}
	return AppendFileSync(filepath.Join(dir, ArmsFile), append(line, '\n'))
}

// AppendFileSync appends data to path (made 0644 if new) in one write and
// syncs it, for the append-only JSONL files of A/B replays.
func AppendFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadArmRecords reads the runs ArmsFile lists, the newest record of a session
// winning.
func ReadArmRecords(dir string) map[string]ABRun {
	out := map[string]ABRun{}
	data, err := os.ReadFile(filepath.Join(dir, ArmsFile))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		var r ABRun
		if json.Unmarshal([]byte(line), &r) == nil && r.Session != "" {
			out[r.Session] = r
		}
	}
	return out
}

// IsGateRole reports whether dispatches of role are quality gate rounds:
// red-team, quality-gate, crucible-red-team and crucible-qg-*, except the
// loop's fixes (crucible-qg-fix matches crucible-qg-* but fixes what a round
// found: counting it would count a fix as a round, and a fix whose summary
// says tests PASS would end the gate's loop).
func IsGateRole(role string) bool {
	if isGateFixRole(role) {
		return false
	}
	switch role {
	case "red-team", "quality-gate", "crucible-red-team":
		return true
	}
	return strings.HasPrefix(role, "crucible-qg-")
}

// isGateFixRole reports whether dispatches of role are the fixes dispatched
// between a quality gate's rounds.
func isGateFixRole(role string) bool {
	switch role {
	case "fixer", "fix", "crucible-qg-fix", "qg-fix", "fix-generated-defect":
		return true
	}
	return false
}

// inGateLoop reports whether dispatches of role belong to a quality gate's
// loop: its rounds, and the fixes dispatched between them.
func inGateLoop(role string) bool {
	return isGateFixRole(role) || IsGateRole(role)
}

var passRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bPASS(ED)?\b`) })
var failRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bFAIL(ED|S)?\b`) })

// GatePassed reports whether a gate round's summary gives the verdict PASS
// (and not FAIL).
func GatePassed(summary string) bool {
	return passRE().MatchString(summary) && !failRE().MatchString(summary)
}

// ABRecorder receives a run's outcomes as they are recorded.
type ABRecorder func(run *ABRun, j Job, status, summary string)

// Execute runs a run's dispatches one after another through cmd in the run's
// work tree, recording each outcome in the original manifest:
//
//   - Gate rounds of one phase (red-team, quality-gate) and the fix
//     dispatches between them form the gate's loop, as the quality gate runs
//     it: once a round passes (its summary says PASS), the loop's later
//     rounds and fixes are not needed, and are recorded `skipped`. So a
//     mutation that makes the gate pass sooner shows in the rounds counted.
//   - The stop rule of replay: once a dispatch fails, the run's later
//     dispatches are not sent (recorded `error`), and the run is failed.
func (s *ABSetup) Execute(ctx context.Context, run *ABRun, cmd string, now func() time.Time, record ABRecorder) error {
	r := Runner{Command: cmd, WorkTree: run.WorkTree, DispatchDir: run.DispatchDir, Session: run.Session, Jobs: 1,
		Env: []string{"REWIND_ARM=" + run.Arm, "REWIND_REPEAT=" + strconv.Itoa(run.Repeat), "REWIND_MANIFEST_DIR=" + s.DispatchDir}}
	passedAt := 0 // the seq whose gate round passed, while in its loop
	var loopPhase string
	var stoppedBy *Job
	for k, j := range run.Jobs {
		gate := IsGateRole(j.From.Role)
		if !inGateLoop(j.From.Role) || j.From.Phase != loopPhase {
			passedAt, loopPhase = 0, ""
		}
		if gate {
			loopPhase = j.From.Phase
		}
		var status, summary string
		var out Outcome
		switch {
		case stoppedBy != nil:
			status, summary = "error", fmt.Sprintf("not sent: replay session %s stopped after seq %d failed", run.Session, stoppedBy.Seq)
		case passedAt != 0:
			status, summary = "skipped", fmt.Sprintf("not needed: the quality gate passed at seq %d", passedAt)
		case ctx.Err() != nil:
			// Interrupted before this run reached the dispatch.
			return s.recordInterrupted(ctx.Err(), run, k, false, record)
		default:
			for _, f := range []string{j.DispatchFile, filepath.Join(s.DispatchDir, filepath.Base(j.DispatchFile))} {
				if err := Restamp(f, now()); err != nil {
					return err
				}
			}
			var err error
			out, err = r.Run(ctx, j)
			if err != nil {
				if ctx.Err() != nil {
					return s.recordInterrupted(err, run, k, true, record)
				}
				return err
			}
			status, summary = out.Status, out.Summary
			// The result goes beside the dispatch file kept in the pipeline's
			// dispatch directory too: the arms may be removed.
			result := strings.TrimSuffix(filepath.Base(j.DispatchFile), ".md") + "-result.md"
			if data, err := os.ReadFile(filepath.Join(run.DispatchDir, result)); err == nil {
				if err := manifest.WriteFileAtomic(filepath.Join(s.DispatchDir, result), data, 0o644); err != nil {
					return err
				}
			}
		}
		c := manifest.Completion{Seq: int64(j.Seq), Status: status, Summary: &summary}
		if out.Status != "" {
			chars, dur := int64(out.OutputChars), int64(out.Duration)
			c.OutputChars, c.Duration = &chars, &dur
		}
		if _, err := manifest.After(s.DispatchDir, c, s.ManifestOut); err != nil {
			return err
		}
		record(run, j, status, summary)
		switch {
		case status == "completed":
			run.Completed++
			if gate && GatePassed(summary) && passedAt == 0 {
				passedAt = j.Seq
			}
		case status == "failed" && stoppedBy == nil:
			run.Failed = true
			stoppedBy = &run.Jobs[k]
		}
	}
	return nil
}

// recordInterrupted records the run's dispatches from the k-th on when the
// replay is interrupted, so that no entry of the run stays "dispatched" (which
// the diff would count as sent): the k-th failed when it was running (sent),
// error when it was not; the later ones error, not sent. It returns cause.
func (s *ABSetup) recordInterrupted(cause error, run *ABRun, k int, running bool, record ABRecorder) error {
	run.Failed = true
	for i, j := range run.Jobs[k:] {
		status, summary := "error", fmt.Sprintf("not sent: replay session %s was interrupted", run.Session)
		if i == 0 && running {
			status, summary = "failed", fmt.Sprintf("interrupted: replay session %s was stopped while this dispatch ran", run.Session)
		}
		c := manifest.Completion{Seq: int64(j.Seq), Status: status, Summary: &summary}
		if _, err := manifest.After(s.DispatchDir, c, s.ManifestOut); err != nil {
			return errors.Join(cause, err)
		}
		record(run, j, status, summary)
	}
	return cause
}

// Abandon records every dispatch of a prepared run as not sent (error), when
// the A/B replay stops before the run could run (interrupted, or preparing a
// later run failed): no entry of it stays "dispatched", which the diff would
// count as sent. why ends the summary ("was interrupted").
func (s *ABSetup) Abandon(run *ABRun, why string) error {
	summary := fmt.Sprintf("not sent: replay session %s %s", run.Session, why)
	for _, j := range run.Jobs {
		c := manifest.Completion{Seq: int64(j.Seq), Status: "error", Summary: &summary}
		if _, err := manifest.After(s.DispatchDir, c, s.ManifestOut); err != nil {
			return err
		}
	}
	return nil
}

// Finish takes the checkpoint of the run's tree in the project's store.
func (s *ABSetup) Finish(ctx context.Context, run *ABRun) error {
	made, err := s.Store.CreateFrom(ctx, run.WorkTree, checkpoint.CreateOptions{Reason: ArmCheckpointReason(run.Session), Source: "replay"})
	if err != nil {
		return fmt.Errorf("checkpoint of arm %s: %w", run.Session, err)
	}
	run.Checkpoint = made.Checkpoint.ID
	return nil
}

// resolveExisting resolves the symlinks of the longest part of path that
// exists, and appends the rest: a directory not made yet is where its parent
// really is (a symlink to the project in its path leads into the project).
func resolveExisting(path string) string {
	rest := ""
	for dir := path; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if filepath.Dir(dir) == dir {
			return path
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// ErrArmsDir means the arms directory cannot be used.
var ErrArmsDir = errors.New("invalid arms directory")

// CheckArmsDir refuses an arms directory inside the work tree (arms would be
// captured by the project's checkpoints, and agents would work inside the
// project) or one that holds this session's runs already.
func CheckArmsDir(dir, workTree string, sessions []string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	abs = resolveExisting(abs)
	if rel, err := filepath.Rel(workTree, abs); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
		return fmt.Errorf("%w: %s is inside the work tree %s", ErrArmsDir, dir, workTree)
	}
	for _, s := range sessions {
		if _, err := os.Lstat(filepath.Join(abs, s)); err == nil {
			return fmt.Errorf("%w: %s already holds a run %s", ErrArmsDir, dir, s)
		}
	}
	return nil
}
