package report

import (
	"math"
	"sort"
	"time"

	"github.com/rewind-cli/rewind/replay"
)

// The timeline's geometry, in CSS pixels. The page draws the SVG at this size,
// so what the browser lays out can be checked against the data (make e2e).
const (
	Width      = 1200.0 // the SVG's width
	Gutter     = 170.0  // the lane labels
	PlotWidth  = 1000.0 // the time axis
	AxisHeight = 34.0   // the time axis above the lanes
	RowHeight  = 26.0   // one row of bars
	BarHeight  = 18.0
	LanePad    = 8.0 // above and below a lane's rows
	MinBar     = 4.0 // the narrowest bar drawn
	charWidth  = 6.6 // an estimate of one label character at 11px
)

// X is the pixel position of an axis fraction.
func X(f float64) float64 { return round1(Gutter + f*PlotWidth) }

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// layout places the timeline's bars on the axis and in their lanes' rows.
func (r *Run) layout(cps []replay.Checkpoint) {
	r.axis(cps)
	lanes := map[string]*Lane{}
	for _, b := range r.Bars {
		l := lanes[b.Phase]
		if l == nil {
			l = &Lane{Phase: b.Phase, Status: "complete"}
			lanes[b.Phase] = l
			r.Lanes = append(r.Lanes, l)
		}
		b.Lane = len(r.Lanes) - 1
		for i, x := range r.Lanes {
			if x == l {
				b.Lane = i
			}
		}
		l.Bars = append(l.Bars, b)
	}
	for _, l := range r.Lanes {
		for _, b := range l.Bars {
			if b.ReplayedBy != 0 {
				continue // its replay says where it stands
			}
			switch {
			case b.Status == "dispatched":
				l.Status = "in flight"
			case b.Status != "completed" && b.Status != "skipped" && b.Status != replay.LegacyReplayed && l.Status == "complete":
				l.Status = "incomplete"
			}
		}
		l.Rows = packRows(l.Bars)
	}
}

// axis sets the span of the time axis and each bar's and mark's fraction of it.
func (r *Run) axis(cps []replay.Checkpoint) {
	if !r.Timed {
		// One slot per dispatch in seq order: the axis is not time.
		order := append([]*Bar(nil), r.Bars...)
		sort.SliceStable(order, func(i, j int) bool { return order[i].Seq < order[j].Seq })
		n := float64(len(order))
		slot := map[int]int{}
		for i, b := range order {
			slot[b.Seq] = i
			b.X0, b.X1 = float64(i)/n, (float64(i)+0.9)/n
		}
		if r.Crash != nil {
			// After the original run's last slot.
			last := -1
			for _, b := range order {
				if b.ReplaySession == "" && b.ReplayOf == nil {
					last = slot[b.Seq]
				}
			}
			r.Crash.X = (float64(last) + 1) / n
		}
		if r.Resume != nil {
			r.Resume.X = float64(slot[r.Resume.Seq]) / n
		}
		return
	}
	for _, b := range r.Bars {
		if b.Start.IsZero() {
			continue
		}
		if r.Start.IsZero() || b.Start.Before(r.Start) {
			r.Start = b.Start
		}
		for _, t := range []time.Time{b.Start, b.End} {
			if t.After(r.End) {
				r.End = t
			}
		}
	}
	for _, m := range []*Mark{r.Crash, r.Resume} {
		if m == nil || m.At.IsZero() {
			continue
		}
		if m.At.Before(r.Start) {
			r.Start = m.At
		}
		if m.At.After(r.End) {
			r.End = m.At
		}
	}
	if !r.End.After(r.Start) {
		r.End = r.Start.Add(time.Minute)
	}
	span := float64(r.End.Sub(r.Start))
	frac := func(t time.Time) float64 { return float64(t.Sub(r.Start)) / span }
	for _, b := range r.Bars {
		if b.Start.IsZero() {
			continue
		}
		b.X0 = frac(b.Start)
		switch {
		case b.Open():
			b.X1 = 1 // in flight: to the end of what is known
		default:
			b.X1 = frac(b.End)
		}
	}
	for _, m := range []*Mark{r.Crash, r.Resume} {
		if m != nil {
			m.X = frac(m.At)
		}
	}
	if r.Crash != nil {
		// The original run's dispatches still in flight ran until it stopped;
		// nothing after that is known of them.
		for _, b := range r.Bars {
			if b.Open() && b.ReplaySession == "" && !b.Start.IsZero() {
				b.X1 = math.Max(r.Crash.X, b.X0)
			}
		}
	}
	for _, cp := range boundaryCheckpoints(cps) {
		if cp.Time.Before(r.Start) || cp.Time.After(r.End) {
			continue
		}
		r.Checkpoints = append(r.Checkpoints, &Mark{At: cp.Time, X: frac(cp.Time), Label: cp.Reason, Detail: shortID(cp.ID), Checkpoint: &cp})
	}
}

