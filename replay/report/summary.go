package report

import "time"

// Summary is the document `rewind report --json` prints: what the page shows,
// as data. Absent values are null.
type Summary struct {
	Manifest    string              `json:"manifest"` // the dispatch manifest drawn, as PATH named it
	Output      *string             `json:"output"`
	Session     *string             `json:"session"`
	Skill       *string             `json:"skill"`
	GeneratedAt string              `json:"generated_at"`
	Timed       bool                `json:"timed"`
	Start       *string             `json:"start"`
	End         *string             `json:"end"`
	TimeSources map[string]int      `json:"time_sources"`
	Lanes       []LaneSummary       `json:"lanes"`
	Dispatches  []DispatchSummary   `json:"dispatches"`
	Crash       *MarkSummary        `json:"crash"`
	Resume      *MarkSummary        `json:"resume"`
	Checkpoints []CheckpointSummary `json:"checkpoints"`
	Arms        []ArmSummary        `json:"arms"`
	Spreads     []SpreadSummary     `json:"spreads"`
	DiffRecords int                 `json:"diff_records_count"`
	Warnings    []string            `json:"warnings"` // the resolution notes, then the warnings
}

// LaneSummary is one phase lane.
type LaneSummary struct {
	Phase      *string `json:"phase"`
	Status     string  `json:"status"`
	Dispatches int     `json:"dispatches_count"`
	Rows       int     `json:"rows_count"`
}

// DispatchSummary is one bar of the timeline, or of an A/B run.
type DispatchSummary struct {
	Seq           int      `json:"seq"`
	Phase         *string  `json:"phase"`
	Role          *string  `json:"role"`
	Status        string   `json:"status"`
	Start         *string  `json:"start"`
	End           *string  `json:"end"`
	StartFrom     string   `json:"start_from"`
	EndFrom       string   `json:"end_from"`
	ReplayOf      *int     `json:"replay_of"`
	ReplayedBy    *int     `json:"replayed_by"`
	ReplaySession *string  `json:"replay_session"`
	Arm           *string  `json:"arm"`
	Lane          *int     `json:"lane"` // nil for A/B arm runs, which are not on the timeline
	Row           *int     `json:"row"`
	X0            *float64 `json:"x0"` // on the timeline's axis, 0..1; nil off the timeline
	X1            *float64 `json:"x1"`
}

// MarkSummary is the crash, the resume, or a checkpoint.
type MarkSummary struct {
	Label  string   `json:"label"`
	Phase  *string  `json:"phase"`
	Seq    *int     `json:"seq"`
	At     *string  `json:"at"`
	X      *float64 `json:"x"` // nil: a timed run, and the mark has no time
	Detail *string  `json:"detail"`
}

// CheckpointSummary is a boundary checkpoint drawn as a tick: named as every
// checkpoint command names a checkpoint, with its place on the time axis.
type CheckpointSummary struct {
	ID        string  `json:"id"`
	ShortID   string  `json:"short_id"`
	Reason    string  `json:"reason"`
	Source    *string `json:"source"`
	Timestamp string  `json:"timestamp"`
	X         float64 `json:"x"`
}

// ArmSummary is one arm of an A/B experiment.
type ArmSummary struct {
	Arm      string       `json:"arm"`
	Mutation *string      `json:"mutation"`
	Runs     []RunSummary `json:"runs"`
}

// RunSummary is one run (replay session) of an arm.
type RunSummary struct {
	Session string              `json:"session"`
	Repeat  *int                `json:"repeat"`
	Outcome *string             `json:"outcome"`
	Metrics map[string]*float64 `json:"metrics"`
}

// SpreadSummary is one metric over the arms.
type SpreadSummary struct {
	Metric  string             `json:"metric"`
	ByArm   map[string]*Spread `json:"by_arm"`
	Overlap *bool              `json:"overlap"`
}

