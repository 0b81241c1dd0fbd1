package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-cli/rewind/manifest"
	"github.com/rewind-cli/rewind/replay"
)

// Input is what a report is built from.
type Input struct {
	Index  *manifest.Index
	Source string   // the manifest read
	Dirs   []string // where dispatch and result files are looked for, the dispatch directory first
	Marker *manifest.Marker
	// Checkpoints are the store's checkpoints; those of the run's skill (or of
	// none) that mark a boundary are drawn.
	Checkpoints []replay.Checkpoint
	Diffs       []DiffRecord
	Loc         *time.Location // naive timestamps are read in it
	Now         time.Time      // when the report was made
}

// Run is one pipeline run as the report draws it.
type Run struct {
	Source    string
	Session   string
	Skill     string
	Generated time.Time
	// Timed is false when no dispatch has a time: bars are then laid out one
	// slot per dispatch in seq order.
	Timed      bool
	Start, End time.Time // the span of the time axis (Timed)

	Lanes       []*Lane
	Bars        []*Bar // the timeline's bars (A/B arm runs excluded), in manifest order
	Checkpoints []*Mark
	Crash       *Mark // nil: the run did not stop early
	Resume      *Mark // nil: nothing to resume, and nothing was
	Arms        []*Arm
	Spreads     []*MetricSpread
	Sessions    []*Session // replay sessions, in order of first appearance
	Diffs       []DiffRecord
	Sources     map[string]int // how many bars took their start from each source
	Notes       []string       // how PATH was resolved, shown plainly
	Warnings    []string       // what could not be read, shown as warnings
}

// Lane is one phase of the run.
type Lane struct {
	Phase  string
	Status string // "complete", "incomplete" or "in flight"
	Bars   []*Bar
	Rows   int
}

// Bar is one manifest seq.
type Bar struct {
	Seq               int
	File, Role, Phase string
	Status, Summary   string
	Task, Duration    *int
	ReplayOf          *int
	ReplaySession     string
	Mutation, Arm     string
	Repeat            *int
	Start, End        time.Time // zero when unknown
	StartFrom         string    // "header", "mtime", "inferred" or "none"
	EndFrom           string    // "duration", "result-file", "in-flight", "inferred" or "none"
	ReplayedBy        int       // the seq of the replay that superseded it (0: none)
	Verdict           string    // the receipt ledger's verdict ("" when none)
	Lane, Row         int
	X0, X1            float64 // position on the axis, 0..1
}

// Open reports whether the bar has no end: the dispatch is still in flight.
func (b *Bar) Open() bool { return b.EndFrom == "in-flight" }

// Label is the text drawn on the bar.
func (b *Bar) Label() string {
	s := "#" + strconv.Itoa(b.Seq)
	if b.Role != "" {
		s += " " + b.Role
	}
	return s
}

// Mark is a point in time on the timeline: a checkpoint, the crash, the resume.
type Mark struct {
	At     time.Time // zero when the axis is not time
	X      float64
	Phase  string
	Seq    int // the dispatch it concerns: the one the run stopped at, the earliest a resume redid (0: none)
	Label  string
	Detail string
	// Checkpoint is the checkpoint a tick marks (nil for the crash and the
	// resume): the summary names it as every checkpoint command does.
	Checkpoint *replay.Checkpoint
}

// Session is one replay session: a resume, or one run of an A/B arm.
type Session struct {
	ID       string
	Arm      string // "" for a resume
	Repeat   *int
	Mutation string
	Bars     []*Bar
	Metrics  map[string]*float64 // by metric name; nil: unknown
	Outcome  string
}

// Arm is one side of an A/B experiment: its runs and their spreads.
type Arm struct {
	Name     string
	Mutation string
	Runs     []*Session
	Span     time.Duration // the longest run of any arm, the scale of every run strip
}

// Spread is a metric over the runs of one arm.
type Spread struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// MetricSpread is one metric over every arm, and whether the arms' ranges
// overlap.
type MetricSpread struct {
	Metric  string
	ByArm   []*Spread // in the order of Run.Arms (nil: the arm has no value)
	Overlap *bool     // nil unless exactly two arms have values
}

// Metrics are the per-session metrics an A/B arm is compared on, in order.
// Those of replay-diff records (artifact_*) are filled in from the record of
// the session, when there is one.
var Metrics = []string{"dispatches", "gate_rounds", "duration_s", "failed", "artifact_files_changed", "artifact_insertions", "artifact_deletions"}

