package replay

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rewind-cli/rewind/gitexec"
	"github.com/rewind-cli/rewind/manifest"
)

// Job is one re-dispatch: a dispatch of the plan sent again under a new seq.
type Job struct {
	Seq          int     // the new seq
	ReplayOf     int     // the original seq
	From         Attempt // the attempt being replayed (role, phase, task, file)
	DispatchFile string  // absolute path of the new dispatch file

	// Original is when the original dispatch (ReplayOf) was sent, zero when
	// unknown: the original run's waves are the ones to follow, and the times of
	// earlier replays of it say nothing about them.
	Original time.Time
}

// waveTime is the time Waves places a job at: the original dispatch's.
func (j Job) waveTime() time.Time {
	if !j.Original.IsZero() {
		return j.Original
	}
	return j.From.Time
}

// Outcome is how a job ended.
type Outcome struct {
	Job         Job
	Status      string // completed or failed
	ExitCode    int
	Summary     string
	OutputChars int
	Duration    int  // whole seconds
	NotSent     bool // the stop rule kept it from starting (see RunWave)
}

// Wave is a set of jobs that may run in parallel, and the checkpoint reason to
// take before it starts ("" for none).
type Wave struct {
	Checkpoint string
	Jobs       []Job
}

// Waves splits jobs, in plan order, into waves that may run in parallel: the
// boundary checkpoints of the original run (taken between the original
// dispatches, a wave's pre-wave-N for instance) and phase changes separate them.
// Jobs are placed by their original dispatch's time, so a second replay keeps
// the first run's waves. Each wave after the first carries the reason of the
// checkpoint to take before it: the original boundary's reason, or the start of
// a phase when the phase changes without one.
func Waves(jobs []Job, checkpoints []Checkpoint) []Wave {
	var groups []Wave
	for i, j := range jobs {
		if i == 0 {
			groups = append(groups, Wave{Jobs: []Job{j}})
			continue
		}
		prev := jobs[i-1].From
		reason := ""
		for _, cp := range checkpoints {
			if IsBoundaryReason(cp.Reason) && cp.Time.After(jobs[i-1].waveTime()) && !cp.Time.After(j.waveTime()) {
				reason = cp.Reason // the newest boundary between them
			}
		}
		if reason == "" && j.From.Phase != prev.Phase {
			reason = PhaseBoundaryReason(j.From.Phase)
		}
		if reason == "" {
			last := &groups[len(groups)-1]
			last.Jobs = append(last.Jobs, j)
			continue
		}
		groups = append(groups, Wave{Checkpoint: reason, Jobs: []Job{j}})
	}
	return groups
}

// PhaseBoundaryReason is the checkpoint reason for the start of a phase: the
// build pipeline's when it has one, else rewind's own pre-phase-<P>.
func PhaseBoundaryReason(phase string) string {
	if r := desiredBoundary(phase); r != "" {
		return r
	}
	return "pre-phase-" + phase
}

// Runner runs re-dispatches through a user command (replay --exec).
type Runner struct {
	Command     string // run with sh -c in the work tree
	WorkTree    string
	DispatchDir string
	Session     string
	Jobs        int // parallel jobs within a wave

	Env []string // more KEY=VALUE pairs for the command (an A/B arm's)
}

// Run runs one job: the agent's stdout becomes the result file, its length the
// output_chars, its last "SUMMARY:" line (else its first non-empty line) the
// summary. The agent's stderr goes to <seq>-<template>-stderr.log beside it, so
// rewind's own output never mixes with the agent's.
func (r Runner) Run(ctx context.Context, j Job) (Outcome, error) {
	base := strings.TrimSuffix(filepath.Base(j.DispatchFile), ".md")
	stderrPath := filepath.Join(r.DispatchDir, base+"-stderr.log")
	stderr, err := os.Create(stderrPath)
	if err != nil {
		return Outcome{}, err
	}
	defer stderr.Close()
	task := ""
	if j.From.Task != nil {
		task = strconv.Itoa(*j.From.Task)
	}
	env := []string{
		"REWIND_DISPATCH_FILE=" + j.DispatchFile,
		"REWIND_SEQ=" + strconv.Itoa(j.Seq),
		"REWIND_ROLE=" + j.From.Role,
		"REWIND_PHASE=" + j.From.Phase,
		"REWIND_TASK=" + task,
		"REWIND_DISPATCH_DIR=" + r.DispatchDir,
		"REWIND_REPLAY_OF=" + strconv.Itoa(j.ReplayOf),
		"REWIND_REPLAY_SESSION=" + r.Session,
		"REWIND_WORK_TREE=" + r.WorkTree,
	}
	env = append(env, r.Env...)
	var stdout bytes.Buffer
	start := time.Now()
	code, err := gitexec.User{Dir: r.WorkTree, Env: env}.Run(ctx, r.Command, nil, &stdout, stderr)
	if err != nil {
		return Outcome{}, fmt.Errorf("seq %d: %w", j.Seq, err)
	}
	result := filepath.Join(r.DispatchDir, base+"-result.md")
	if err := manifest.WriteFileAtomic(result, stdout.Bytes(), 0o644); err != nil {
		return Outcome{}, err
	}
	o := Outcome{Job: j, Status: "completed", ExitCode: code, Summary: Summary(stdout.String()),
		OutputChars: utf8.RuneCount(stdout.Bytes()), Duration: int(time.Since(start).Seconds())}
	if code != 0 {
		o.Status = "failed"
	}
	return o, nil
}

// RunWave runs a wave's jobs, at most r.Jobs at a time, and calls record for
// each outcome as it arrives (record is never called concurrently). It returns
// the outcomes in job order.
//
// The stop rule: once a job of the wave has failed, no other job starts. With
// --jobs 1 that means the jobs after the failed one are never sent; with
// --jobs N the jobs already running when it failed run to their end (an agent
// is never killed halfway through its work) and are recorded, and the jobs
// still waiting for a slot are never sent. A job never sent has NotSent set
// and no other field but Job.
func (r Runner) RunWave(ctx context.Context, g Wave, record func(Outcome) error) ([]Outcome, error) {
	limit := r.Jobs
	if limit < 1 {
		limit = 1
	}
	outcomes := make([]Outcome, len(g.Jobs))
	errs := make([]error, len(g.Jobs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	stopped := false
	sem := make(chan struct{}, limit)
	for i, j := range g.Jobs {
		sem <- struct{}{}
		mu.Lock()
		stop := stopped
		mu.Unlock()
		if stop {
			<-sem
			outcomes[i] = Outcome{Job: j, NotSent: true}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o, err := r.Run(ctx, j)
			mu.Lock()
			defer mu.Unlock()
			// Stopped before the record is written: a job waiting for a slot
			// sees the failure before the slot frees.
			if err != nil || o.Status != "completed" {
				stopped = true
			}
			if err == nil {
				err = record(o)
			}
			outcomes[i], errs[i] = o, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return outcomes, err
		}
	}
	return outcomes, nil
}

// Summary is the agent's summary: its last "SUMMARY:" line, else its first
// non-empty line.
func Summary(out string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if s, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "SUMMARY:"); ok {
			return strings.TrimSpace(s)
		}
	}
	for _, l := range lines {
		if s := strings.TrimSpace(l); s != "" {
			return s
		}
	}
	return ""
}
