package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/replay"
)

// TestSummarizeNullsWhatHasNoPlace: the summary says null, never 0, for a
// place on the axis a dispatch or mark does not have, and names a checkpoint
// tick as the checkpoint commands do.
func TestSummarizeNullsWhatHasNoPlace(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	timed := &Bar{Seq: 1, Status: "completed", Start: t0, End: t0.Add(time.Minute), StartFrom: "header", EndFrom: "duration", X1: 1}
	noStart := &Bar{Seq: 2, Status: "completed", StartFrom: "none", EndFrom: "none"}
	abRun := &Bar{Seq: 3, Status: "completed", Arm: "control", ReplaySession: "c1", Start: t0, StartFrom: "header", EndFrom: "none"}
	cp := replay.Checkpoint{ID: strings.Repeat("ab", 20), Reason: "pre-wave-1", Source: "build", Time: t0}
	r := &Run{Source: "m.jsonl", Generated: t0, Timed: true, Start: t0, End: t0.Add(time.Minute),
		Bars:        []*Bar{timed, noStart},
		Sessions:    []*Session{{ID: "c1", Arm: "control", Bars: []*Bar{abRun}}},
		Crash:       &Mark{Label: "crash", Seq: 2},
		Checkpoints: []*Mark{{At: t0, Label: cp.Reason, Detail: "abababab", Checkpoint: &cp}},
		Sources:     map[string]int{"header": 1, "none": 1}}
	s := Summarize(r, "")
	if d := s.Dispatches[0]; d.X0 == nil || *d.X0 != 0 || d.X1 == nil || *d.X1 != 1 {
		t.Errorf("a timed bar: x0 %v, x1 %v; want 0 and 1", d.X0, d.X1)
	}
	if d := s.Dispatches[1]; d.Lane == nil || d.X0 != nil || d.X1 != nil {
		t.Errorf("a bar with no start on a time axis: lane %v, x0 %v, x1 %v; want a lane and null places", d.Lane, d.X0, d.X1)
	}
	if d := s.Dispatches[2]; d.Lane != nil || d.Row != nil || d.X0 != nil || d.X1 != nil {
		t.Errorf("an A/B run's dispatch is off the timeline: %+v", d)
	}
	if s.Crash == nil || s.Crash.X != nil || s.Crash.At != nil || s.Crash.Detail != nil {
		t.Errorf("a crash with no time or detail: %+v; want null at, x and detail", s.Crash)
	}
	b, err := json.Marshal(s.Checkpoints)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"` + cp.ID + `","short_id":"abababab","reason":"pre-wave-1","source":"build","timestamp":"2026-03-01T10:00:00Z","x":0}]`
	if string(b) != want {
		t.Errorf("checkpoints: %s\nwant        %s", b, want)
	}
	if s.Output != nil {
		t.Errorf("no page written: output %q, want null", *s.Output)
	}
}
