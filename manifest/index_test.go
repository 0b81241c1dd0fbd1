package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

const sample = `{"seq":1,"file":"1-plan.md","role":"plan-writer","phase":"2","status":"dispatched","input_chars":100,"model_tier":"opus"}
{"seq":1,"file":"1-plan.md","role":"plan-writer","phase":"2","status":"completed","duration_s":60,"input_chars":100,"output_chars":40,"model_tier":"opus"}
{"event":"timeout-override","value":3}
{"seq":2,"file":"2-impl.md","role":"implementer","phase":"3","status":"dispatched","input_chars":200,"model_tier":"sonnet"}
{"seq":3,"file":"3-impl.md","role":"implementer","phase":"3","status":"dispatched","input_chars":300,"model_tier":"sonnet"}
not json
{"seq":2,"file":"2-impl.md","role":"implementer","phase":"3","status":"failed","duration_s":5,"input_chars":200,"model_tier":"sonnet"}
{"seq":2,"file":"2-impl.md","role":"implementer","phase":"3","status":"dispatched","input_chars":200,"model_tier":"sonnet"}
{"seq":2,"file":"2-impl.md","role":"implementer","phase":"3","status":"completed","duration_s":7,"input_chars":200,"output_chars":10,"model_tier":"sonnet"}
{"seq":3,"file":"3-impl.md","ro`

