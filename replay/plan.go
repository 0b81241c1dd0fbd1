package replay

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Attempt is one manifest seq: a dispatch as it was sent, with the status of its
// authoritative (last) entry.
type Attempt struct {
	Seq       int
	File      string // dispatch file basename, "<seq>-<template>.md"
	Role      string
	Phase     string
	Task      *int
	Status    string
	Duration  *int // seconds
	Summary   string
	ModelTier string
	ReplayOf  *int
	// ReplaySession is the replay session that dispatched this attempt ("" for
	// the original run).
	ReplaySession string
	Time          time.Time // when it was dispatched (for an inferred time: the earliest it can be)
	TimeFrom      string    // "header", "mtime", "inferred" or "" (unknown)

	// TimeMax is the latest the dispatch can have been sent: Time when known; for
	// an inferred time, the next known time (zero: unbounded).
	TimeMax time.Time

	// Mutation, Arm and Repeat are an A/B replay's: the template mutation
	// ("ORIG -> REPL", "" for none), the arm ("control" or "mutated") and the
	// run's repeat number (0 when unset). Attempts of an arm ran in a clone of the
	// project, never in its work tree.
	Mutation string
	Arm      string
	Repeat   int
}

// LegacyReplayed is the status an older replay wrote on the entries it
// re-dispatched, before replays used the normal dispatched/completed
// statuses with replay_of. It is terminal: the dispatch ran.
const LegacyReplayed = "replayed"

// Done reports whether the attempt finished in a way that needs no redo.
func (a Attempt) Done() bool {
	return a.Status == "completed" || a.Status == "skipped" || a.Status == LegacyReplayed
}

// Dispatch is a logical dispatch: an original seq and every later seq that
// replays it, in seq order.
type Dispatch struct {
	Attempts []Attempt
}

// Seq is the original seq.
func (d Dispatch) Seq() int { return d.Attempts[0].Seq }

// Latest is the newest attempt, the one that says where this dispatch stands.
func (d Dispatch) Latest() Attempt { return d.Attempts[len(d.Attempts)-1] }

// Phase is the phase of the original dispatch.
func (d Dispatch) Phase() string { return d.Attempts[0].Phase }

// Done reports whether the newest attempt completed or was skipped.
func (d Dispatch) Done() bool { return d.Latest().Done() }

// Checkpoint is what planning needs to know of a checkpoint.
type Checkpoint struct {
	ID     string
	Reason string
	Source string // the skill that took it ("" when unknown)
	Time   time.Time
}

// Finding is the result of verifying one completed dispatch.
type Finding struct {
	Seq    int // the attempt verified
	Role   string
	Kind   RoleKind
	OK     bool
	Detail string // what was found, or what is missing
}

// PhaseState is a phase in order of first appearance.
type PhaseState struct {
	Phase  string
	Status string // "complete", "incomplete" or "in flight"
	Seqs   []int  // original seqs
}

// Options steer the plan.
type Options struct {
	FromPhase string // resume from the start of this phase
	FromSeq   int    // resume from the start of the phase holding this seq (0: unset)
	NoRestore bool   // resume on the current disk state, restoring nothing
}

// Plan is what a replay will do.
type Plan struct {
	Phases     []PhaseState
	Dispatches []Dispatch // every logical dispatch, in time order
	Skip       []Dispatch // verified complete, kept
	Redo       []Dispatch // re-executed, in time order
	Findings   []Finding

	Complete     bool        // every dispatch done and verified: nothing to resume
	Restore      *Checkpoint // nil when nothing is restored (--no-restore)
	ResumePhase  string
	ProblemSeq   int    // the earliest dispatch not done or not verified
	ProblemPhase string // its phase
	CrashPhase   string
	CrashContext string
	Desired      string // the checkpoint reason wanted when Fallback
	Fallback     bool   // the desired checkpoint was missing; an earlier one is used
	Warnings     []string
}

// ErrNoBoundary means no verified boundary with a checkpoint remains.
var ErrNoBoundary = errors.New("no verified boundary with a checkpoint to resume from")

// ErrEmpty means the manifest has no dispatches.
var ErrEmpty = errors.New("manifest is empty or entirely corrupted; cannot resume")