// Summarize turns the run into its --json document; output is the page's
// path ("" when none was written).
func Summarize(r *Run, output string) Summary {
	s := Summary{Manifest: r.Source, Output: opt(output), Session: opt(r.Session), Skill: opt(r.Skill),
		GeneratedAt: stamp(r.Generated), Timed: r.Timed, TimeSources: r.Sources,
		Lanes: []LaneSummary{}, Dispatches: []DispatchSummary{}, Checkpoints: []CheckpointSummary{},
		Arms: []ArmSummary{}, Spreads: []SpreadSummary{}, DiffRecords: len(r.Diffs), Warnings: append(append([]string{}, r.Notes...), r.Warnings...)}
	if r.Timed {
		s.Start, s.End = optTime(r.Start), optTime(r.End)
	}
	for _, l := range r.Lanes {
		s.Lanes = append(s.Lanes, LaneSummary{Phase: opt(l.Phase), Status: l.Status, Dispatches: len(l.Bars), Rows: l.Rows})
	}
	onTimeline := map[*Bar]bool{}
	for _, b := range r.Bars {
		onTimeline[b] = true
		s.Dispatches = append(s.Dispatches, dispatchSummary(b, true, r.Timed))
	}
	for _, sess := range r.Sessions {
		for _, b := range sess.Bars {
			if !onTimeline[b] {
				s.Dispatches = append(s.Dispatches, dispatchSummary(b, false, r.Timed))
			}
		}
	}
	s.Crash, s.Resume = markSummary(r.Crash, r.Timed), markSummary(r.Resume, r.Timed)
	for _, m := range r.Checkpoints {
		cp := m.Checkpoint
		s.Checkpoints = append(s.Checkpoints, CheckpointSummary{ID: cp.ID, ShortID: shortID(cp.ID), Reason: cp.Reason,
			Source: opt(cp.Source), Timestamp: stamp(cp.Time), X: round4(m.X)})
	}
	for _, a := range r.Arms {
		as := ArmSummary{Arm: a.Name, Mutation: opt(a.Mutation), Runs: []RunSummary{}}
		for _, run := range a.Runs {
			as.Runs = append(as.Runs, RunSummary{Session: run.ID, Repeat: run.Repeat, Outcome: opt(run.Outcome), Metrics: run.Metrics})
		}
		s.Arms = append(s.Arms, as)
	}
	for _, sp := range r.Spreads {
		ss := SpreadSummary{Metric: sp.Metric, ByArm: map[string]*Spread{}, Overlap: sp.Overlap}
		for i, a := range r.Arms {
			ss.ByArm[a.Name] = sp.ByArm[i]
		}
		s.Spreads = append(s.Spreads, ss)
	}
	return s
}

// dispatchSummary places b on the timeline's axis only when it has a place
// there: on the timeline, and, on a time axis, with a start.
func dispatchSummary(b *Bar, timeline, timed bool) DispatchSummary {
	d := DispatchSummary{Seq: b.Seq, Phase: opt(b.Phase), Role: opt(b.Role), Status: b.Status,
		Start: optTime(b.Start), StartFrom: b.StartFrom, EndFrom: b.EndFrom, ReplayOf: b.ReplayOf,
		ReplaySession: opt(b.ReplaySession), Arm: opt(b.Arm)}
	if !b.Open() {
		d.End = optTime(b.End)
	}
	if b.ReplayedBy != 0 {
		n := b.ReplayedBy
		d.ReplayedBy = &n
	}
	if timeline {
		lane, row := b.Lane, b.Row
		d.Lane, d.Row = &lane, &row
		if !timed || !b.Start.IsZero() {
			x0, x1 := round4(b.X0), round4(b.X1)
			d.X0, d.X1 = &x0, &x1
		}
	}
	return d
}

func markSummary(m *Mark, timed bool) *MarkSummary {
	if m == nil {
		return nil
	}
	ms := &MarkSummary{Label: m.Label, Phase: opt(m.Phase), At: optTime(m.At), Detail: opt(m.Detail)}
	if !timed || !m.At.IsZero() {
		x := round4(m.X)
		ms.X = &x
	}
	if m.Seq != 0 {
		n := m.Seq
		ms.Seq = &n
	}
	return ms
}

func round4(f float64) float64 { return float64(int64(f*10000+0.5)) / 10000 }

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	return opt(stamp(t))
}