// Build reads the run and lays it out.
func Build(in Input) (*Run, error) {
	if in.Loc == nil {
		in.Loc = time.UTC
	}
	attempts, err := replay.LoadAttempts(in.Index, in.Dirs, in.Loc)
	if err != nil {
		return nil, err
	}
	if len(attempts) == 0 {
		return nil, replay.ErrEmpty
	}
	extras, err := loadExtras(in.Index)
	if err != nil {
		return nil, err
	}
	r := &Run{Source: in.Source, Generated: in.Now, Diffs: in.Diffs, Sources: map[string]int{}}
	r.Session, r.Skill = sessionOf(in)
	if r.Skill == "" {
		r.Skill = skillFromHeaders(in.Dirs, attempts)
	}
	for _, d := range in.Diffs {
		if r.Session == "" {
			r.Session = d.OriginalSession
		}
	}
	ledger := loadLedger(in.Dirs)
	cps := in.Checkpoints
	if r.Skill != "" {
		// A pipeline resumes only from its own skill's checkpoints (and those
		// that name none), as replay picks them.
		cps, _, _ = replay.CheckpointsOf(cps, r.Skill)
	}

	all := make([]*Bar, 0, len(attempts))
	bySeq := map[int]*Bar{}
	for _, a := range attempts {
		x := extras[a.Seq]
		b := &Bar{Seq: a.Seq, File: a.File, Role: a.Role, Phase: a.Phase, Status: a.Status, Summary: a.Summary,
			Task: a.Task, Duration: a.Duration, ReplayOf: a.ReplayOf, ReplaySession: a.ReplaySession,
			Mutation: x.mutation, Arm: x.arm, Repeat: x.repeat, Start: a.Time, StartFrom: a.TimeFrom}
		if b.StartFrom == "" {
			b.StartFrom = "none"
		}
		b.Verdict = ledger[replay.DispatchID(a)]
		all = append(all, b)
		bySeq[b.Seq] = b
	}
	for _, b := range all {
		// An A/B arm's run replays in an isolated clone: it supersedes nothing.
		if b.ReplayOf != nil && *b.ReplayOf < b.Seq && b.Arm == "" {
			if o := bySeq[*b.ReplayOf]; o != nil && (o.ReplayedBy == 0 || o.ReplayedBy < b.Seq) {
				o.ReplayedBy = b.Seq
			}
		}
	}
	inferStarts(all)
	r.Timed = false
	for _, b := range all {
		if !b.Start.IsZero() {
			r.Timed = true
		}
	}
	ends(all, in.Dirs)

	for _, b := range all {
		if b.Arm == "" {
			r.Bars = append(r.Bars, b)
			r.Sources[b.StartFrom]++
		}
	}
	r.sessions(all, in.Diffs)
	r.crashAndResume(attempts, cps)
	r.layout(cps)
	r.arms()
	return r, nil
}

// extra is what a manifest entry says beyond what replay reads: the A/B fields.
type extra struct {
	mutation, arm string
	repeat        *int
}

