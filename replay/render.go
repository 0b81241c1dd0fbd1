package replay

import (
	"fmt"
	"strings"
	"time"
)

// Report is a plan with the context it is shown in: the dry-run output, and the
// document behind `replay --dry-run --json`.
type Report struct {
	Source   string    // the manifest read
	Skill    string    // from .pipeline-active or the dispatch files' headers
	Session  string    // the original pipeline's session id
	Started  time.Time // the first dispatch's time (zero: unknown)
	Plan     *Plan
	Writes   []string // paths the restore would write
	Removes  []string // paths the restore would remove
	Warnings []string

	Head *HeadMove // the branch move the restore makes (nil: none)
}

// RenderDryRun writes the plan in the replay seed's dry-run format, followed by
// the checkpoint to restore, the files it would change and the verification
// findings.
func RenderDryRun(r Report) string {
	var b strings.Builder
	p := r.Plan
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	started := "unknown"
	if !r.Started.IsZero() {
		started = r.Started.UTC().Format(time.RFC3339)
	}
	line("# Replay Plan (dry-run)")
	line("")
	line("**Source:** %s", r.Source)
	line("**Original pipeline:** %s | Session: %s | Started: %s", orDash(r.Skill), orDash(r.Session), started)
	line("**Crashed at:** Phase %s, %s", orDash(p.CrashPhase), p.CrashContext)
	switch {
	case p.Complete:
		line("**Resume point:** none: every dispatch completed and was verified")
	case p.Restore != nil:
		line("**Resume point:** Phase %s boundary (%s)", orDash(p.ResumePhase), p.Restore.Reason)
	default:
		line("**Resume point:** Phase %s, on the current disk state (no restore)", orDash(p.ResumePhase))
	}
	line("**Work preserved:** %s", preserved(r))
	if p.Fallback {
		line("")
		line("%s", FallbackMessage(p))
	}
	line("")
	line("## Dispatches to skip (verified complete)")
	line("| Seq | Role | Phase | Summary |")
	line("|-----|------|-------|---------|")
	for _, d := range p.Skip {
		a := d.Latest()
		line("| %s | %s | %s | %s |", seqLabel(d), cell(a.Role), cell(d.Phase()), cell(a.Summary))
	}
	line("")
	line("## Dispatches to re-execute")
	line("| Seq | Role | Phase | Original Status | Template |")
	line("|-----|------|-------|-----------------|----------|")
	for _, d := range p.Redo {
		a := d.Latest()
		line("| %s | %s | %s | %s | %s |", seqLabel(d), cell(a.Role), cell(d.Phase()), cell(a.Status), cell(Template(a)))
	}
	line("")
	line("## Checkpoint to restore")
	if p.Restore == nil {
		line("none (--no-restore: the current disk state is kept)")
	} else {
		line("%s %s (taken %s)", short(p.Restore.ID), p.Restore.Reason, p.Restore.Time.UTC().Format(time.RFC3339))
		line("")
		line("Would write (%d):", len(r.Writes))
		for _, f := range r.Writes {
			line("- %s", f)
		}
		line("Would remove (%d):", len(r.Removes))
		for _, f := range r.Removes {
			line("- %s", f)
		}
		renderHeadMove(&b, r)
	}
	line("")
	line("## Verification")
	line("| Seq | Role | Kind | Result |")
	line("|-----|------|------|--------|")
	for _, f := range p.Findings {
		result := "ok: " + f.Detail
		if !f.OK {
			result = "FAILED: " + f.Detail
		}
		line("| %d | %s | %s | %s |", f.Seq, cell(f.Role), f.Kind, cell(result))
	}
	return b.String()
}

// FallbackMessage is the warning printed when the desired checkpoint is missing.
func FallbackMessage(p *Plan) string {
	return fmt.Sprintf("Desired checkpoint %s not found. Falling back to %s. Replaying from Phase %s instead of Phase %s.",
		p.Desired, p.Restore.Reason, p.ResumePhase, p.ProblemPhase)
}

// seqLabel shows a replayed dispatch's newest attempt with its origin: "7 (of 5)".
func seqLabel(d Dispatch) string {
	a := d.Latest()
	if a.Seq == d.Seq() {
		return fmt.Sprint(a.Seq)
	}
	return fmt.Sprintf("%d (of %d)", a.Seq, d.Seq())
}

// preserved estimates the work a resume keeps: the time from the first dispatch
// to the restored checkpoint, and the phases kept whole.
func preserved(r Report) string {
	p := r.Plan
	phases := completedPhasesBefore(p)
	if len(p.Skip) == 0 || len(phases) == 0 && p.Restore == nil {
		return "none"
	}
	until := time.Time{}
	if p.Restore != nil {
		until = p.Restore.Time
	} else if len(p.Redo) > 0 {
		until = p.Redo[0].Latest().Time
	} else {
		until = p.Skip[len(p.Skip)-1].Latest().Time
	}
	est := "unknown"
	if !r.Started.IsZero() && !until.Before(r.Started) {
		est = Elapsed(until.Sub(r.Started))
	}
	switch len(phases) {
	case 0:
		return fmt.Sprintf("%s (part of phase %s)", est, orDash(p.ResumePhase))
	case 1:
		return fmt.Sprintf("%s (phase %s)", est, phases[0])
	}
	return fmt.Sprintf("%s (phases %s through %s)", est, phases[0], phases[len(phases)-1])
}

// Elapsed formats a duration as crucible's pipeline status does: "Ns" under a
// minute, "Nm" under an hour, else "Nh Mm".
func Elapsed(d time.Duration) string {
	s := int(d.Seconds())
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm", s/60)
	}
	return fmt.Sprintf("%dh %dm", s/3600, s%3600/60)
}

// cell makes text safe inside a markdown table cell.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
