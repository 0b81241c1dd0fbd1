package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed page.html.tmpl
var pageTemplate string

//go:embed page.css
var pageCSS string

//go:embed page.js
var pageJS string

// page is parsed on first use: every rewind command would pay for it at
// start, and only report writes pages.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		"css":    func() template.CSS { return template.CSS(pageCSS) },
		"js":     func() template.JS { return template.JS(pageJS) },
		"x":      X,
		"add":    func(a, b float64) float64 { return round1(a + b) },
		"half":   func(a float64) float64 { return round1(a / 2) },
		"clock":  clock,
		"stamp":  stamp,
		"phase":  PhaseLabel,
		"num":    num,
		"numptr": numPtr,
		"intptr": intPtr,
		"intptr64": func(n *int64) string {
			if n == nil {
				return "-"
			}
			return strconv.FormatInt(*n, 10)
		},
		"columnsOf": columnsOf,
		"deref":     func(b *bool) bool { return *b },
		"plural":    plural,
		"percent":   func(f float64) string { return strconv.FormatFloat(f*100, 'f', 2, 64) },
		"dash":      dash,
		"metric":    MetricLabel,
		"status":    StatusClass,
	}).Parse(pageTemplate))
})

// Generator is the tag near the top of every page, by which a page rewind
// wrote is told from any other file before it is replaced.
const Generator = `<meta name="generator" content="rewind report">`

// Write renders the run as one self-contained HTML page.
func Write(w io.Writer, r *Run) error {
	return page().Execute(w, r)
}

// PhaseLabel names a phase as rewind manifest show does: "phase 3", or
// "(none)" for entries without one.
func PhaseLabel(p string) string {
	if p == "" {
		return "(none)"
	}
	return "phase " + p
}

// MetricLabel is how a metric is named in the page.
func MetricLabel(m string) string {
	switch m {
	case "duration_s":
		return "duration (s)"
	case "artifact_files_changed":
		return "files changed"
	case "artifact_insertions":
		return "lines added"
	case "artifact_deletions":
		return "lines removed"
	}
	return strings.ReplaceAll(m, "_", " ")
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05")
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func numPtr(f *float64) string {
	if f == nil {
		return "-"
	}
	return num(*f)
}

func intPtr(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Tick is a label on the time axis.
type Tick struct {
	X     float64
	Label string
}

// tickSteps are the spacings the axis picks from.
var tickSteps = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// Ticks are the time axis's labels: at most 10, at a round spacing, in UTC.
func (r *Run) Ticks() []Tick {
	if !r.Timed {
		return nil
	}
	span := r.End.Sub(r.Start)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if span/s <= 9 {
			step = s
			break
		}
	}
	layout := "15:04"
	if step < time.Minute {
		layout = "15:04:05"
	} else if step >= 24*time.Hour {
		layout = "01-02"
	}
	var out []Tick
	for t := r.Start.UTC().Truncate(step); !t.After(r.End); t = t.Add(step) {
		if t.Before(r.Start) {
			continue
		}
		out = append(out, Tick{X: X(float64(t.Sub(r.Start)) / float64(span)), Label: t.Format(layout)})
	}
	return out
}

// Link is a replayed dispatch's line back to its original.
type Link struct {
	From, To int
	D        string // the SVG path
}

// Links are the timeline's replay links.
func (r *Run) Links() []Link {
	bySeq := map[int]*Bar{}
	for _, b := range r.Bars {
		bySeq[b.Seq] = b
	}
	var out []Link
	for _, b := range r.Bars {
		if b.ReplayOf == nil {
			continue
		}
		o := bySeq[*b.ReplayOf]
		if o == nil || o.Seq >= b.Seq {
			continue
		}
		x1, y1 := round1(o.PX()+o.PW()), round1(r.PY(o)+BarHeight/2)
		x2, y2 := b.PX(), round1(r.PY(b)+BarHeight/2)
		mid := round1((x1 + x2) / 2)
		lift := round1(min(y1, y2) - RowHeight*0.6)
		out = append(out, Link{From: o.Seq, To: b.Seq,
			D: fmt.Sprintf("M%s %s C%s %s %s %s %s %s", num(x1), num(y1), num(mid), num(lift), num(mid), num(lift), num(x2), num(y2))})
	}
	return out
}

// Count is the number of timeline dispatches with each status, in the order
// of manifest.Statuses, then others by name.
func (r *Run) Count() []KeyValue {
	counts := map[string]int{}
	for _, b := range r.Bars {
		counts[b.Status]++
	}
	var out []KeyValue
	for _, s := range []string{"completed", "failed", "error", "skipped", "dispatched", "replayed"} {
		if counts[s] > 0 {
			out = append(out, KeyValue{s, strconv.Itoa(counts[s])})
			delete(counts, s)
		}
	}
	var rest []string
	for s := range counts {
		rest = append(rest, s)
	}
	sort.Strings(rest)
	for _, s := range rest {
		out = append(out, KeyValue{s, strconv.Itoa(counts[s])})
	}
	return out
}

// Untimed counts the timeline's bars whose start or end is not their own.
func (r *Run) Untimed() (inferredStart, inferredEnd int) {
	for _, b := range r.Bars {
		if b.StartFrom == "inferred" {
			inferredStart++
		}
		if b.EndFrom == "inferred" {
			inferredEnd++
		}
	}
	return inferredStart, inferredEnd
}

// StatusClass is the CSS class of a status (unknown statuses share one).
func StatusClass(status string) string {
	switch status {
	case "completed", "failed", "error", "skipped", "dispatched", "replayed":
		return status
	}
	return "other"
}

// Comparisons are the replayed dispatches of a session beside their originals.
func (r *Run) Comparisons(s *Session) []Comparison {
	bySeq := map[int]*Bar{}
	for _, b := range r.Bars {
		bySeq[b.Seq] = b
	}
	var out []Comparison
	for _, b := range s.Bars {
		c := Comparison{Replay: b}
		if b.ReplayOf != nil {
			c.Original = bySeq[*b.ReplayOf]
		}
		out = append(out, c)
	}
	return out
}

// Comparison is one row of a per-dispatch comparison table.
type Comparison struct {
	Original *Bar // nil when the replay names no original in this manifest
	Replay   *Bar
}

// columnsOf lists the metric columns a diff record has values in.
func columnsOf(d DiffRecord) []string {
	var out []string
	for _, c := range Columns {
		for _, m := range d.Metrics {
			if _, ok := m.Values[c]; ok {
				out = append(out, c)
				break
			}
		}
	}
	return out
}