func loadExtras(ix *manifest.Index) (map[int]extra, error) {
	out := map[int]extra{}
	err := ix.Each(func(seq int64, line []byte) error {
		var e struct {
			Mutation any `json:"mutation"`
			Arm      any `json:"arm"`
			Repeat   any `json:"repeat"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		var x extra
		x.mutation, _ = e.Mutation.(string)
		x.arm, _ = e.Arm.(string)
		if f, ok := e.Repeat.(float64); ok && f == float64(int(f)) {
			n := int(f)
			x.repeat = &n
		}
		out[int(seq)] = x
		return nil
	})
	return out, err
}

// sessionOf names the run: the marker's pipeline id, else the session id in
// the dispatch directory's name; the skill from the marker.
func sessionOf(in Input) (session, skill string) {
	if in.Marker != nil {
		session, skill = in.Marker.PipelineID, in.Marker.Skill
	}
	if session == "" {
		base := filepath.Base(filepath.Dir(in.Source))
		for _, prefix := range []string{"crucible-dispatch-", "dispatch-"} {
			if id, ok := strings.CutPrefix(base, prefix); ok {
				session = id
				break
			}
		}
	}
	return session, skill
}

// skillFromHeaders is the Pipeline of the first dispatch file with an audit
// header.
func skillFromHeaders(dirs []string, attempts []replay.Attempt) string {
	for _, a := range attempts {
		if p := replay.FindDispatchFile(dirs, a.File); p != "" {
			if data, err := os.ReadFile(p); err == nil {
				if h, _, ok := replay.ParseDispatchFile(string(data)); ok && h.Pipeline != "" {
					return h.Pipeline
				}
			}
		}
	}
	return ""
}

// loadLedger reads the verdicts of the receipt ledgers in dirs, by dispatch id.
func loadLedger(dirs []string) map[string]string {
	out := map[string]string{}
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, replay.ReceiptLedger))
		if err != nil {
			continue
		}
		entries, _, _ := replay.ParseReceiptLedger(f)
		f.Close()
		for id, e := range entries {
			if _, seen := out[id]; !seen {
				out[id] = e.Verdict
			}
		}
	}
	return out
}

// inferStarts gives a bar without a time the start of the nearest earlier seq
// that has one, as replay orders such dispatches.
func inferStarts(bars []*Bar) {
	sorted := append([]*Bar(nil), bars...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Seq < sorted[j].Seq })
	var last time.Time
	for _, b := range sorted {
		switch {
		case !b.Start.IsZero():
			last = b.Start
		case !last.IsZero():
			b.Start, b.StartFrom = last, "inferred"
		}
	}
}

// ends gives each bar its end: start + duration_s, else its result file's
// modification time, else open (in flight), else the next start in its
// session and phase.
func ends(bars []*Bar, dirs []string) {
	for _, b := range bars {
		switch {
		case b.Start.IsZero():
			b.EndFrom = "none"
		case b.Duration != nil && *b.Duration >= 0:
			b.End, b.EndFrom = b.Start.Add(time.Duration(*b.Duration)*time.Second), "duration"
		case b.Status == "dispatched":
			b.EndFrom = "in-flight"
		default:
			a := replay.Attempt{Seq: b.Seq, File: b.File, Role: b.Role}
			if p := replay.FindDispatchFile(dirs, replay.ResultFile(a)); p != "" {
				if fi, err := os.Stat(p); err == nil && !fi.ModTime().Before(b.Start) {
					b.End, b.EndFrom = fi.ModTime().Truncate(time.Second), "result-file"
				}
			}
		}
	}
	for _, b := range bars {
		if b.EndFrom != "" {
			continue
		}
		b.End, b.EndFrom = b.Start, "inferred"
		var next time.Time
		for _, o := range bars {
			if o != b && o.Phase == b.Phase && o.ReplaySession == b.ReplaySession && o.Arm == b.Arm &&
				o.Start.After(b.Start) && (next.IsZero() || o.Start.Before(next)) {
				next = o.Start
			}
		}
		if !next.IsZero() {
			b.End = next
		}
	}
}

// sessions groups the replay entries by session, with their metrics.
func (r *Run) sessions(all []*Bar, diffs []DiffRecord) {
	index := map[string]*Session{}
	for _, b := range all {
		if b.ReplaySession == "" {
			continue
		}
		s := index[b.ReplaySession]
		if s == nil {
			s = &Session{ID: b.ReplaySession, Arm: b.Arm, Repeat: b.Repeat, Mutation: b.Mutation}
			index[b.ReplaySession] = s
			r.Sessions = append(r.Sessions, s)
		}
		if s.Mutation == "" {
			s.Mutation = b.Mutation
		}
		s.Bars = append(s.Bars, b)
	}
	for _, s := range r.Sessions {
		s.Metrics = sessionMetrics(s.Bars)
		for _, d := range diffs {
			if d.ReplaySession != s.ID {
				continue
			}
			if d.Artifact != nil {
				s.Metrics["artifact_files_changed"] = intMetric(d.Artifact.FilesChanged)
				s.Metrics["artifact_insertions"] = intMetric(d.Artifact.Insertions)
				s.Metrics["artifact_deletions"] = intMetric(d.Artifact.Deletions)
			}
			s.Outcome = d.ReplayOutcome()
		}
	}
}

func intMetric(n *int64) *float64 {
	if n == nil {
		return nil
	}
	f := float64(*n)
	return &f
}

// gateRole reports whether a role is a quality gate round, as issue 12 counts
// them: red-team and quality-gate, and crucible's crucible-red-team and
// crucible-qg-*.
func gateRole(role string) bool {
	return role == "red-team" || role == "quality-gate" || role == "crucible-red-team" || strings.HasPrefix(role, "crucible-qg-")
}

func sessionMetrics(bars []*Bar) map[string]*float64 {
	m := map[string]*float64{}
	num := func(n int) *float64 { f := float64(n); return &f }
	gates, failed := 0, 0
	var dur *float64
	for _, b := range bars {
		if gateRole(b.Role) {
			gates++
		}
		if b.Status == "failed" || b.Status == "error" {
			failed++
		}
		if b.Duration != nil {
			if dur == nil {
				dur = new(float64)
			}
			*dur += float64(*b.Duration)
		}
	}
	m["dispatches"] = num(len(bars))
	m["gate_rounds"] = num(gates)
	m["failed"] = num(failed)
	m["duration_s"] = dur
	return m
}

// crashAndResume finds where the original run stopped and where it was (or
// would be) resumed from.
func (r *Run) crashAndResume(attempts []replay.Attempt, cps []replay.Checkpoint) {
	bySeq := map[int]*Bar{}
	for _, b := range r.Bars {
		bySeq[b.Seq] = b
	}
	var original []replay.Attempt
	for _, a := range attempts {
		if a.ReplaySession == "" && a.ReplayOf == nil {
			original = append(original, a)
		}
	}
	if len(original) > 0 {
		p, _ := replay.Build(original, nil, nil, replay.Options{})
		if p != nil && !p.Complete {
			r.Crash = &Mark{Phase: p.CrashPhase, Label: "crash", Detail: p.CrashContext, Seq: crashSeq(original, bySeq)}
			// The crash is placed at the last thing the original run did.
			placed := false
			for _, a := range original {
				b := bySeq[a.Seq]
				if b == nil {
					continue
				}
				t := b.End
				if b.Open() || t.IsZero() {
					t = b.Start
				}
				if !placed || t.After(r.Crash.At) {
					r.Crash.At, placed = t, true
				}
			}
		}
	}

	boundaries := boundaryCheckpoints(cps)
	newestAtOrBefore := func(t time.Time) *replay.Checkpoint {
		var best *replay.Checkpoint
		for i := range boundaries {
			cp := &boundaries[i]
			if !cp.Time.After(t) && (best == nil || !cp.Time.Before(best.Time)) {
				best = cp
			}
		}
		return best
	}
	mark := func(b *Bar, how string) {
		r.Resume = &Mark{At: b.Start, Phase: b.Phase, Seq: b.Seq, Label: "resume"}
		if cp := newestAtOrBefore(b.Start); cp != nil && !b.Start.IsZero() {
			r.Resume.At = cp.Time
			r.Resume.Detail = fmt.Sprintf("%s from checkpoint %s (%s), the newest boundary before seq %d", how, shortID(cp.ID), cp.Reason, b.Seq)
		} else {
			r.Resume.Detail = fmt.Sprintf("%s from the boundary before seq %d (no checkpoint of it read)", how, b.Seq)
		}
	}
	// A resume that happened: the earliest original a resume session replayed.
	var first *Bar
	for _, b := range r.Bars {
		if b.ReplaySession == "" || b.ReplayOf == nil {
			continue
		}
		if o := bySeq[*b.ReplayOf]; o != nil && o.ReplaySession == "" && (first == nil || earlier(o, first)) {
			first = o
		}
	}
	if first != nil {
		mark(first, "resumed")
		return
	}
	// None yet: where replay would resume, the earliest dispatch not done.
	if r.Crash == nil {
		return
	}
	for _, b := range r.Bars {
		done := b.Status == "completed" || b.Status == "skipped" || b.Status == replay.LegacyReplayed
		if !done && (first == nil || earlier(b, first)) {
			first = b
		}
	}
	if first != nil {
		mark(first, "would resume")
	}
}

// crashSeq is the dispatch the original run stopped at, as replay names it:
// its earliest failure, else the newest dispatch in flight.
func crashSeq(original []replay.Attempt, bySeq map[int]*Bar) int {
	var failed, inFlight *Bar
	for _, a := range original {
		b := bySeq[a.Seq]
		if b == nil {
			continue
		}
		switch b.Status {
		case "failed", "error":
			if failed == nil || earlier(b, failed) {
				failed = b
			}
		case "dispatched":
			if inFlight == nil || earlier(inFlight, b) {
				inFlight = b
			}
		}
	}
	switch {
	case failed != nil:
		return failed.Seq
	case inFlight != nil:
		return inFlight.Seq
	}
	return 0
}

func earlier(a, b *Bar) bool {
	if !a.Start.Equal(b.Start) {
		return a.Start.Before(b.Start)
	}
	return a.Seq < b.Seq
}

func boundaryCheckpoints(cps []replay.Checkpoint) []replay.Checkpoint {
	var out []replay.Checkpoint
	for _, cp := range cps {
		if replay.IsBoundaryReason(cp.Reason) {
			out = append(out, cp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
