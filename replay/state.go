package replay

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// State is the orchestrator's state rebuilt from disk for a resume, from (in
// priority order) the newest handoff-N-to-M.md, the ## Compression State section
// of pipeline-status.md, the manifest, the dispatch files and the build mode file.
type State struct {
	Goal        string
	Mode        string // feature or refactor
	Baseline    string // the refactor baseline commit, when the mode file names one
	Decisions   []string
	Constraints []string
	NextSteps   []string
	Sources     []string // the files the state came from, in priority order
}

// LoadState reads the state files of a scratch directory and the build mode
// file. Handoff manifests are looked for in the scratch directory and in
// handoffDirs (the debugging skill keeps its own in /tmp/crucible-debug-<id>/).
// Warnings say what was missing.
func LoadState(scratch string, handoffDirs []string, modeFile string) (State, []string) {
	var st State
	var warnings []string
	if path := NewestHandoff(append([]string{scratch}, handoffDirs...)); path != "" {
		if data, err := os.ReadFile(path); err == nil {
			st.fromHandoff(string(data))
			st.Sources = append(st.Sources, path)
		}
	}
	status := filepath.Join(scratch, "pipeline-status.md")
	if data, err := os.ReadFile(status); err == nil {
		if st.fromCompressionState(string(data)) {
			st.Sources = append(st.Sources, status)
		}
	}
	switch data, err := os.ReadFile(modeFile); {
	case modeFile == "":
		// Not a build pipeline: the build mode file is none of its state.
	case err == nil:
		mode, sha := parseModeFile(string(data))
		if st.Mode == "" {
			st.Mode = mode
		}
		st.Baseline = sha
		st.Sources = append(st.Sources, modeFile)
	case st.Mode == "":
		warnings = append(warnings, fmt.Sprintf("build mode file %s is missing; assuming feature mode", modeFile))
	}
	if st.Mode == "" && modeFile != "" {
		st.Mode = "feature"
	}
	if st.Goal == "" {
		warnings = append(warnings, "no handoff manifest or pipeline-status.md Compression State in "+scratch+"; the goal is unknown")
	}
	return st, warnings
}

