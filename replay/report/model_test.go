package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/manifest"
	"github.com/rewind-cli/rewind/replay"
)

// build writes a manifest and dispatch files (name -> header timestamp, "" for
// a file without a header) into a directory and builds its run.
func build(t *testing.T, lines []string, files map[string]string, cps []replay.Checkpoint) *Run {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, ts := range files {
		body := "no header\n"
		if ts != "" {
			body = "# Dispatch: x\n**Pipeline:** build | **Phase:** 1 | **Task:** -\n**Timestamp:** " + ts + "\n**Dispatch-Dir:** d\n\n---\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := manifest.Open(filepath.Join(dir, "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	r, err := Build(Input{Index: ix, Source: "m", Dirs: []string{dir}, Checkpoints: cps, Now: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBuildTimesAndMarks(t *testing.T) {
	r := build(t, []string{
		`{"seq":1,"file":"1-a.md","role":"a","phase":"1","status":"completed","duration_s":60}`,
		`{"seq":2,"file":"2-b.md","role":"b","phase":"2","status":"completed"}`,
		`{"seq":3,"file":"3-c.md","role":"c","phase":"2","status":"dispatched"}`,
		`{"seq":4,"file":"4-c.md","role":"c","phase":"2","status":"completed","duration_s":30,"replay_of":3,"replay_session":"r"}`,
	}, map[string]string{"1-a.md": "2026-03-01T10:00:00Z", "2-b.md": "2026-03-01T10:01:00Z", "4-c.md": "2026-03-01T10:10:00Z"},
		[]replay.Checkpoint{{ID: "abcdef0123", Reason: "pre-wave-1", Time: time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)},
			{ID: "x", Reason: "pre-restore-safety", Time: time.Date(2026, 3, 1, 10, 0, 40, 0, time.UTC)}})
	got := map[int]string{}
	for _, b := range r.Bars {
		got[b.Seq] = b.StartFrom + "/" + b.EndFrom + " " + clock(b.Start) + "-" + clock(b.End)
	}
	want := map[int]string{
		1: "header/duration 10:00:00-10:01:00",
		2: "header/inferred 10:01:00-10:01:00", // nothing later in its lane of the original run
		3: "inferred/in-flight 10:01:00--",
		4: "header/duration 10:10:00-10:10:30",
	}
	for seq, w := range want {
		if got[seq] != w {
			t.Errorf("seq %d: %s, want %s", seq, got[seq], w)
		}
	}
	if r.Crash == nil || r.Crash.Seq != 3 || clock(r.Crash.At) != "10:01:00" {
		t.Errorf("crash %+v, want seq 3 at 10:01:00", r.Crash)
	}
	if r.Resume == nil || r.Resume.Seq != 3 || clock(r.Resume.At) != "10:00:30" || !strings.Contains(r.Resume.Detail, "abcdef01 (pre-wave-1)") {
		t.Errorf("resume %+v, want the pre-wave-1 checkpoint before seq 3", r.Resume)
	}
	if len(r.Checkpoints) != 1 || r.Checkpoints[0].Label != "pre-wave-1" {
		for _, c := range r.Checkpoints {
			t.Errorf("checkpoint %+v: only boundaries are drawn", *c)
		}
	}
	var seq3 *Bar
	for _, b := range r.Bars {
		if b.Seq == 3 {
			seq3 = b
		}
	}
	if seq3.ReplayedBy != 4 || seq3.X1 != r.Crash.X {
		t.Errorf("seq 3: replayed by %d, ends at %v; want 4, at the crash %v", seq3.ReplayedBy, seq3.X1, r.Crash.X)
	}
	if len(r.Links()) != 1 || r.Links()[0].From != 3 || r.Links()[0].To != 4 {
		t.Errorf("links %+v", r.Links())
	}
}

func TestPackRowsNeverOverlaps(t *testing.T) {
	var bars []*Bar
	for i := 0; i < 12; i++ {
		bars = append(bars, &Bar{Seq: i + 1, Role: "implementer", X0: float64(i%4) * 0.02, X1: float64(i%4)*0.02 + 0.01})
	}
	rows := packRows(bars)
	if rows < 2 {
		t.Fatalf("%d rows for 12 overlapping bars", rows)
	}
	for _, a := range bars {
		for _, b := range bars {
			if a == b || a.Row != b.Row {
				continue
			}
			aEnd := a.PX() + max(a.PW(), a.LabelWidth()+8)
			if a.PX() <= b.PX() && b.PX() < aEnd {
				t.Errorf("seq %d and %d share row %d and overlap", a.Seq, b.Seq, a.Row)
			}
		}
	}
}

func TestTicks(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	r := &Run{Timed: true, Start: start, End: start.Add(40 * time.Minute)}
	var labels []string
	for _, tk := range r.Ticks() {
		labels = append(labels, tk.Label)
	}
	if strings.Join(labels, " ") != "10:00 10:05 10:10 10:15 10:20 10:25 10:30 10:35 10:40" {
		t.Errorf("ticks %v", labels)
	}
	if ticks := r.Ticks(); ticks[0].X != Gutter || ticks[len(ticks)-1].X != Gutter+PlotWidth {
		t.Errorf("ticks at %v and %v, want the plot's edges", ticks[0].X, ticks[len(ticks)-1].X)
	}
}

func TestArmsSpreads(t *testing.T) {
	lines := []string{`{"seq":1,"file":"1-r.md","role":"red-team","phase":"4","status":"completed","duration_s":10}`}
	arm := func(seq int, session, name string, repeat, rounds int) {
		for i := 0; i < rounds; i++ {
			lines = append(lines, `{"seq":`+strconv.Itoa(seq+i)+`,"file":"x.md","role":"red-team","phase":"4","status":"completed","duration_s":10,"replay_of":1,"replay_session":"`+session+`","arm":"`+name+`","repeat":`+strconv.Itoa(repeat)+`}`)
		}
	}
	arm(2, "m1", "mutated", 1, 1)
	arm(3, "c1", "control", 1, 3)
	arm(6, "c2", "control", 2, 1)
	arm(7, "m2", "mutated", 2, 2)
	r := build(t, lines, nil, nil)
	if len(r.Bars) != 1 || r.Bars[0].ReplayedBy != 0 {
		t.Fatalf("timeline %d bars, seq 1 replayed by %d: arm runs belong to no timeline and supersede nothing", len(r.Bars), r.Bars[0].ReplayedBy)
	}
	if len(r.Arms) != 2 || r.Arms[0].Name != "control" || r.Arms[1].Name != "mutated" {
		t.Fatalf("arms %+v, want control then mutated", r.Arms)
	}
	var gates *MetricSpread
	for _, s := range r.Spreads {
		if s.Metric == "gate_rounds" {
			gates = s
		}
	}
	c, m := gates.ByArm[0], gates.ByArm[1]
	if c.N != 2 || c.Min != 1 || c.Max != 3 || c.Mean != 2 || m.Min != 1 || m.Max != 2 || m.Mean != 1.5 || gates.Overlap == nil || !*gates.Overlap {
		t.Errorf("gate rounds: control %+v mutated %+v overlap %v", c, m, gates.Overlap)
	}
	var page bytes.Buffer
	if err := Write(&page, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "overlap: no evidence of a difference") {
		t.Error("the page does not say the gate rounds' ranges overlap")
	}
}

// The resume label goes to the left of both lines when the crash line is
// too close after the resume line for two facing labels.
func TestResumeLabel(t *testing.T) {
	for _, c := range []struct {
		resume, crash float64
		noCrash       bool
		want          MarkLabel
	}{
		{resume: 0.2, crash: 0.5, want: MarkLabel{X: X(0.2) + 4}},
		{resume: 0.2, noCrash: true, want: MarkLabel{X: X(0.2) + 4}},
		{resume: 0.5, crash: 0.2, want: MarkLabel{X: X(0.5) + 4}},
		{resume: 0.02, crash: 0.03, want: MarkLabel{X: X(0.03) - 4 - markLabelWidth, End: true}},
		{resume: 0.5, crash: 0.5, want: MarkLabel{X: X(0.5) - 4 - markLabelWidth, End: true}},
	} {
		r := &Run{Resume: &Mark{X: c.resume}}
		if !c.noCrash {
			r.Crash = &Mark{X: c.crash}
		}
		if got := r.ResumeLabel(); got != c.want {
			t.Errorf("resume %v crash %v: %+v, want %+v", c.resume, c.crash, got, c.want)
		}
	}
}