// packRows puts a lane's bars in rows so that no two bars, labels included,
// overlap, each in the first row where it fits; it returns the number of rows.
func packRows(bars []*Bar) int {
	order := append([]*Bar(nil), bars...)
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].X0 != order[j].X0 {
			return order[i].X0 < order[j].X0
		}
		return order[i].Seq < order[j].Seq
	})
	var rowEnds []float64
	for _, b := range order {
		x0 := b.PX()
		end := x0 + math.Max(b.PW(), b.LabelWidth()+8)
		if b.LabelLeft() {
			x0, end = x0-b.LabelWidth()-8, x0+b.PW()
		}
		placed := false
		for i, e := range rowEnds {
			if e+2 <= x0 {
				b.Row, rowEnds[i], placed = i, end, true
				break
			}
		}
		if !placed {
			b.Row = len(rowEnds)
			rowEnds = append(rowEnds, end)
		}
	}
	return max(len(rowEnds), 1)
}

// PX is the bar's left edge in pixels.
func (b *Bar) PX() float64 { return X(b.X0) }

// PW is the bar's width in pixels, at least MinBar.
func (b *Bar) PW() float64 { return round1(math.Max(X(b.X1)-X(b.X0), MinBar)) }

// LabelLeft reports whether the label goes left of the bar: it would run past
// the right edge of the timeline.
func (b *Bar) LabelLeft() bool {
	return b.PW() < b.LabelWidth()+8 && b.PX()+4+b.LabelWidth() > Width-4
}

// LabelX is where the label is drawn: inside the bar from its left edge, or
// ending just left of the bar.
func (b *Bar) LabelX() float64 {
	if b.LabelLeft() {
		return round1(b.PX() - 4)
	}
	return round1(b.PX() + 4)
}

// LabelWidth estimates the width of the bar's label in pixels.
func (b *Bar) LabelWidth() float64 { return float64(len([]rune(b.Label()))) * charWidth }

// Height is the lane's height in pixels.
func (l *Lane) Height() float64 { return float64(l.Rows)*RowHeight + 2*LanePad }

// LaneTop is the top of lane i in pixels.
func (r *Run) LaneTop(i int) float64 {
	y := AxisHeight
	for _, l := range r.Lanes[:i] {
		y += l.Height()
	}
	return y
}

// Height is the timeline's height in pixels: the lanes, a line for the crash
// and resume labels, and one for the checkpoint labels.
func (r *Run) Height() float64 { return r.LaneTop(len(r.Lanes)) + 40 }

// LanesBottom is the bottom of the last lane in pixels.
func (r *Run) LanesBottom() float64 { return r.LaneTop(len(r.Lanes)) }

// CheckpointLabels are the checkpoint marks whose labels fit on the bottom
// line without overlapping the one before (the others keep their tooltip).
func (r *Run) CheckpointLabels() []*Mark {
	var out []*Mark
	right := 0.0
	for _, m := range r.Checkpoints {
		w := float64(len([]rune(m.Label))) * 6.0
		x := X(m.X) - w/2
		if x < right+6 || X(m.X)+w/2 > Width {
			continue
		}
		out = append(out, m)
		right = x + w
	}
	return out
}

// PY is the bar's top in pixels.
func (r *Run) PY(b *Bar) float64 {
	return r.LaneTop(b.Lane) + LanePad + float64(b.Row)*RowHeight + (RowHeight-BarHeight)/2
}

// markLabelWidth is an estimate, with a margin, of the widest of the crash
// and resume labels ("resume", bold at the marker labels' size).
const markLabelWidth = 56.0

// MarkLabel is where a marker's label is drawn: at X, anchored at its start
// (to the right of X) or, with End, at its end (to the left).
type MarkLabel struct {
	X   float64
	End bool
}

// ResumeLabel places the resume line's label: to the right of its line,
// unless the crash line comes after it closer than the two labels need, as
// when a run is resumed hours after it crashed and its original part is a
// sliver of the axis. Then the label goes to the left of both lines, clear
// of the crash label, which is always drawn to the left of its line.
func (r *Run) ResumeLabel() MarkLabel {
	rx := X(r.Resume.X)
	if r.Crash == nil {
		return MarkLabel{X: rx + 4}
	}
	cx := X(r.Crash.X)
	if cx < rx || cx-rx >= 2*markLabelWidth {
		return MarkLabel{X: rx + 4}
	}
	return MarkLabel{X: round1(math.Min(rx-4, cx-4-markLabelWidth)), End: true}
}
