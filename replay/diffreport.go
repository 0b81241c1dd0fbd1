package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The diff report of an A/B replay, from the manifest alone (and the arms'
// checkpoints for the artifact diff). Definitions:
//
//   - A run's dispatches are the entries of its replay_session (the
//     re-dispatches rewind wrote and any follow-up an agent of the arm
//     recorded under the session). Total dispatches counts those sent:
//     completed, failed or still dispatched; a gate round skipped because the
//     gate had passed, and a dispatch not sent after a failure, do not count.
//     The original's are the original seqs the runs re-dispatch.
//   - Quality gate rounds count the dispatches so counted whose role is
//     red-team or quality-gate (crucible's crucible-red-team and crucible-qg-*
//     too, but not the loop's fix crucible-qg-fix), summed over the phases.
//   - Wall clock runs from the first dispatch's start (its dispatch file's
//     **Timestamp:**) to the last one's end (start plus duration_s). Entries
//     have no timestamp of their own, so the seed's "first to last entry
//     timestamps" cannot be had.
//   - Acceptance tests are FAIL when any dispatch's summary says tests FAIL
//     ("acceptance tests: FAIL"), else PASS when one says they pass, else
//     unknown.

// RunStats are one run's metrics (or the original's over the same range).
type RunStats struct {
	Session    string
	Arm        string // "" for the original
	Repeat     int
	Dispatches int
	GateRounds int
	// GateByPhase is GateRounds per phase.
	GateByPhase map[string]int
	Wall        *time.Duration
	Acceptance  string // PASS, FAIL or unknown
	Status      string // completed, failed or in flight
	Checkpoint  string // the checkpoint of the run's tree at its end ("" when none)
	// ByOriginal is the run's newest attempt of each original seq.
	ByOriginal map[int]Attempt
}

var testsRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\btests?\b\W+(?:[a-z]+\W+){0,3}?(pass(?:ed|es)?|fail(?:ed|s|ures?)?)\b`)
})

func acceptance(summaries []string) string {
	verdict := "unknown"
	for _, s := range summaries {
		for _, m := range testsRE().FindAllStringSubmatch(s, -1) {
			if strings.HasPrefix(strings.ToLower(m[1]), "fail") {
				return "FAIL"
			}
			verdict = "PASS"
		}
	}
	return verdict
}

func sent(a Attempt) bool {
	return a.Status == "completed" || a.Status == "failed" || a.Status == "dispatched" || a.Status == LegacyReplayed
}

func statsOf(atts []Attempt) RunStats {
	st := RunStats{ByOriginal: map[int]Attempt{}, GateByPhase: map[string]int{}, Status: "completed"}
	var summaries []string
	var start, end, lastStart time.Time
	known, ended, lastEnds := false, false, false
	for _, a := range atts {
		if a.ReplayOf != nil {
			st.ByOriginal[*a.ReplayOf] = a
		}
		if a.Summary != "" {
			summaries = append(summaries, a.Summary)
		}
		switch a.Status {
		case "failed":
			st.Status = "failed"
		case "dispatched":
			if st.Status != "failed" {
				st.Status = "in flight"
			}
		}
		if !sent(a) {
			continue
		}
		st.Dispatches++
		if IsGateRole(a.Role) {
			st.GateRounds++
			st.GateByPhase[a.Phase]++
		}
		if a.Time.IsZero() || a.TimeFrom == "inferred" {
			continue
		}
		if !known || a.Time.Before(start) {
			start = a.Time
		}
		// A dispatch without duration_s (one recorded by a skill's
		// dispatch after that gave none) has no known end: when it is the
		// last to start, the run's end cannot be had.
		if !known || !a.Time.Before(lastStart) {
			lastStart, lastEnds = a.Time, a.Duration != nil
		}
		if a.Duration != nil {
			if e := a.Time.Add(time.Duration(*a.Duration) * time.Second); !ended || e.After(end) {
				end, ended = e, true
			}
		}
		known = true
	}
	if known && ended && lastEnds {
		d := end.Sub(start)
		st.Wall = &d
	}
	st.Acceptance = acceptance(summaries)
	return st
}

// Experiment is one A/B replay as the manifest records it.
type Experiment struct {
	Original    string // the original pipeline's session
	Base        string // the A/B session the runs are named after
	Mutations   []string
	Runs        []RunStats // by arm (control first), then repeat
	Orig        RunStats   // the original run over the same dispatches
	Origs       map[int]Attempt
	Checkpoints map[string]string // session -> checkpoint id (the run's tree at its end)
	// OriginalCheckpoint is the work tree's checkpoint an experiment without
	// a control compares the mutated tree with ("" when none).
	OriginalCheckpoint string
}

var runSessionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.+)-(control|mutated)-([0-9]+)$`) })

