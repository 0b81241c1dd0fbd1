package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	for out, want := range map[string]string{
		"\n\n  first line\nsecond\n":                  "first line",
		"working\nSUMMARY: one\nmore\nSUMMARY: two\n": "two",
		"": "",
	} {
		if got := Summary(out); got != want {
			t.Errorf("Summary(%q) = %q, want %q", out, got, want)
		}
	}
}

// waveShape is the waves as key(job) per job, and each wave's checkpoint reason.
func waveShape(waves []Wave, key func(Job) int) (got [][]int, reasons []string) {
	for _, w := range waves {
		var s []int
		for _, j := range w.Jobs {
			s = append(s, key(j))
		}
		got = append(got, s)
		reasons = append(reasons, w.Checkpoint)
	}
	return got, reasons
}

func TestWavesFollowTheOriginalBoundaries(t *testing.T) {
	attempts, cps := buildRun()
	attempts = append(attempts, att(7, "code-reviewer", "4", "dispatched", 70))
	var jobs []Job
	for i, a := range attempts[2:] {
		jobs = append(jobs, Job{Seq: 10 + i, ReplayOf: a.Seq, From: a})
	}
	got, reasons := waveShape(Waves(jobs, cps), func(j Job) int { return j.ReplayOf })
	if !reflect.DeepEqual(got, [][]int{{3, 4}, {5, 6}, {7}}) || !reflect.DeepEqual(reasons, []string{"", "pre-wave-2", "pre-temper"}) {
		t.Errorf("waves %v reasons %q", got, reasons)
	}
}

func TestRunnerRunsAgents(t *testing.T) {
	wt, dd := t.TempDir(), t.TempDir()
	file := filepath.Join(dd, "11-implementer.md")
	write(t, file, "# Dispatch: implementer\n")
	r := Runner{
		Command:     `echo "working on $REWIND_ROLE seq $REWIND_SEQ of $REWIND_REPLAY_OF task $REWIND_TASK in $(pwd)"; echo noise >&2; echo "SUMMARY: done é"; [ "$REWIND_PHASE" = 3 ]`,
		WorkTree:    wt,
		DispatchDir: dd,
		Session:     "s1",
		Jobs:        2,
	}
	a := att(6, "implementer", "3", "dispatched", 51)
	a.Task = intp(2)
	w := Wave{Jobs: []Job{{Seq: 11, ReplayOf: 6, From: a, DispatchFile: file}}}
	var recorded []Outcome
	outs, err := r.RunWave(context.Background(), w, func(o Outcome) error { recorded = append(recorded, o); return nil })
	if err != nil {
		t.Fatal(err)
	}
	o := outs[0]
	wantOut := "working on implementer seq 11 of 6 task 2 in " + wt + "\nSUMMARY: done é\n"
	if o.Status != "completed" || o.Summary != "done é" || o.OutputChars != len([]rune(wantOut)) || len(recorded) != 1 {
		t.Errorf("outcome %+v", o)
	}
	if data, _ := os.ReadFile(filepath.Join(dd, "11-implementer-result.md")); string(data) != wantOut {
		t.Errorf("result file %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(dd, "11-implementer-stderr.log")); string(data) != "noise\n" {
		t.Errorf("stderr log %q", data)
	}
	a.Phase = "4"
	w.Jobs[0].From = a
	outs, _ = r.RunWave(context.Background(), w, func(Outcome) error { return nil })
	if outs[0].Status != "failed" || outs[0].ExitCode != 1 {
		t.Errorf("failing agent: %+v", outs[0])
	}
	if entries, _ := os.ReadDir(dd); len(entries) != 3 || strings.HasPrefix(entries[0].Name(), ".rewind-tmp") {
		t.Errorf("dispatch dir holds %d entries", len(entries))
	}
}

// The stop rule with one job at a time: once a job fails, the later jobs of
// the wave are never started, and come back NotSent, unrecorded.
func TestRunWaveStopsAfterFailure(t *testing.T) {
	wt, dd := t.TempDir(), t.TempDir()
	r := Runner{Command: `touch "$REWIND_WORK_TREE/ran-$REWIND_SEQ"; [ "$REWIND_SEQ" != 12 ]`, WorkTree: wt, DispatchDir: dd, Session: "s1", Jobs: 1}
	var w Wave
	for seq := 11; seq <= 14; seq++ {
		file := filepath.Join(dd, fmt.Sprintf("%d-implementer.md", seq))
		write(t, file, "# Dispatch: implementer\n")
		w.Jobs = append(w.Jobs, Job{Seq: seq, ReplayOf: seq - 10, From: att(seq-10, "implementer", "3", "dispatched", 51), DispatchFile: file})
	}
	var recorded []int
	outs, err := r.RunWave(context.Background(), w, func(o Outcome) error { recorded = append(recorded, o.Job.Seq); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"completed", "failed", "not sent", "not sent"}
	for i, o := range outs {
		got := o.Status
		if o.NotSent {
			got = "not sent"
		}
		if got != want[i] || o.Job.Seq != 11+i {
			t.Errorf("job %d: %s (%+v), want %s", 11+i, got, o, want[i])
		}
	}
	if fmt.Sprint(recorded) != "[11 12]" {
		t.Errorf("recorded %v, want [11 12]", recorded)
	}
	for _, seq := range []int{13, 14} {
		if _, err := os.Stat(filepath.Join(wt, fmt.Sprintf("ran-%d", seq))); err == nil {
			t.Errorf("seq %d ran after seq 12 failed", seq)
		}
	}
}