// GroupAttempts turns attempts (in manifest order) into logical dispatches, sorted by the
// time of their newest attempt (seq breaks ties). Attempts with unknown times take
// the time of the nearest earlier seq that has one.
func GroupAttempts(attempts []Attempt) []Dispatch {
	attempts = append([]Attempt(nil), attempts...) // times are filled in on a copy
	bySeq := map[int]*Attempt{}
	var seqs []int
	for i := range attempts {
		a := &attempts[i]
		if _, dup := bySeq[a.Seq]; !dup {
			seqs = append(seqs, a.Seq)
		}
		bySeq[a.Seq] = a
	}
	sort.Ints(seqs)
	var last time.Time
	var pending []*Attempt // inferred, waiting for the next known time
	for _, s := range seqs {
		a := bySeq[s]
		if a.Time.IsZero() {
			a.Time, a.TimeFrom = last, "inferred"
			pending = append(pending, a)
			continue
		}
		a.TimeMax, last = a.Time, a.Time
		for _, p := range pending {
			p.TimeMax = a.Time
		}
		pending = pending[:0]
	}

	root := func(seq int) int {
		seen := map[int]bool{}
		for {
			a := bySeq[seq]
			if a == nil || a.ReplayOf == nil || seen[seq] || bySeq[*a.ReplayOf] == nil {
				return seq
			}
			seen[seq] = true
			seq = *a.ReplayOf
		}
	}
	groups := map[int]*Dispatch{}
	var roots []int
	for _, s := range seqs {
		r := root(s)
		g := groups[r]
		if g == nil {
			g = &Dispatch{}
			groups[r] = g
			roots = append(roots, r)
		}
		g.Attempts = append(g.Attempts, *bySeq[s])
	}
	out := make([]Dispatch, 0, len(roots))
	for _, r := range roots {
		out = append(out, *groups[r])
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].Latest().Time, out[j].Latest().Time
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return out[i].Latest().Seq < out[j].Latest().Seq
	})
	return out
}

// Phases lists phases in order of first appearance in the manifest, with their
// status.
func Phases(attempts []Attempt, dispatches []Dispatch) []PhaseState {
	byRoot := map[int]Dispatch{}
	for _, d := range dispatches {
		byRoot[d.Seq()] = d
	}
	index := map[string]int{}
	var phases []PhaseState
	for _, a := range attempts {
		d, isRoot := byRoot[a.Seq]
		if !isRoot {
			continue
		}
		i, ok := index[a.Phase]
		if !ok {
			i = len(phases)
			index[a.Phase] = i
			phases = append(phases, PhaseState{Phase: a.Phase, Status: "complete"})
		}
		p := &phases[i]
		p.Seqs = append(p.Seqs, d.Seq())
		switch {
		case d.Latest().Status == "dispatched":
			p.Status = "in flight"
		case !d.Done() && p.Status == "complete":
			p.Status = "incomplete"
		}
	}
	return phases
}

// Verifier checks one completed attempt.
type Verifier func(d Dispatch, a Attempt) Finding

// Build plans a replay from the manifest's attempts (in manifest order) and the
// store's checkpoints.
func Build(attempts []Attempt, checkpoints []Checkpoint, verify Verifier, opt Options) (*Plan, error) {
	if len(attempts) == 0 {
		return nil, ErrEmpty
	}
	ds := GroupAttempts(attempts)
	p := &Plan{Dispatches: ds, Phases: Phases(attempts, ds)}

	// The earliest dispatch that is not done, or done and not verified.
	problem := -1
	for i, d := range ds {
		if !d.Done() {
			problem = i
			break
		}
		if verify == nil {
			continue
		}
		f := verify(d, d.Latest())
		p.Findings = append(p.Findings, f)
		if !f.OK {
			problem = i
			break
		}
	}
	p.crashPoint(ds, problem)
	if problem < 0 && opt.FromPhase == "" && opt.FromSeq == 0 {
		p.Complete = true
		p.Skip = ds
		return p, nil
	}

	// The time replay must go back to: the problem's, or the start of the phase
	// asked for.
	var target time.Time
	if problem >= 0 {
		target = ds[problem].Latest().Time
		p.ProblemSeq, p.ProblemPhase = ds[problem].Seq(), ds[problem].Phase()
	}
	autoTarget := target
	if opt.FromSeq != 0 {
		phase, ok := phaseOfSeq(attempts, ds, opt.FromSeq)
		if !ok {
			return nil, fmt.Errorf("--from-seq %d: no dispatch with that seq in the manifest", opt.FromSeq)
		}
		opt.FromPhase = phase
	}
	if opt.FromPhase != "" {
		start, ok := phaseStart(ds, opt.FromPhase)
		if !ok {
			return nil, fmt.Errorf("--from-phase %s: no dispatch in that phase; phases: %s", opt.FromPhase, phaseNames(p.Phases))
		}
		// The automatic resume point is the boundary that would be restored
		// without the override, not the problem dispatch itself: asking for the
		// start of the phase that boundary begins redoes no verified work.
		autoPoint := autoTarget
		if !opt.NoRestore && problem >= 0 {
			if cp := newestBefore(checkpoints, ds, autoTarget); cp != nil {
				autoPoint = cp.Time
			}
		}
		switch {
		case problem >= 0 && start.Before(autoPoint):
			p.Warnings = append(p.Warnings, fmt.Sprintf("phase %s is earlier than the automatic resume point (phase %s): verified work will be redone", opt.FromPhase, p.ProblemPhase))
		case problem >= 0 && start.After(autoTarget):
			p.Warnings = append(p.Warnings, fmt.Sprintf("phase %s is later than the automatic resume point (phase %s): seq %d is not done or not verified and will not be re-executed", opt.FromPhase, p.ProblemPhase, p.ProblemSeq))
		}
		target = start
		p.ProblemPhase = opt.FromPhase
	}

	if opt.NoRestore {
		p.ResumePhase = p.ProblemPhase
		p.split(ds, target)
		return p, nil
	}

	cp := newestBefore(checkpoints, ds, target)
	if cp == nil {
		return p, ErrNoBoundary
	}
	p.Restore = cp
	p.split(ds, cp.Time)
	if len(p.Redo) > 0 {
		p.ResumePhase = p.Redo[0].Phase()
	} else {
		p.ResumePhase = p.ProblemPhase
	}
	if desired := desiredBoundary(p.ProblemPhase); desired != "" && p.ResumePhase != p.ProblemPhase {
		p.Desired, p.Fallback = desired, true
	}
	return p, nil
}

