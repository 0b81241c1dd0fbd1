package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
)

// TestReportChromium renders `rewind report` pages in headless Chromium (make
// e2e, which installs Debian's chromium when it is missing) and reads back
// what the browser laid out: the page's script, with #e2e in the URL, writes
// each lane's, bar's and marker's box and label into the DOM, and the test
// checks they sit where the --json summary's times say, not only that the
// HTML text holds them. It also takes a screenshot and checks it is a PNG of
// the window's size, not blank, with the status colours where the bars are.
// The fixtures are those of the report_timeline, report_hostile and report_ab
// scripts.
func TestReportChromium(t *testing.T) {
	if os.Getenv("REWIND_E2E") != "1" {
		t.Skip("needs Chromium: run make e2e (REWIND_E2E=1)")
	}
	browser := findChromium(t)

	t.Run("timeline", func(t *testing.T) {
		dir := unpackScript(t, "report_timeline.txtar")
		result := filepath.Join(dir, "scratch/crucible-dispatch-100/7-code-reviewer-result.md")
		at := time.Date(2026, 3, 1, 10, 40, 0, 0, time.UTC)
		if err := os.Chtimes(result, at, at); err != nil {
			t.Fatal(err)
		}
		page := filepath.Join(dir, "report.html")
		sum := reportSummary(t, dir, filepath.Join(dir, "scratch"), page)
		layout := renderLayout(t, browser, page)
		checkTimeline(t, sum, layout)
		checkScreenshot(t, browser, page, layout)
	})
	t.Run("hostile", func(t *testing.T) {
		// Markup in the run's strings shows as text: the labels the browser
		// rendered are the raw strings, and the parsed page has one script.
		dir := unpackScript(t, "report_hostile.txtar")
		page := filepath.Join(dir, "report.html")
		sum := reportSummary(t, dir, filepath.Join(dir, "d"), page)
		layout := renderLayout(t, browser, page)
		checkTimeline(t, sum, layout)
		if n := layout.Scripts; n != 1 {
			t.Errorf("the rendered page has %d script elements, want 1 (its own)", n)
		}
		if len(layout.Lanes) == 0 || layout.Lanes[0].Label != "phase <b>bold</b>" {
			t.Errorf("lanes %+v: the phase <b>bold</b> is not shown as text", layout.Lanes)
		}
	})
	t.Run("long_summary", func(t *testing.T) {
		// A long summary wraps in its own column; the short columns' headers,
		// roles, status pills, phases and times stay on one line each; the
		// run was resumed hours after its crash, so the crash and resume
		// lines are close, and their labels must not overlap.
		dir := unpackScript(t, "report_long_summary.txtar")
		page := filepath.Join(dir, "report.html")
		sum := reportSummary(t, dir, filepath.Join(dir, "d"), page)
		layout := renderLayout(t, browser, page)
		checkTimeline(t, sum, layout)
		checkOneLine(t, layout)
	})
	t.Run("ab", func(t *testing.T) {
		dir := unpackScript(t, "report_ab.txtar")
		page := filepath.Join(dir, "ab.html")
		sum := reportSummary(t, dir, filepath.Join(dir, "d"), page)
		layout := renderLayout(t, browser, page)
		checkTimeline(t, sum, layout)
		checkArms(t, sum, layout)
	})
}

func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: make e2e installs it (apt-get install chromium)")
	return ""
}