// SplitRunSession splits a run's session into the A/B session, arm and
// repeat; ok is false for a session that is not a run's.
func SplitRunSession(s string) (base, arm string, repeat int, ok bool) {
	m := runSessionRE().FindStringSubmatch(s)
	if m == nil {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(m[3])
	if err != nil {
		return "", "", 0, false
	}
	return m[1], m[2], n, true
}

// Experiments lists the A/B sessions of a manifest's attempts, oldest first.
func Experiments(attempts []Attempt) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range attempts {
		if a.Arm == "" {
			continue
		}
		if base, _, _, ok := SplitRunSession(a.ReplaySession); ok && !seen[base] {
			seen[base] = true
			out = append(out, base)
		}
	}
	return out
}

// BuildExperiment gathers the runs of A/B session base.
func BuildExperiment(attempts []Attempt, original, base string) *Experiment {
	ex := &Experiment{Original: original, Base: base, Origs: map[int]Attempt{}, Checkpoints: map[string]string{}}
	bySeq := map[int]Attempt{}
	for _, a := range attempts {
		bySeq[a.Seq] = a
	}
	runs := map[string][]Attempt{}
	var order []string
	muts := map[string]bool{}
	for _, a := range attempts {
		b, _, _, ok := SplitRunSession(a.ReplaySession)
		if !ok || b != base {
			continue
		}
		if _, seen := runs[a.ReplaySession]; !seen {
			order = append(order, a.ReplaySession)
		}
		runs[a.ReplaySession] = append(runs[a.ReplaySession], a)
		if a.Mutation != "" && !muts[a.Mutation] {
			muts[a.Mutation] = true
			ex.Mutations = append(ex.Mutations, a.Mutation)
		}
		if a.ReplayOf != nil {
			if o, ok := bySeq[*a.ReplayOf]; ok && o.Arm == "" {
				ex.Origs[o.Seq] = o
			}
		}
	}
	for _, s := range order {
		st := statsOf(runs[s])
		_, st.Arm, st.Repeat, _ = SplitRunSession(s)
		st.Session = s
		ex.Runs = append(ex.Runs, st)
	}
	sort.SliceStable(ex.Runs, func(i, j int) bool {
		if ex.Runs[i].Arm != ex.Runs[j].Arm {
			return ex.Runs[i].Arm == ArmControl
		}
		return ex.Runs[i].Repeat < ex.Runs[j].Repeat
	})
	var origs []Attempt
	for _, a := range attempts {
		if _, ok := ex.Origs[a.Seq]; ok {
			origs = append(origs, a)
		}
	}
	ex.Orig = statsOf(origs)
	for _, o := range origs {
		ex.Orig.ByOriginal[o.Seq] = o
	}
	ex.Orig.Session = original
	return ex
}

// gatePhases are the phases with gate rounds in the original or a run, in
// name order.
func (ex *Experiment) gatePhases() []string {
	var phases []string
	seen := map[string]bool{}
	for _, r := range append([]RunStats{ex.Orig}, ex.Runs...) {
		for p := range r.GateByPhase {
			if !seen[p] {
				seen[p] = true
				phases = append(phases, p)
			}
		}
	}
	sort.Strings(phases)
	return phases
}

// ArmRuns are the runs of one arm, by repeat.
func (ex *Experiment) ArmRuns(arm string) []RunStats {
	var out []RunStats
	for _, r := range ex.Runs {
		if r.Arm == arm {
			out = append(out, r)
		}
	}
	return out
}

// Spread is a metric over an arm's runs.
type Spread struct {
	Mean, Min, Max float64
	N              int
}

func spreadOf(vals []float64) *Spread {
	if len(vals) == 0 {
		return nil
	}
	s := &Spread{Min: vals[0], Max: vals[0], N: len(vals)}
	sum := 0.0
	for _, v := range vals {
		sum += v
		s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
	}
	s.Mean = sum / float64(len(vals))
	return s
}

// Metric names, in report order.
var metricNames = []string{"dispatches", "gate_rounds", "wall_clock_s"}

