package report

import (
	"math"
	"sort"
	"time"
)

// StripWidth is the width in pixels of one A/B run's strip.
const StripWidth = 440.0

// arms groups the A/B sessions by arm (control first, then mutated, then any
// other in name order) and computes each metric's spread per arm.
func (r *Run) arms() {
	index := map[string]*Arm{}
	for _, s := range r.Sessions {
		if s.Arm == "" {
			continue
		}
		a := index[s.Arm]
		if a == nil {
			a = &Arm{Name: s.Arm}
			index[s.Arm] = a
			r.Arms = append(r.Arms, a)
		}
		if a.Mutation == "" {
			a.Mutation = s.Mutation
		}
		a.Runs = append(a.Runs, s)
	}
	rank := func(name string) int {
		switch name {
		case "control":
			return 0
		case "mutated":
			return 1
		}
		return 2
	}
	sort.SliceStable(r.Arms, func(i, j int) bool {
		ri, rj := rank(r.Arms[i].Name), rank(r.Arms[j].Name)
		if ri != rj {
			return ri < rj
		}
		return r.Arms[i].Name < r.Arms[j].Name
	})
	var longest time.Duration
	for _, a := range r.Arms {
		sort.SliceStable(a.Runs, func(i, j int) bool { return repeatOf(a.Runs[i]) < repeatOf(a.Runs[j]) })
		for _, s := range a.Runs {
			if start, end := s.Span(); end.Sub(start) > longest {
				longest = end.Sub(start)
			}
		}
	}
	if longest <= 0 {
		longest = time.Minute
	}
	for _, a := range r.Arms {
		a.Span = longest
	}
	if len(r.Arms) == 0 {
		return
	}
	for _, m := range Metrics {
		ms := &MetricSpread{Metric: m}
		any := false
		for _, a := range r.Arms {
			sp := spreadOf(a.Runs, m)
			ms.ByArm = append(ms.ByArm, sp)
			any = any || sp != nil
		}
		if !any {
			continue
		}
		if len(ms.ByArm) == 2 && ms.ByArm[0] != nil && ms.ByArm[1] != nil {
			a, b := ms.ByArm[0], ms.ByArm[1]
			overlap := a.Min <= b.Max && b.Min <= a.Max
			ms.Overlap = &overlap
		}
		r.Spreads = append(r.Spreads, ms)
	}
}

func repeatOf(s *Session) int {
	if s.Repeat == nil {
		return math.MaxInt
	}
	return *s.Repeat
}

func spreadOf(runs []*Session, metric string) *Spread {
	var vals []float64
	for _, s := range runs {
		if v := s.Metrics[metric]; v != nil {
			vals = append(vals, *v)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	sp := &Spread{N: len(vals), Min: vals[0], Max: vals[0]}
	sum := 0.0
	for _, v := range vals {
		sum += v
		sp.Min = math.Min(sp.Min, v)
		sp.Max = math.Max(sp.Max, v)
	}
	sp.Mean = math.Round(sum/float64(len(vals))*100) / 100
	return sp
}

// Span is the session's first start and last end (zero when untimed).
func (s *Session) Span() (start, end time.Time) {
	for _, b := range s.Bars {
		if b.Start.IsZero() {
			continue
		}
		if start.IsZero() || b.Start.Before(start) {
			start = b.Start
		}
		for _, t := range []time.Time{b.Start, b.End} {
			if t.After(end) {
				end = t
			}
		}
	}
	return start, end
}

// StripBar is a bar of an A/B run's strip, placed on the arm's scale.
type StripBar struct {
	*Bar
	SX, SW float64
}

// Strip places a run's bars on the arms' common scale: its start at 0, the
// longest run of any arm across the whole width. Untimed runs get one slot per
// dispatch.
func (a *Arm) Strip(s *Session) []StripBar {
	start, _ := s.Span()
	out := make([]StripBar, 0, len(s.Bars))
	for i, b := range s.Bars {
		var x, w float64
		if start.IsZero() || b.Start.IsZero() {
			n := float64(len(s.Bars))
			x, w = float64(i)/n*StripWidth, 0.9/n*StripWidth
		} else {
			x = float64(b.Start.Sub(start)) / float64(a.Span) * StripWidth
			end := b.End
			if b.Open() || end.IsZero() {
				end = b.Start
			}
			w = float64(end.Sub(b.Start)) / float64(a.Span) * StripWidth
		}
		out = append(out, StripBar{Bar: b, SX: round1(x), SW: round1(math.Max(w, MinBar))})
	}
	return out
}

// SpreadChartWidth is the width in pixels of a metric's range chart.
const SpreadChartWidth = 240.0

// SpreadLine is one arm's range in a metric's chart: min to max, and the mean.
type SpreadLine struct {
	Arm         string
	Index       int
	Y           float64
	X0, X1, XM  float64
	Mean        float64
	Min, Max, N int
}

// Lines places each arm's range of the metric on one scale, from 0 (or the
// lowest value) to the highest, so ranges that overlap are seen to.
func (m *MetricSpread) Lines(arms []*Arm) []SpreadLine {
	lo, hi := 0.0, 0.0
	for _, sp := range m.ByArm {
		if sp != nil {
			lo, hi = math.Min(lo, sp.Min), math.Max(hi, sp.Max)
		}
	}
	if hi <= lo {
		hi = lo + 1
	}
	x := func(v float64) float64 { return round1(8 + (v-lo)/(hi-lo)*(SpreadChartWidth-16)) }
	var out []SpreadLine
	for i, sp := range m.ByArm {
		if sp == nil {
			continue
		}
		out = append(out, SpreadLine{Arm: arms[i].Name, Index: i, Y: float64(8 + 12*i), X0: x(sp.Min), X1: x(sp.Max), XM: x(sp.Mean),
			Mean: sp.Mean, Min: int(sp.Min), Max: int(sp.Max), N: sp.N})
	}
	return out
}

// ChartHeight is the height of a metric's range chart.
func (r *Run) ChartHeight() float64 { return float64(4 + 12*len(r.Arms)) }