func openSample(t *testing.T, data string) *Index {
	t.Helper()
	p := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func TestIndexPhases(t *testing.T) {
	ix := openSample(t, sample)
	if ix.Lines != 10 || ix.Entries != 7 || ix.Seqs() != 3 {
		t.Fatalf("lines %d entries %d seqs %d", ix.Lines, ix.Entries, ix.Seqs())
	}
	var skipped []string
	for _, p := range ix.Skipped() {
		skipped = append(skipped, p.Kind)
	}
	if strings.Join(skipped, " ") != "not_a_dispatch_entry invalid_json torn_last_line" {
		t.Errorf("skipped: %v", skipped)
	}
	phases := ix.Phases()
	if len(phases) != 2 || phases[0].Label != "2" || phases[0].Status != PhaseComplete || phases[1].Label != "3" || phases[1].Status != PhaseInFlight {
		t.Fatalf("phases: %+v", phases)
	}
	var got []string
	err := ix.EachEntry(phases[1], func(seq int64, line []byte) error {
		got = append(got, string(line))
		return nil
	})
	if err != nil || len(got) != 2 || !strings.Contains(got[0], `"seq":2`) || !strings.Contains(got[0], `"completed"`) || !strings.Contains(got[1], `"dispatched"`) {
		t.Errorf("entries: %q, %v", got, err)
	}
}

func TestIndexEachInFirstAppearanceOrder(t *testing.T) {
	ix := openSample(t, sample)
	var seqs []int64
	ix.Each(func(seq int64, line []byte) error {
		seqs = append(seqs, seq)
		return nil
	})
	if fmt.Sprint(seqs) != "[1 2 3]" {
		t.Errorf("got %v", seqs)
	}
	line, ok, err := ix.Entry(2)
	if !ok || err != nil || !strings.Contains(string(line), `"completed"`) {
		t.Errorf("Entry(2) = %s, %v, %v", line, ok, err)
	}
	if st, _ := ix.Status(3); st != "dispatched" {
		t.Errorf("Status(3) = %q", st)
	}
}

func TestIndexEmpty(t *testing.T) {
	ix := openSample(t, "garbage\n{\"event\":1}\n")
	st, err := ComputeStats(ix)
	if !errors.Is(err, ErrEmpty) || st != nil {
		t.Errorf("stats of an empty manifest: %v", err)
	}
	if r := Check(ix); r.Errors != 2 {
		t.Errorf("check: %+v", r)
	}
}

func TestCheck(t *testing.T) {
	data := sample + "\n" +
		`{"seq":5,"status":"completed"}` + "\n" +
		`{"seq":4,"status":"running"}` + "\n" +
		`{"seq":6,"status":"dispatched","summary":"` + strings.Repeat("x", 4100) + `"}` + "\n" +
		`{"seq":1,"status":"dispatched"}` + "\n"
	r := Check(openSample(t, data))
	var kinds []string
	for _, p := range r.Problems {
		kinds = append(kinds, p.Severity+":"+p.Kind)
	}
	// The unknown status is one finding; in flight ones sit at their lines.
	want := "warning:not_a_dispatch_entry warning:in_flight error:invalid_json error:invalid_json error:completion_without_dispatch " +
		"error:unknown_status warning:seq_out_of_order error:oversize warning:in_flight " +
		"warning:seq_reused warning:in_flight"
	if strings.Join(kinds, " ") != want {
		t.Errorf("findings:\n got %s\nwant %s", strings.Join(kinds, " "), want)
	}
	var lines []int
	for _, p := range r.Problems {
		lines = append(lines, p.Line)
	}
	if !sort.IntsAreSorted(lines) {
		t.Errorf("findings out of line order: %v", lines)
	}
	if r.Errors != 5 || r.Warnings != 6 {
		t.Errorf("errors %d warnings %d", r.Errors, r.Warnings)
	}
}

func TestCheckGaps(t *testing.T) {
	r := Check(openSample(t, `{"seq":1,"status":"dispatched"}`+"\n"+`{"seq":1,"status":"completed"}`+"\n"+`{"seq":5,"status":"dispatched"}`+"\n"+`{"seq":5,"status":"completed"}`+"\n"+`{"seq":7,"status":"dispatched"}`+"\n"+`{"seq":7,"status":"skipped"}`+"\n"))
	var msgs []string
	for _, p := range r.Problems {
		msgs = append(msgs, p.Msg)
	}
	if strings.Join(msgs, "|") != "seqs 2 to 4 are missing|seq 6 is missing" || r.Errors != 0 {
		t.Errorf("got %q", msgs)
	}
}

func TestCheckUnknownStatusOnce(t *testing.T) {
	r := Check(openSample(t, `{"seq":8,"status":"weird"}`+"\n"))
	if len(r.Problems) != 1 || r.Problems[0].Msg != "seq 8 has an unknown status 'weird'" || r.Errors != 1 {
		t.Errorf("got %+v", r.Problems)
	}
}

func TestCheckGapsFromOne(t *testing.T) {
	r := Check(openSample(t, `{"seq":-1,"status":"dispatched"}`+"\n"+`{"seq":-1,"status":"completed"}`+"\n"+
		`{"seq":1,"status":"dispatched"}`+"\n"+`{"seq":1,"status":"completed"}`+"\n"+
		`{"seq":3,"status":"dispatched"}`+"\n"+`{"seq":3,"status":"completed"}`+"\n"))
	var msgs []string
	for _, p := range r.Problems {
		msgs = append(msgs, p.Msg)
	}
	if strings.Join(msgs, "|") != "seq 2 is missing" {
		t.Errorf("got %q", msgs)
	}
}

const badCounts = `{"seq":1,"status":"dispatched","input_chars":1e3}
{"seq":1,"status":"completed","input_chars":99999999999999999999,"output_chars":-5,"tool_calls":"3","duration_s":2.5}
{"seq":2,"status":"dispatched","input_chars":100,"output_chars":null}
{"seq":2,"status":"completed","input_chars":100,"output_chars":8,"duration_s":4,"tool_calls":0}
`

func TestCheckCounts(t *testing.T) {
	p := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(p, []byte(badCounts), 0o644)
	ix, err := OpenCheck(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	r := Check(ix)
	var msgs []string
	for _, p := range r.Problems {
		if p.Kind == "invalid_count" {
			msgs = append(msgs, fmt.Sprintf("%d:%s", p.Line, p.Msg))
		}
	}
	want := "1:seq 1 has input_chars 1e3: not a non-negative integer|" +
		"2:seq 1 has input_chars 99999999999999999999: not a non-negative integer up to 9223372036854775807|" +
		"2:seq 1 has output_chars -5: not a non-negative integer|" +
		"2:seq 1 has tool_calls \"3\": not a non-negative integer|" +
		"2:seq 1 has duration_s 2.5: not a non-negative integer"
	if strings.Join(msgs, "|") != want {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(msgs, "|"), want)
	}
	if r.Errors != 0 {
		t.Errorf("errors: %d", r.Errors)
	}
}

func TestStatsLeavesOutBadCounts(t *testing.T) {
	st, err := ComputeStats(openSample(t, badCounts))
	if err != nil {
		t.Fatal(err)
	}
	if st.InputChars != 100 || st.OutputChars != 8 || st.Phases[0].DurationS != 4 {
		t.Errorf("sums: %+v", st)
	}
	if fmt.Sprint(st.LeftOut) != "map[duration_s:1 input_chars:1 output_chars:1]" {
		t.Errorf("left out: %v", st.LeftOut)
	}
}

func TestPhasesNullAndMissingAreOne(t *testing.T) {
	ix := openSample(t, `{"seq":1,"status":"dispatched"}`+"\n"+`{"seq":2,"phase":null,"status":"dispatched"}`+"\n"+
		`{"seq":3,"phase":2,"status":"dispatched"}`+"\n"+`{"seq":4,"phase":"2","status":"dispatched"}`+"\n"+
		`{"seq":5,"phase":[1],"status":"dispatched"}`+"\n"+`{"seq":6,"phase":true,"status":"dispatched"}`+"\n")
	var got []string
	for _, ph := range ix.Phases() {
		got = append(got, fmt.Sprintf("%s=%s%v", ph.Label, ph.JSON, ph.Seqs))
	}
	want := `(none)=null[1 2]|2 (number)=2[3]|2="2"[4]|[1] (array)=[1][5]|true (boolean)=true[6]`
	if strings.Join(got, "|") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
}

func TestStats(t *testing.T) {
	st, err := ComputeStats(openSample(t, sample))
	if err != nil {
		t.Fatal(err)
	}
	if st.Dispatches != 3 || st.InputChars != 600 || st.OutputChars != 50 || st.Rework != 1 || len(st.ReworkSeqs) != 1 || st.ReworkSeqs[0] != 2 {
		t.Errorf("stats: %+v", st)
	}
	if len(st.ByTier) != 2 || st.ByTier[0].Tier != "sonnet" || st.ByTier[0].Dispatches != 2 {
		t.Errorf("tiers: %+v", st.ByTier)
	}
	if len(st.Phases) != 2 || st.Phases[0].DurationS != 60 || st.Phases[1].DurationS != 7 || st.Phases[1].Dispatches != 2 {
		t.Errorf("phases: %+v", st.Phases)
	}
	if EstimatedTokens(st.InputChars) != 150 {
		t.Error("tokens")
	}
}

// FuzzIndex: reading any bytes as a manifest never panics, and the phases hold
// every seq once.
func FuzzIndex(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("{\"seq\":1,\"phase\":null}\n{\"seq\":1,\"phase\":[1]}\n{\"seq\":2,\"status\":3}"))
	f.Add([]byte(badCounts))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ix, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		n := 0
		for _, ph := range ix.Phases() {
			n += len(ph.Seqs)
			if err := ix.EachEntry(ph, func(int64, []byte) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if n != ix.Seqs() {
			t.Fatalf("phases hold %d seqs of %d", n, ix.Seqs())
		}
		Check(ix)
		ComputeStats(ix)

		// OpenCheck reads the same entries, adding only invalid_count problems.
		cx, err := OpenCheck(p)
		if err != nil {
			t.Fatal(err)
		}
		defer cx.Close()
		var other []Problem
		for _, pr := range cx.Problems {
			if pr.Kind != "invalid_count" {
				other = append(other, pr)
			}
		}
		if !reflect.DeepEqual(ix.slots, cx.slots) || !reflect.DeepEqual(ix.phases, cx.phases) ||
			(cx.MoreProblems == 0 && !reflect.DeepEqual(ix.Problems, other)) {
			t.Fatalf("OpenCheck differs:\n%+v\n%+v", ix.Problems, cx.Problems)
		}

		// The parallel first pass, with tiny blocks, agrees with the sequential one.
		defer func(n int) { blockSize = n }(blockSize)
		blockSize = 1 + len(data)%37
		seq, par := newIndex("x"), newIndex("x")
		seq.counts, par.counts = true, true
		if err := seq.read(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if err := par.readFile(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(seq.slots, par.slots) || !reflect.DeepEqual(seq.Problems, par.Problems) ||
			seq.Lines != par.Lines || seq.SkippedLines != par.SkippedLines || !reflect.DeepEqual(seq.phases, par.phases) {
			t.Fatalf("parallel read differs:\n%+v\n%+v\n%+v\n%+v", seq.slots, par.slots, seq.Problems, par.Problems)
		}
	})
}

// BenchmarkOpenAndRead reads a 100,000-line manifest: the first pass and the
// read-back of every authoritative line, as `manifest show --json` does.
func BenchmarkOpenAndRead(b *testing.B) {
	p := filepath.Join(b.TempDir(), FileName)
	var sb strings.Builder
	for s := 1; s <= 50_000; s++ {
		fmt.Fprintf(&sb, `{"seq":%d,"file":"%d-implementer.md","role":"implementer","phase":"%d","task":%d,"status":"dispatched","duration_s":null,"summary":null,"input_chars":%d,"output_chars":null,"model_tier":"opus","tool_calls":null,"model_profile":"high"}`+"\n", s, s, s/5000, s%40, s)
		fmt.Fprintf(&sb, `{"seq":%d,"file":"%d-implementer.md","role":"implementer","phase":"%d","task":%d,"status":"completed","duration_s":12,"summary":"%s","input_chars":%d,"output_chars":300,"model_tier":"opus","tool_calls":4,"model_profile":"high","actual_model":null}`+"\n", s, s, s/5000, s%40, strings.Repeat("done; ", s%20), s)
	}
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(sb.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ix, err := Open(p)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, ph := range ix.Phases() {
			ix.EachEntry(ph, func(_ int64, line []byte) error { n += len(line); return nil })
		}
		ix.Close()
	}
}

// The parallel first pass agrees with the sequential one whatever the block
// size: lines cut across blocks, lines longer than a block, torn last lines.
func TestParallelMatchesSequential(t *testing.T) {
	defer func(n int) { blockSize = n }(blockSize)
	inputs := []string{sample, sample + "\n", "", "\n\n", "{\"seq\":1}", strings.Repeat(sample+"\n", 20) + "{\"seq\":9,\"x", "x\n\n  \n"}
	for _, in := range inputs {
		for _, size := range []int{1, 2, 7, 64, 300, 4096, 1 << 20} {
			blockSize = size
			seq, par := newIndex("x"), newIndex("x")
			if err := seq.read(strings.NewReader(in)); err != nil {
				t.Fatal(err)
			}
			if err := par.readFile(strings.NewReader(in)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(seq.slots, par.slots) || !reflect.DeepEqual(seq.Problems, par.Problems) ||
				seq.Lines != par.Lines || seq.Entries != par.Entries || !reflect.DeepEqual(seq.phases, par.phases) {
				t.Fatalf("block size %d, input %q: parallel read differs", size, in[:min(len(in), 40)])
			}
		}
	}
}

func TestPhasesCountReplays(t *testing.T) {
	ix := openSample(t, `{"seq":1,"phase":"3","status":"dispatched"}
{"seq":2,"phase":"3","status":"dispatched","replay_of":1}
{"seq":2,"phase":"3","status":"failed","replay_of":1}
{"seq":3,"phase":"3","status":"dispatched","replay_of":1}
{"seq":4,"phase":"4","status":"dispatched"}
{"seq":5,"phase":"4","status":"completed","replay_of":"4"}
{"seq":6,"phase":"5","status":"completed"}
{"seq":7,"phase":"5","status":"failed","replay_of":6}
{"seq":8,"phase":"5","status":"completed","replay_of":7}
{"seq":9,"phase":"6","status":"dispatched","replay_of":10}
{"seq":10,"phase":"6","status":"dispatched","replay_of":9}
{"seq":11,"phase":"7","status":"dispatched","replay_of":11}
`)
	got := map[string]string{}
	for _, ph := range ix.Phases() {
		got[ph.Label] = ph.Status
	}
	// Phase 3: rewind's form, every replay naming the original: 1 and 2 are
	// superseded by 3, still running. Phase 4: a string replay_of replays
	// nothing. Phase 5: a chain, each replay naming the one before: 8 counts.
	// Phases 6 and 7: a replay_of at or above the entry's own seq (half of a
	// cycle, itself) replays nothing, so nothing in flight is hidden.
	want := map[string]string{"3": PhaseInFlight, "4": PhaseInFlight, "5": PhaseComplete, "6": PhaseInFlight, "7": PhaseInFlight}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("phase statuses %v, want %v", got, want)
	}
	for seq, want := range map[int64]int64{1: 3, 2: 3, 6: 8, 7: 8, 9: 10} {
		if by, ok := ix.ReplayedBy(seq); !ok || by != want {
			t.Errorf("ReplayedBy(%d) = %d, %v; want %d", seq, by, ok, want)
		}
	}
	for _, seq := range []int64{3, 4, 5, 8, 10, 11, 12} {
		if by, ok := ix.ReplayedBy(seq); ok {
			t.Errorf("ReplayedBy(%d) = %d; want none", seq, by)
		}
	}
	// Once seq 3 completes, phase 3 is complete although seq 1 never finished.
	ix = openSample(t, `{"seq":1,"phase":"3","status":"dispatched"}
{"seq":2,"phase":"3","status":"dispatched","replay_of":1}
{"seq":2,"phase":"3","status":"completed","replay_of":1}
`)
	if ph := ix.Phases(); len(ph) != 1 || ph[0].Status != PhaseComplete {
		t.Errorf("phases %+v, want one complete", ph)
	}
}

// TestStatsKeysOutliveTheReadBuffer: statuses and tiers become map keys while
// their lines sit in a read buffer that later lines overwrite; the keys must
// be copies.
func TestStatsKeysOutliveTheReadBuffer(t *testing.T) {
	var b strings.Builder
	// Written in falling seq order, so reading by seq moves the read window
	// back and refills its buffer.
	for seq := 64; seq >= 1; seq-- {
		pad := strings.Repeat(fmt.Sprint(seq%10), 3000+seq*37)
		fmt.Fprintf(&b, `{"seq":%d,"phase":"3","status":"dispatched","model_tier":"tier-%d","summary":"%s"}`+"\n", seq, seq%3, pad)
		fmt.Fprintf(&b, `{"seq":%d,"phase":"3","status":"completed","model_tier":"tier-%d","summary":"%s"}`+"\n", seq, seq%3, pad)
	}
	st, err := ComputeStats(openSample(t, b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.ByStatus, map[string]int{"completed": 64}) {
		t.Errorf("by status %v", st.ByStatus)
	}
	var tiers []string
	for _, tc := range st.ByTier {
		tiers = append(tiers, fmt.Sprintf("%s=%d", tc.Tier, tc.Dispatches))
	}
	if got := strings.Join(tiers, " "); got != "tier-1=22 tier-0=21 tier-2=21" {
		t.Errorf("by tier %s", got)
	}
}