// split puts the dispatches certainly taken before t in Skip and the rest in
// Redo: a restore undoes everything after its checkpoint, so a wave is redone
// whole, and a dispatch whose time is only bounded is redone when it may have
// been taken after t.
func (p *Plan) split(ds []Dispatch, t time.Time) {
	for _, d := range ds {
		if max := d.Latest().TimeMax; !max.IsZero() && max.Before(t) {
			p.Skip = append(p.Skip, d)
		} else {
			p.Redo = append(p.Redo, d)
		}
	}
}

// crashPoint says where the pipeline stopped: its earliest failure (a
// dispatch whose newest attempt failed or ended in error; later failures are
// named after it), else the newest dispatch in flight, else the dispatch that
// failed verification.
func (p *Plan) crashPoint(ds []Dispatch, problem int) {
	var failures []int
	for i, d := range ds {
		if st := d.Latest().Status; !d.Done() && (st == "failed" || st == "error") {
			failures = append(failures, i)
		}
	}
	if len(failures) > 0 {
		first := ds[failures[0]]
		p.CrashPhase, p.CrashContext = first.Phase(), describe(first.Latest())
		if len(failures) > 1 {
			var later []string
			for _, i := range failures[1:] {
				later = append(later, fmt.Sprintf("seq %d", ds[i].Latest().Seq))
			}
			p.CrashContext += fmt.Sprintf(", the first of %d failures (later: %s)", len(failures), strings.Join(later, ", "))
		}
		return
	}
	for i := len(ds) - 1; i >= 0; i-- {
		if !ds[i].Done() {
			a := ds[i].Latest()
			p.CrashPhase, p.CrashContext = ds[i].Phase(), describe(a)
			return
		}
	}
	if problem >= 0 {
		a := ds[problem].Latest()
		p.CrashPhase = ds[problem].Phase()
		p.CrashContext = fmt.Sprintf("seq %d (%s) completed but failed verification", a.Seq, orDash(a.Role))
		return
	}
	if len(ds) > 0 {
		p.CrashPhase, p.CrashContext = ds[len(ds)-1].Phase(), "no crash: every dispatch completed"
	}
}

func describe(a Attempt) string {
	what := orDash(a.Role)
	if a.Task != nil {
		what += fmt.Sprintf(", task %d", *a.Task)
	}
	switch a.Status {
	case "dispatched":
		return fmt.Sprintf("seq %d (%s) in flight", a.Seq, what)
	default:
		return fmt.Sprintf("seq %d (%s) %s", a.Seq, what, a.Status)
	}
}

// newestBefore is the newest boundary checkpoint taken at or before t that still
// describes a state of this pipeline's timeline.
func newestBefore(cps []Checkpoint, ds []Dispatch, t time.Time) *Checkpoint {
	var best *Checkpoint
	for i := range cps {
		cp := &cps[i]
		if !IsBoundaryReason(cp.Reason) || cp.Time.After(t) || abandoned(cp, ds) {
			continue
		}
		if best == nil || !cp.Time.Before(best.Time) {
			best = cp
		}
	}
	return best
}

// abandoned reports whether a checkpoint was taken on a timeline a later replay
// discarded: some dispatch had an attempt before it and its next attempt after
// it, so a restore went back past the checkpoint and redid that dispatch. The
// checkpoint holds work that was thrown away.
func abandoned(cp *Checkpoint, ds []Dispatch) bool {
	for _, d := range ds {
		for i := 0; i+1 < len(d.Attempts); i++ {
			if d.Attempts[i].Time.Before(cp.Time) && d.Attempts[i+1].Time.After(cp.Time) {
				return true
			}
		}
	}
	return false
}

func phaseOfSeq(attempts []Attempt, ds []Dispatch, seq int) (string, bool) {
	for _, d := range ds {
		for _, a := range d.Attempts {
			if a.Seq == seq {
				return d.Phase(), true
			}
		}
	}
	return "", false
}

// phaseStart is the time of the earliest dispatch of phase.
func phaseStart(ds []Dispatch, phase string) (time.Time, bool) {
	for _, d := range ds {
		if d.Phase() == phase {
			return d.Latest().Time, true
		}
	}
	return time.Time{}, false
}

func phaseNames(ps []PhaseState) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += ", "
		}
		s += p.Phase
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