// unpackScript writes the files of a script's archive into a new directory.
func unpackScript(t *testing.T, name string) string {
	ar, err := txtar.ParseFile(filepath.Join("..", "..", "testdata", "scripts", name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range ar.Files {
		if strings.HasPrefix(f.Name, "want") {
			continue
		}
		p := filepath.Join(dir, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// summary is what the test reads of `rewind report --json`.
type summary struct {
	Lanes []struct {
		Phase *string `json:"phase"`
	} `json:"lanes"`
	Dispatches []struct {
		Seq      int     `json:"seq"`
		Role     *string `json:"role"`
		Status   string  `json:"status"`
		Lane     *int    `json:"lane"`
		X0       float64 `json:"x0"`
		X1       float64 `json:"x1"`
		ReplayOf *int    `json:"replay_of"`
		Arm      *string `json:"arm"`
	} `json:"dispatches"`
	Crash, Resume *struct {
		X float64 `json:"x"`
	}
	Arms []struct {
		Arm  string            `json:"arm"`
		Runs []json.RawMessage `json:"runs"`
	} `json:"arms"`
	Spreads []struct {
		Metric  string `json:"metric"`
		Overlap *bool  `json:"overlap"`
	} `json:"spreads"`
}

func reportSummary(t *testing.T, workTree, path, page string) summary {
	var stdout, stderr bytes.Buffer
	code := runWith([]string{"rewind", "-C", workTree, "--store", filepath.Join(workTree, "no-store"), "--now", scriptNow,
		"report", path, "-o", page, "--json"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("rewind report: exit %d: %s", code, stderr.String())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout.String())
	}
	return s
}

// chromiumFlags keep headless Chromium off the network (it hangs on a closed
// one otherwise) and give it a fresh profile.
func chromiumFlags(t *testing.T) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--force-device-scale-factor=1", "--user-data-dir=" + t.TempDir()}
}

func chromium(t *testing.T, browser string, args ...string) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, append(chromiumFlags(t), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

type box struct{ X, Y, W, H float64 }

type layout struct {
	SVG     box `json:"svg"`
	Scripts int `json:"scripts"`
	Lanes   []struct {
		Phase string `json:"phase"`
		Index int    `json:"index"`
		Label string `json:"label"`
		Box   box    `json:"box"`
	} `json:"lanes"`
	Bars []struct {
		Seq      int    `json:"seq"`
		Lane     int    `json:"lane"`
		Status   string `json:"status"`
		Label    string `json:"label"`
		Box      box    `json:"box"`
		LabelBox box    `json:"label_box"`
		Fill     string `json:"fill"`
	} `json:"bars"`
	Markers []struct {
		Kind     string `json:"kind"`
		Label    string `json:"label"`
		Box      box    `json:"box"`
		LabelBox *box   `json:"label_box"`
	} `json:"markers"`
	Links []struct {
		From int `json:"from"`
		To   int `json:"to"`
	} `json:"links"`
	Arms []struct {
		Arm  string `json:"arm"`
		Box  box    `json:"box"`
		Runs int    `json:"runs"`
	} `json:"arms"`
	Spreads []struct {
		Metric string `json:"metric"`
		Ranges []struct {
			Arm string `json:"arm"`
			Box box    `json:"box"`
		} `json:"ranges"`
	} `json:"spreads"`
	// OneLine are the dispatch table's cells that must not wrap: its
	// headers, status pills, phases, times and their sources, each with its height and the height
	// of one line of its text.
	OneLine []struct {
		Text string  `json:"text"`
		H    float64 `json:"h"`
		Line float64 `json:"line"`
	} `json:"one_line"`
}

// checkOneLine checks that no header, status pill, phase or time of the dispatch
// table was wrapped onto a second line.
func checkOneLine(t *testing.T, l layout) {
	if len(l.OneLine) == 0 {
		t.Fatal("the page measured no dispatch table cells")
	}
	for _, c := range l.OneLine {
		if c.H > 1.5*c.Line {
			t.Errorf("%q is wrapped: %v high, one line is %v", c.Text, c.H, c.Line)
		}
	}
}

var layoutRE = regexp.MustCompile(`(?s)<pre id="e2e-layout" hidden="">(.*?)</pre>`)

// renderLayout loads the page with #e2e and reads the layout its script
// measured from the DOM Chromium dumps.
func renderLayout(t *testing.T, browser, page string) layout {
	dom := chromium(t, browser, "--window-size=1280,1000", "--virtual-time-budget=3000", "--dump-dom", "file://"+page+"#e2e")
	m := layoutRE.FindSubmatch(dom)
	if m == nil || len(m[1]) == 0 {
		t.Fatalf("the rendered page has no measured layout in #e2e-layout; DOM starts:\n%.2000s", dom)
	}
	var l layout
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &l); err != nil {
		t.Fatalf("layout: %v\n%s", err, m[1])
	}
	return l
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// checkTimeline checks that the browser drew one lane per phase, top to
// bottom in order, and each bar in its lane, at the x its times give, with
// its label.
func checkTimeline(t *testing.T, s summary, l layout) {
	if len(l.Lanes) != len(s.Lanes) {
		t.Fatalf("rendered %d lanes, want %d (one per phase)", len(l.Lanes), len(s.Lanes))
	}
	for i, lane := range l.Lanes {
		want := "(none)"
		if p := s.Lanes[i].Phase; p != nil {
			want = "phase " + *p
		}
		if lane.Label != want || lane.Index != i {
			t.Errorf("lane %d: label %q (index %d), want %q", i, lane.Label, lane.Index, want)
		}
		if lane.Box.H < 20 || !near(lane.Box.W, 1200, 1) {
			t.Errorf("lane %d: box %+v, want 1200 wide and a row high", i, lane.Box)
		}
		if i > 0 && !near(lane.Box.Y, l.Lanes[i-1].Box.Y+l.Lanes[i-1].Box.H, 1) {
			t.Errorf("lane %d starts at y=%v, not right below lane %d (ends at %v)", i, lane.Box.Y, i-1, l.Lanes[i-1].Box.Y+l.Lanes[i-1].Box.H)
		}
	}
	bars := map[int]int{}
	for i, b := range l.Bars {
		bars[b.Seq] = i
	}
	plotLeft := l.SVG.X + 170
	onTimeline, links := 0, 0
	for _, d := range s.Dispatches {
		if d.Lane == nil {
			continue
		}
		onTimeline++
		if d.ReplayOf != nil {
			links++
		}
		i, ok := bars[d.Seq]
		if !ok {
			t.Errorf("seq %d: no bar rendered", d.Seq)
			continue
		}
		b, lane := l.Bars[i], l.Lanes[*d.Lane].Box
		if b.Lane != *d.Lane || b.Box.Y < lane.Y || b.Box.Y+b.Box.H > lane.Y+lane.H {
			t.Errorf("seq %d: bar %+v is not inside lane %d %+v", d.Seq, b.Box, *d.Lane, lane)
		}
		if x := plotLeft + d.X0*1000; !near(b.Box.X, x, 1.5) {
			t.Errorf("seq %d: bar starts at x=%v, its start time puts it at %v", d.Seq, b.Box.X, x)
		}
		if w := math.Max((d.X1-d.X0)*1000, 4); !near(b.Box.W, w, 1.5) {
			t.Errorf("seq %d: bar is %v wide, its times make it %v", d.Seq, b.Box.W, w)
		}
		label := fmt.Sprintf("#%d", d.Seq)
		if d.Role != nil {
			label += " " + *d.Role
		}
		if b.Label != label || b.Status != d.Status {
			t.Errorf("seq %d: label %q status %q, want %q %q", d.Seq, b.Label, b.Status, label, d.Status)
		}
		if b.LabelBox.W < 10 || b.LabelBox.Y < b.Box.Y-3 || b.LabelBox.Y+b.LabelBox.H > b.Box.Y+b.Box.H+3 {
			t.Errorf("seq %d: label box %+v is not on its bar %+v", d.Seq, b.LabelBox, b.Box)
		}
		if want, ok := statusFill[d.Status]; ok && b.Fill != want {
			t.Errorf("seq %d (%s): fill %s, want %s", d.Seq, d.Status, b.Fill, want)
		}
	}
	if len(l.Bars) != onTimeline {
		t.Errorf("rendered %d bars, want %d", len(l.Bars), onTimeline)
	}
	if len(l.Links) != links {
		t.Errorf("rendered %d replay links, want %d", len(l.Links), links)
	}
	for _, m := range []struct {
		kind string
		want *struct {
			X float64 `json:"x"`
		}
	}{{"crash", s.Crash}, {"resume", s.Resume}} {
		found := false
		for _, r := range l.Markers {
			if r.Kind != m.kind {
				continue
			}
			found = true
			if m.want == nil {
				t.Errorf("a %s marker is drawn, and the summary has none", m.kind)
			} else if x := plotLeft + m.want.X*1000; !near(r.Box.X+r.Box.W/2, x, 2) || r.Label != m.kind {
				t.Errorf("%s marker %q at x=%v, want %q at %v", m.kind, r.Label, r.Box.X+r.Box.W/2, m.kind, x)
			}
		}
		if !found && m.want != nil {
			t.Errorf("no %s marker drawn", m.kind)
		}
	}
	var labels []box
	for _, r := range l.Markers {
		if (r.Kind == "crash" || r.Kind == "resume") && r.LabelBox != nil {
			labels = append(labels, *r.LabelBox)
		}
	}
	if len(labels) == 2 && overlap(labels[0], labels[1]) {
		t.Errorf("the crash and resume labels are drawn over each other: %+v, %+v", labels[0], labels[1])
	}
}

func overlap(a, b box) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

// statusFill is each status's bar colour, as the browser computes it.
var statusFill = map[string]string{
	"completed": "rgb(143, 214, 160)",
	"failed":    "rgb(243, 161, 161)",
	"error":     "rgb(246, 184, 120)",
	"skipped":   "rgb(211, 216, 222)",
}

// checkArms checks the A/B arms are drawn side by side, control first.
func checkArms(t *testing.T, s summary, l layout) {
	if len(l.Arms) != len(s.Arms) || len(l.Arms) != 2 {
		t.Fatalf("rendered %d arms, want %d (2)", len(l.Arms), len(s.Arms))
	}
	for i, a := range l.Arms {
		if a.Arm != s.Arms[i].Arm || a.Runs != len(s.Arms[i].Runs) {
			t.Errorf("arm %d: %s with %d runs, want %s with %d", i, a.Arm, a.Runs, s.Arms[i].Arm, len(s.Arms[i].Runs))
		}
	}
	c, m := l.Arms[0].Box, l.Arms[1].Box
	if !near(c.Y, m.Y, 1) || c.X+c.W > m.X || c.W < 300 || m.W < 300 {
		t.Errorf("arms not side by side: control %+v, mutated %+v", c, m)
	}
	// Each metric's range chart: the drawn ranges overlap exactly when the
	// summary says the arms' ranges do.
	if len(l.Spreads) != len(s.Spreads) || len(s.Spreads) == 0 {
		t.Fatalf("rendered %d spread rows, want %d", len(l.Spreads), len(s.Spreads))
	}
	for i, sp := range s.Spreads {
		drawn := l.Spreads[i]
		if drawn.Metric != sp.Metric || len(drawn.Ranges) != 2 || sp.Overlap == nil {
			t.Errorf("spread %d: drawn %s with %d ranges, want %s with 2", i, drawn.Metric, len(drawn.Ranges), sp.Metric)
			continue
		}
		a, b := drawn.Ranges[0].Box, drawn.Ranges[1].Box
		overlap := a.X <= b.X+b.W+0.5 && b.X <= a.X+a.W+0.5
		if overlap != *sp.Overlap {
			t.Errorf("%s: the drawn ranges %+v and %+v overlap: %v; the summary says %v", sp.Metric, a, b, overlap, *sp.Overlap)
		}
	}
}

// checkScreenshot takes a screenshot and checks it is a PNG of the window's
// size, not blank, with each completed bar's colour at its centre.
func checkScreenshot(t *testing.T, browser, page string, l layout) {
	shot := filepath.Join(t.TempDir(), "report.png")
	chromium(t, browser, "--window-size=1280,1000", "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1000 {
		t.Fatalf("screenshot is %dx%d, want 1280x1000", b.Dx(), b.Dy())
	}
	colours := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
		}
	}
	if len(colours) < 50 {
		t.Errorf("screenshot has %d colours: blank or unstyled", len(colours))
	}
	if out := os.Getenv("REWIND_E2E_SCREENSHOT"); out != "" {
		data, _ := os.ReadFile(shot)
		_ = os.WriteFile(out, data, 0o644)
	}
	checked := 0
	for _, bar := range l.Bars {
		if bar.Status != "completed" || bar.Box.W < 12 {
			continue
		}
		// A point inside the bar, below its label.
		x, y := int(bar.Box.X+bar.Box.W-4), int(bar.Box.Y+bar.Box.H-3)
		if !nearColour(img, x, y, 0x8f, 0xd6, 0xa0) {
			r, g, bl, _ := img.At(x, y).RGBA()
			t.Errorf("seq %d: screenshot pixel (%d,%d) is #%02x%02x%02x, not the completed colour #8fd6a0", bar.Seq, x, y, r>>8, g>>8, bl>>8)
		}
		checked++
	}
	if checked == 0 {
		t.Error("no completed bar to check the screenshot at")
	}
}

func nearColour(img image.Image, x, y int, r, g, b uint32) bool {
	pr, pg, pb, _ := img.At(x, y).RGBA()
	d := func(a, b uint32) bool { return math.Abs(float64(a>>8)-float64(b)) <= 12 }
	return d(pr, r) && d(pg, g) && d(pb, b)
}