func metricOf(r RunStats, name string) (float64, bool) {
	switch name {
	case "dispatches":
		return float64(r.Dispatches), true
	case "gate_rounds":
		return float64(r.GateRounds), true
	case "wall_clock_s":
		if r.Wall == nil {
			return 0, false
		}
		return r.Wall.Seconds(), true
	}
	if phase, ok := strings.CutPrefix(name, "gate_rounds:"); ok {
		return float64(r.GateByPhase[phase]), true
	}
	return 0, false
}

// ArmSpread is a metric's spread over an arm's runs (nil when no run has it).
func (ex *Experiment) ArmSpread(arm, metric string) *Spread {
	var vals []float64
	for _, r := range ex.ArmRuns(arm) {
		if v, ok := metricOf(r, metric); ok {
			vals = append(vals, v)
		}
	}
	return spreadOf(vals)
}

// Overlap reports whether two spreads' ranges overlap.
func Overlap(a, b *Spread) bool { return a.Min <= b.Max && b.Min <= a.Max }

// Repeats is the number of runs per arm (the mutated arm's).
func (ex *Experiment) Repeats() int { return len(ex.ArmRuns(ArmMutated)) }

// ArtifactStat is the artifact diff between two runs' trees.
type ArtifactStat struct {
	From, To         string // sessions
	FromID, ToID     string // checkpoint ids
	Files, Ins, Dels int
}