// handoffName matches a phase handoff manifest, handoff-<A>-to-<B>.md, whatever
// its phase tokens: build writes handoff-2-to-3.md, debugging
// handoff-0-to-1.md, handoff-synthesis-to-3.md, handoff-3.5-to-4.md.
var handoffName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^handoff-(.+)-to-(.+)\.md$`) })

type handoffFile struct {
	path     string
	from, to string
	modTime  time.Time
}

// phaseNumber reads a phase token as a number ("3", "3.5").
func phaseNumber(tok string) (float64, bool) {
	f, err := strconv.ParseFloat(tok, 64)
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// newer reports whether h is a later boundary than o. When every token of both
// is a number, the target phase decides, then the source phase; otherwise
// ("synthesis") the file that was written last, the name breaking ties.
func (h handoffFile) newer(o handoffFile, numeric bool) bool {
	if numeric {
		ht, _ := phaseNumber(h.to)
		ot, _ := phaseNumber(o.to)
		if ht != ot {
			return ht > ot
		}
		hf, _ := phaseNumber(h.from)
		of, _ := phaseNumber(o.from)
		if hf != of {
			return hf > of
		}
	} else if !h.modTime.Equal(o.modTime) {
		return h.modTime.After(o.modTime)
	}
	return h.path > o.path
}

// NewestHandoff is the handoff manifest of the latest boundary among dirs, or
// "".
func NewestHandoff(dirs []string) string {
	var all []handoffFile
	numeric := true
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			m := handoffName().FindStringSubmatch(e.Name())
			if m == nil || !e.Type().IsRegular() {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue
			}
			h := handoffFile{path: filepath.Join(dir, e.Name()), from: m[1], to: m[2], modTime: info.ModTime()}
			_, fromNum := phaseNumber(h.from)
			_, toNum := phaseNumber(h.to)
			numeric = numeric && fromNum && toNum
			all = append(all, h)
		}
	}
	if len(all) == 0 {
		return ""
	}
	best := all[0]
	for _, h := range all[1:] {
		if h.newer(best, numeric) {
			best = h
		}
	}
	return best.path
}

// fromHandoff reads a phase handoff manifest.
func (st *State) fromHandoff(text string) {
	var section string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = strings.TrimSpace(h)
			continue
		}
		if v, ok := boldField(line, "Goal"); ok {
			st.Goal = v
			continue
		}
		if v, ok := boldField(line, "Mode"); ok {
			st.Mode = strings.ToLower(strings.TrimSpace(v))
			continue
		}
		item, ok := strings.CutPrefix(line, "- ")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(section, "Inputs for Phase"):
			st.NextSteps = append(st.NextSteps, "Use "+strings.ReplaceAll(item, "**", ""))
		case section == "Decisions Carried Forward":
			st.Decisions = append(st.Decisions, item)
		case section == "Active Constraints":
			st.Constraints = append(st.Constraints, item)
		}
	}
}

func boldField(line, name string) (string, bool) {
	v, ok := strings.CutPrefix(line, "**"+name+":**")
	return strings.TrimSpace(v), ok
}

// fromCompressionState fills what the handoff did not give from the
// "## Compression State" section of pipeline-status.md. It reports whether the
// section exists.
func (st *State) fromCompressionState(text string) bool {
	_, rest, found := strings.Cut(text, "\n## Compression State")
	if !found {
		if !strings.HasPrefix(text, "## Compression State") {
			return false
		}
		rest = strings.TrimPrefix(text, "## Compression State")
	}
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	var goal string
	var decisions, constraints, next []string
	var list *[]string
	for _, line := range strings.Split(rest, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.HasPrefix(line, "Goal:"):
			goal, list = strings.TrimSpace(strings.TrimPrefix(line, "Goal:")), nil
		case strings.HasPrefix(line, "Key Decisions"):
			list = &decisions
		case strings.HasPrefix(line, "Active Constraints"):
			list = &constraints
		case strings.HasPrefix(line, "Next Steps"):
			list = &next
		case list != nil && strings.HasPrefix(line, "- "):
			*list = append(*list, strings.TrimPrefix(line, "- "))
		case list != nil && numbered().MatchString(line):
			*list = append(*list, numbered().ReplaceAllString(line, ""))
		}
	}
	if st.Goal == "" {
		st.Goal = goal
	}
	if len(st.Decisions) == 0 {
		st.Decisions = decisions
	}
	if len(st.Constraints) == 0 {
		st.Constraints = constraints
	}
	if len(st.NextSteps) == 0 {
		st.NextSteps = next
	}
	return true
}

var numbered = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d+\.\s+`) })

var shaRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b[0-9a-f]{7,64}\b`) })

// parseModeFile reads the build mode file: "mode: refactor" or "mode: feature"
// and the baseline commit, whose line format crucible leaves open (the first
// hexadecimal commit id in the file is taken).
func parseModeFile(text string) (mode, sha string) {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), "mode") {
			mode = strings.ToLower(strings.TrimSpace(v))
			continue
		}
		if sha == "" {
			sha = shaRE().FindString(strings.ToLower(line))
		}
	}
	return mode, sha
}

// CSBInput is what the synthetic Compression State Block is made from.
type CSBInput struct {
	State        State
	Plan         *Plan
	Skill        string
	Session      string // the replay session
	Scratch      string
	Restored     []string // paths the restore wrote
	Removed      []string // paths the restore removed
	Redispatched map[int]int
}

// RenderCSB writes the synthetic Compression State Block a resumed orchestrator
// starts from (crucible's build skill format, with the replay's health reset and
// the prior session's decisions).
func RenderCSB(in CSBInput) string {
	var b strings.Builder
	p := in.Plan
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	list := func(items []string, none string) {
		if len(items) == 0 {
			line("- %s", none)
		}
		for _, it := range items {
			line("- %s", it)
		}
	}
	goal := in.State.Goal
	if goal == "" {
		goal = "(unknown: no handoff manifest or Compression State was found)"
	}
	line("===COMPRESSION_STATE===")
	line("Goal: %s", goal)
	line("Skill: %s", orDash(in.Skill))
	line("Phase: %s", orDash(p.ResumePhase))
	line("Health: GREEN (reset on resume)")
	if in.State.Mode != "" {
		line("Mode: %s", in.State.Mode)
	}
	line("")
	line("Progress:")
	done := completedPhasesBefore(p)
	switch len(done) {
	case 0:
	case 1:
		line("- Phase %s completed in prior session", done[0])
	default:
		line("- Phases %s completed in prior session", strings.Join(done, ", "))
	}
	if p.Restore != nil {
		line("- Resuming from %s via replay", p.Restore.Reason)
	} else {
		line("- Resuming on the current disk state via replay (no checkpoint restored)")
	}
	for _, d := range p.Skip {
		if a := d.Latest(); a.Summary != "" {
			line("- seq %d %s (phase %s): %s", a.Seq, orDash(a.Role), orDash(d.Phase()), a.Summary)
		}
	}
	line("")
	line("Key Decisions (prior session):")
	list(in.State.Decisions, "none recorded")
	line("")
	line("Active Constraints:")
	for _, c := range in.State.Constraints {
		line("- %s", c)
	}
	if len(done) > 0 {
		line("- Replay session %s -- prior work verified through Phase %s", in.Session, done[len(done)-1])
	} else {
		line("- Replay session %s -- no phase before the resume point", in.Session)
	}
	line("")
	line("Files Modified:")
	if len(in.Restored)+len(in.Removed) == 0 {
		line("- see git log")
	}
	for _, f := range in.Restored {
		line("- %s: restored to the checkpoint", f)
	}
	for _, f := range in.Removed {
		line("- %s: removed by the restore (not in the checkpoint)", f)
	}
	line("")
	line("Scratch State:")
	line("- Location: %s", orDash(in.Scratch))
	line("- Recovery: %s", recovery(in.State.Sources))
	line("")
	line("Next Steps:")
	n := 0
	for _, d := range p.Redo {
		a := d.Latest()
		n++
		// Named by the original seq, which the new entry's replay_of carries.
		step := fmt.Sprintf("%d. Re-dispatch seq %d (%s, phase %s", n, d.Seq(), orDash(a.Role), orDash(d.Phase()))
		if a.Seq != d.Seq() {
			step += fmt.Sprintf("; last attempt seq %d", a.Seq)
		}
		step += ")"
		if s, ok := in.Redispatched[a.Seq]; ok {
			step += fmt.Sprintf(" as seq %d", s)
		}
		line("%s", step)
	}
	for _, s := range in.State.NextSteps {
		n++
		line("%d. %s", n, s)
	}
	if n == 0 {
		line("1. Continue phase %s", orDash(p.ResumePhase))
	}
	line("===END_COMPRESSION_STATE===")
	return b.String()
}

// completedPhasesBefore lists the phases all of whose dispatches are kept.
func completedPhasesBefore(p *Plan) []string {
	redo := map[string]bool{}
	for _, d := range p.Redo {
		redo[d.Phase()] = true
	}
	var out []string
	for _, ph := range p.Phases {
		if !redo[ph.Phase] && ph.Status == "complete" {
			out = append(out, ph.Phase)
		}
	}
	return out
}

// recovery lists the files a resumed orchestrator reads first: the state files
// this CSB was rebuilt from, in priority order, then the manifest; the generic
// list when none was found.
func recovery(sources []string) string {
	if len(sources) == 0 {
		return "pipeline-status.md, handoff manifests, manifest.jsonl"
	}
	var names []string
	for _, s := range sources {
		names = append(names, filepath.Base(s))
	}
	return strings.Join(append(names, "manifest.jsonl"), ", ")
}