// RenderDiff writes the report in the seed's format; with a control arm the
// comparison that decides is mutated against control, with the original as a
// third column; with repeats, every metric shows the mean, min and max per
// arm, and whether the arms' ranges overlap.
func RenderDiff(ex *Experiment, artifacts []ArtifactStat) string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	control := ex.ArmRuns(ArmControl)
	mutated := ex.ArmRuns(ArmMutated)
	n := len(mutated)
	vs := ex.Base
	if n == 1 {
		vs = mutated[0].Session
	}
	if n > 1 {
		line("# Replay Diff: %s vs %s (%d runs per arm)", orDash(ex.Original), vs, n)
	} else {
		line("# Replay Diff: %s vs %s", orDash(ex.Original), vs)
	}
	line("")
	line("## Template Mutations")
	for _, m := range ex.Mutations {
		line("- %s", m)
	}
	line("")
	line("## Outcome Comparison")
	hasControl := len(control) > 0
	if hasControl {
		line("| Metric | Original | Control | Mutated | Delta |")
		line("|--------|----------|---------|---------|-------|")
	} else {
		line("| Metric | Original | Replayed | Delta |")
		line("|--------|----------|----------|-------|")
	}
	labels := map[string]string{"dispatches": "Total dispatches", "gate_rounds": "Quality gate rounds", "wall_clock_s": "Wall clock time"}
	rows := metricNames
	if phases := ex.gatePhases(); len(phases) > 1 {
		// The rounds per phase, after their total.
		rows = []string{"dispatches", "gate_rounds"}
		for _, p := range phases {
			rows = append(rows, "gate_rounds:"+p)
			labels["gate_rounds:"+p] = "Quality gate rounds, phase " + p
		}
		rows = append(rows, "wall_clock_s")
	}
	for _, m := range rows {
		orig := "-"
		if v, ok := metricOf(ex.Orig, m); ok {
			orig = fmtMetric(m, v)
		}
		mut := ex.ArmSpread(ArmMutated, m)
		base := mut
		cells := []string{labels[m], orig}
		if hasControl {
			base = ex.ArmSpread(ArmControl, m)
			cells = append(cells, fmtSpread(m, base))
		}
		cells = append(cells, fmtSpread(m, mut))
		delta := "-"
		switch {
		case hasControl && base != nil && mut != nil:
			delta = fmtDelta(m, mut.Mean-base.Mean)
		case !hasControl && mut != nil:
			if v, ok := metricOf(ex.Orig, m); ok {
				delta = fmtDelta(m, mut.Mean-v)
			}
		}
		cells = append(cells, delta)
		line("| %s |", strings.Join(cells, " | "))
	}
	accCells := []string{"Acceptance tests", ex.Orig.Acceptance}
	if hasControl {
		accCells = append(accCells, acceptanceCell(control))
	}
	accCells = append(accCells, acceptanceCell(mutated))
	same := acceptanceCell(control) == acceptanceCell(mutated)
	if !hasControl {
		// The original is one run: no change when every run of the
		// mutated arm has its outcome (not when the cells read alike:
		// "PASS" against "PASS 3/3").
		same = len(mutated) > 0
		for _, r := range mutated {
			same = same && r.Acceptance == ex.Orig.Acceptance
		}
	}
	if same {
		accCells = append(accCells, "=")
	} else {
		accCells = append(accCells, "changed")
	}
	line("| %s |", strings.Join(accCells, " | "))
	line("")
	if hasControl {
		line("Delta is mutated against control; the original run is shown for reference.")
	} else {
		line("No control arm (--no-control): delta is the replay against the original run.")
	}
	if n > 1 {
		line("")
		line("## Spread")
		for _, m := range metricNames {
			mut := ex.ArmSpread(ArmMutated, m)
			other, otherName := ex.ArmSpread(ArmControl, m), "control"
			if !hasControl {
				if v, ok := metricOf(ex.Orig, m); ok {
					other, otherName = &Spread{Mean: v, Min: v, Max: v, N: 1}, "original"
				} else {
					other = nil
				}
			}
			if mut == nil || other == nil {
				line("- %s: not measured", labels[m])
				continue
			}
			ranges := fmt.Sprintf("%s %s, mutated %s", otherName, fmtRange(m, other), fmtRange(m, mut))
			// Without a control the other side is the original's one run,
			// not N runs: say so rather than "per arm".
			runs := fmt.Sprintf("%d runs per arm", n)
			if !hasControl {
				runs = fmt.Sprintf("%d mutated runs against the original's one", n)
			}
			if Overlap(mut, other) {
				line("- %s: the ranges overlap (%s): no evidence of a difference at %s.", labels[m], ranges, runs)
			} else {
				line("- %s: the ranges do not overlap (%s): a difference at %s.", labels[m], ranges, runs)
			}
		}
	}
	line("")
	line("## Per-Dispatch Comparison")
	if n > 1 {
		line("(run 1 of each arm)")
	}
	var first RunStats
	if len(mutated) > 0 {
		first = mutated[0]
	}
	var firstControl *RunStats
	if hasControl {
		firstControl = &control[0]
	}
	if hasControl {
		line("| Seq | Role | Original Status | Control Status | Mutated Status | Summary Delta |")
		line("|-----|------|-----------------|----------------|----------------|---------------|")
	} else {
		line("| Seq | Role | Original Status | Replayed Status | Summary Delta |")
		line("|-----|------|-----------------|-----------------|---------------|")
	}
	var seqs []int
	for s := range ex.Origs {
		seqs = append(seqs, s)
	}
	sort.Ints(seqs)
	for _, s := range seqs {
		o := ex.Origs[s]
		cells := []string{strconv.Itoa(s), cell(o.Role), cell(o.Status)}
		refSummary := o.Summary
		if firstControl != nil {
			c, ok := firstControl.ByOriginal[s]
			cells = append(cells, attemptCell(c, ok))
			if ok {
				refSummary = c.Summary
			}
		}
		m, ok := first.ByOriginal[s]
		cells = append(cells, attemptCell(m, ok))
		switch {
		case !ok:
			cells = append(cells, "-")
		case m.Summary == refSummary:
			cells = append(cells, "same")
		default:
			cells = append(cells, cell(fmt.Sprintf("%q -> %q", refSummary, m.Summary)))
		}
		line("| %s |", strings.Join(cells, " | "))
	}
	line("")
	line("## Artifact Diff")
	if len(artifacts) == 0 {
		line("- no checkpoints of the runs' trees to compare")
	}
	for _, a := range artifacts {
		line("- %s (%s) .. %s (%s)", a.From, short(a.FromID), a.To, short(a.ToID))
		line("  %d %s changed, +%d/-%d lines", a.Files, pluralWord(a.Files, "file"), a.Ins, a.Dels)
	}
	return b.String()
}

func pluralWord(n int, w string) string {
	if n == 1 {
		return w
	}
	return w + "s"
}

func attemptCell(a Attempt, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%s (seq %d)", a.Status, a.Seq)
}

func acceptanceCell(runs []RunStats) string {
	if len(runs) == 0 {
		return "-"
	}
	if len(runs) == 1 {
		return runs[0].Acceptance
	}
	counts := map[string]int{}
	for _, r := range runs {
		counts[r.Acceptance]++
	}
	var parts []string
	for _, k := range []string{"PASS", "FAIL", "unknown"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", k, counts[k], len(runs)))
		}
	}
	return strings.Join(parts, ", ")
}

func fmtMetric(m string, v float64) string {
	if m == "wall_clock_s" {
		return Elapsed(time.Duration(v * float64(time.Second)))
	}
	return trimFloat(v)
}

func trimFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func fmtSpread(m string, s *Spread) string {
	switch {
	case s == nil:
		return "-"
	case s.N == 1:
		return fmtMetric(m, s.Mean)
	}
	return fmt.Sprintf("mean %s (min %s, max %s)", fmtMetric(m, s.Mean), fmtMetric(m, s.Min), fmtMetric(m, s.Max))
}

func fmtRange(m string, s *Spread) string {
	if s.Min == s.Max {
		return fmtMetric(m, s.Min)
	}
	return fmtMetric(m, s.Min) + " to " + fmtMetric(m, s.Max)
}

func fmtDelta(m string, d float64) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	if m == "wall_clock_s" {
		return sign + fmtMetric(m, d)
	}
	return sign + trimFloat(d)
}

// DiffRecord is the replay-diff line appended to replay-diff.jsonl: the seed's
// record, plus control_session, arm and repeat when they apply. Keys keep the
// seed's order.
type DiffRecord struct {
	OriginalSession string
	ReplaySession   string
	Mutations       []string
	Metrics         Ordered
	Outcome         Ordered
	ArtifactDiff    Ordered // nil: null
	ControlSession  *string
	Arm             string
	Repeat          int
}

// Ordered is a JSON object whose keys keep their order.
type Ordered []KV

// KV is one key of an Ordered object.
type KV struct {
	Key   string
	Value any
}

// MarshalJSON writes the object with its keys in order (and <, >, & as they are).
func (o Ordered) MarshalJSON() ([]byte, error) {
	if o == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshalPlain(kv.Key)
		if err != nil {
			return nil, err
		}
		v, err := marshalPlain(kv.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Object is the record as an ordered JSON object.
func (r DiffRecord) Object() Ordered {
	var original any // null when the original run names no session
	if r.OriginalSession != "" {
		original = r.OriginalSession
	}
	o := Ordered{{"type", "replay-diff"}, {"original_session", original}, {"replay_session", r.ReplaySession},
		{"mutations", r.Mutations}, {"metrics", r.Metrics}, {"outcome", r.Outcome}, {"artifact_diff", r.ArtifactDiff}}
	if r.ControlSession != nil {
		o = append(o, KV{"control_session", *r.ControlSession})
	}
	return append(o, KV{"arm", r.Arm}, KV{"repeat", r.Repeat})
}

// Line is the record as one JSON line.
func (r DiffRecord) Line() ([]byte, error) { return r.Object().MarshalJSON() }

// DiffRecords are the records of an experiment: one per mutated run, against
// the control run of the same repeat when there is one. artifact gives the
// artifact diff of a mutated run (nil when it cannot be had).
func DiffRecords(ex *Experiment, artifact func(mutated RunStats) *ArtifactStat) []DiffRecord {
	control := map[int]RunStats{}
	for _, r := range ex.ArmRuns(ArmControl) {
		control[r.Repeat] = r
	}
	minutes := func(r RunStats) any {
		if r.Wall == nil {
			return nil
		}
		return math.Round(r.Wall.Minutes()*100) / 100
	}
	var out []DiffRecord
	for _, m := range ex.ArmRuns(ArmMutated) {
		rec := DiffRecord{OriginalSession: ex.Original, ReplaySession: m.Session,
			Mutations: append([]string{}, ex.Mutations...), Arm: m.Arm, Repeat: m.Repeat,
			Metrics: Ordered{{"original_dispatches", ex.Orig.Dispatches}, {"replayed_dispatches", m.Dispatches},
				{"original_gate_rounds", ex.Orig.GateRounds}, {"replayed_gate_rounds", m.GateRounds},
				{"original_duration_m", minutes(ex.Orig)}, {"replayed_duration_m", minutes(m)}},
			Outcome: Ordered{{"original", ex.Orig.Acceptance}, {"replayed", m.Acceptance}},
		}
		if c, ok := control[m.Repeat]; ok {
			s := c.Session
			rec.ControlSession = &s
			rec.Metrics = append(rec.Metrics, KV{"control_dispatches", c.Dispatches}, KV{"control_gate_rounds", c.GateRounds},
				KV{"control_duration_m", minutes(c)})
			rec.Outcome = append(rec.Outcome, KV{"control", c.Acceptance})
		}
		if a := artifact(m); a != nil {
			rec.ArtifactDiff = Ordered{{"files_changed", a.Files}, {"insertions", a.Ins}, {"deletions", a.Dels}}
		}
		out = append(out, rec)
	}
	return out
}
