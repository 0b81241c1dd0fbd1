package manifest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

func writeManifest(t *testing.T, dir, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLines(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestNextSeq(t *testing.T) {
	cases := []struct {
		name    string
		data    string
		want    int64
		corrupt int
	}{
		{"missing", "", 1, 0},
		{"empty", "\n\n", 1, 0},
		{"in order", `{"seq":1}` + "\n" + `{"seq":1}` + "\n" + `{"seq":2}` + "\n", 3, 0},
		// dispatch.py v2 would say 4 (last line + 1) and hand out 4 twice.
		{"out of order", `{"seq":3}` + "\n" + `{"seq":5}` + "\n" + `{"seq":4}` + "\n", 6, 0},
		{"torn last line ignored", `{"seq":1}` + "\n" + `{"fi`, 2, 0},
		{"torn last line with its seq", `{"seq":1}` + "\n" + `{"seq":9,"fi`, 10, 0},
		{"interior damage with seq", `{"seq":1}` + "\n" + `{"seq":7,"fi` + "\n" + `{"seq":2}` + "\n", 8, 0},
		{"interior corruption", `{"seq":1}` + "\n" + `garbage` + "\n" + `{"se` + "\n" + `{"seq":2}` + "\n", 0, 2},
		{"other schemas", `{"event":"timeout-override","value":3}` + "\n" + `[1]` + "\n", 1, 0},
		// Read as json.loads reads them: NaN is a number, the last of a
		// repeated key wins, true is the int 1, a float seq is no int.
		{"NaN in a line", `{"file":"a.md","duration_s":NaN,"seq":4}` + "\n" + `{"seq":1}` + "\n", 5, 0},
		{"repeated key", `{"seq":9,"seq":2}` + "\n", 3, 0},
		{"bool seq", `{"seq":true}` + "\n", 2, 0},
		{"float seq", `{"seq":1}` + "\n" + `{"seq":7.0}` + "\n" + `{"seq":1e3}` + "\n", 2, 0},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if c.name != "missing" {
			writeManifest(t, dir, c.data)
		}
		got, err := NextSeq(dir)
		if c.corrupt > 0 {
			var de *DispatchError
			want := "dispatch seq: 2 interior corrupt line(s) in manifest.jsonl — seq recovery unsafe, refusing to allocate"
			if !errors.As(err, &de) || de.Usage || de.Msg != want {
				t.Errorf("%s: got %d, %v", c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}

func TestBeforeAfter(t *testing.T) {
	dir := t.TempDir()
	if _, err := Before(dir, before1(), false, nil); err != nil {
		t.Fatal(err)
	}
	file, err := After(dir, Completion{Seq: 1, Status: "completed", ActualModel: sp("observed-model")}, nil)
	if err != nil || file != "1-plan-writer.md" {
		t.Fatalf("After: %q, %v", file, err)
	}
	lines := readLines(t, dir)
	if len(lines) != 2 || lines[0] != wantBefore1 {
		t.Fatalf("lines: %q", lines)
	}
	last := gjson.Parse(lines[1])
	for k, want := range map[string]string{"file": "1-plan-writer.md", "role": "plan-writer", "input_chars": "12840", "model_tier": "opus", "model_profile": "high", "actual_model": "observed-model", "status": "completed"} {
		if got := last.Get(k).String(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if n, _ := NextSeq(dir); n != 2 {
		t.Errorf("next seq %d", n)
	}
}

func TestAfterRefuses(t *testing.T) {
	dir := t.TempDir()
	_, err := After(dir, Completion{Seq: 1, Status: "dispatched"}, nil)
	var de *DispatchError
	if !errors.As(err, &de) || !de.Usage || de.Msg != "dispatch after: status must be one of ['completed', 'error', 'failed', 'skipped']" {
		t.Errorf("bad status: %v", err)
	}
	_, err = After(dir, Completion{Seq: 1, Status: "completed"}, nil)
	if !errors.As(err, &de) || de.Usage || de.Msg != "dispatch after: no dispatched entry for seq 1 — refusing to fabricate a completion record" {
		t.Errorf("no dispatch: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !os.IsNotExist(err) {
		t.Error("a refused after created the manifest")
	}
	// A completed entry alone is not a dispatch; damaged lines are skipped.
	writeManifest(t, dir, `{"seq":1,"status":"completed"}`+"\n"+`garbage`+"\n")
	if _, err = After(dir, Completion{Seq: 1, Status: "completed"}, nil); !errors.As(err, &de) {
		t.Errorf("completed only: %v", err)
	}
	if len(readLines(t, dir)) != 2 {
		t.Error("a refused after appended")
	}
}

func TestAppendEndsTornLastLine(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, wantBefore1+"\n"+`{"seq":2,"file":"2-a.md","ro`)
	if _, err := Before(dir, Dispatched{Seq: 3, File: "3-b.md", Role: "r"}, false, nil); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, dir)
	if len(lines) != 3 || lines[1] != `{"seq":2,"file":"2-a.md","ro` || gjson.Get(lines[2], "seq").Int() != 3 {
		t.Fatalf("lines: %q", lines)
	}
}

func TestBeforeAutoRefusesOnInteriorCorruption(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "garbage\n"+wantBefore1+"\n")
	_, err := Before(dir, Dispatched{File: "x.md", Role: "r"}, true, nil)
	if err == nil || err.Error() != "dispatch before: 1 interior corrupt line(s) in manifest.jsonl — seq recovery unsafe, refusing to allocate" {
		t.Fatalf("got %v", err)
	}
}

// Parallel `before --seq auto` + `after` pairs never collide, interleave or
// lose a line, even for lines over PIPE_BUF.
func TestParallelAutoSeq(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			seq, err := Before(dir, Dispatched{File: "x.md", Role: strings.Repeat("r", 3000)}, true, nil)
			if err != nil {
				errs <- err
				return
			}
			summary := strings.Repeat("é", 3000)
			_, err = After(dir, Completion{Seq: seq, Status: "completed", Summary: &summary}, nil)
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	lines := readLines(t, dir)
	if len(lines) != 2*n {
		t.Fatalf("%d lines", len(lines))
	}
	seqs := map[int64]int{}
	for _, l := range lines {
		if !gjson.Valid(l) {
			t.Fatalf("torn line %q", l[:40])
		}
		seqs[gjson.Get(l, "seq").Int()]++
	}
	for s := int64(1); s <= n; s++ {
		if seqs[s] != 2 {
			t.Errorf("seq %d has %d lines", s, seqs[s])
		}
	}
}

func TestFixedFieldsWarningGoesToWarn(t *testing.T) {
	dir := t.TempDir()
	var warn bytes.Buffer
	if _, err := Before(dir, Dispatched{Seq: 1, File: "x.md", Role: strings.Repeat("r", 5000)}, false, &warn); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(warn.String(), "[dispatch WARN] entry for seq 1 still exceeds PIPE_BUF") {
		t.Errorf("warning %q", warn.String())
	}
}

func TestCleanup(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "crucible-dispatch-123")
	scratch := filepath.Join(root, "scratch")
	os.MkdirAll(filepath.Join(d, "sub"), 0o755)
	writeManifest(t, d, wantBefore1+"\n")
	os.WriteFile(filepath.Join(d, "sub", "x.md"), []byte("x"), 0o644)

	// Success needs the ledger too.
	_, err := Cleanup(d, scratch, false)
	if err == nil || err.Error() != "dispatch cleanup: both manifest.jsonl and receipt-ledger.jsonl must exist before deleting the dispatch dir (refusing)" {
		t.Fatalf("missing ledger: %v", err)
	}
	if !exists(filepath.Join(d, FileName)) {
		t.Fatal("refused cleanup removed the directory")
	}

	// Failed: the whole directory, as a directory, merged, source kept.
	os.MkdirAll(filepath.Join(scratch, "crucible-dispatch-123"), 0o755)
	os.WriteFile(filepath.Join(scratch, "crucible-dispatch-123", "old.md"), []byte("old"), 0o644)
	msg, err := Cleanup(d+"/", scratch, true)
	if err != nil || msg != "copied dispatch dir to "+scratch+"/crucible-dispatch-123 (left /tmp in place)" {
		t.Fatalf("failed: %q, %v", msg, err)
	}
	for _, p := range []string{"manifest.jsonl", "sub/x.md", "old.md"} {
		if !exists(filepath.Join(scratch, "crucible-dispatch-123", p)) {
			t.Errorf("%s not in the copy", p)
		}
	}
	if !exists(d) {
		t.Error("--failed removed the source")
	}

	// Success: both files copied (overwriting), the directory deleted.
	os.WriteFile(filepath.Join(d, LedgerName), []byte("{}\n"), 0o644)
	writeManifest(t, d, wantBefore1+"\n"+wantBefore1+"\n")
	msg, err = Cleanup(d, scratch+"/", false)
	want := "copied manifest.jsonl + receipt-ledger.jsonl to " + scratch + "/crucible-dispatch-123; deleted " + d
	if err != nil || msg != want {
		t.Fatalf("success: %q, %v", msg, err)
	}
	if exists(d) || len(readLines(t, filepath.Join(scratch, "crucible-dispatch-123"))) != 2 {
		t.Error("success cleanup did not copy and delete")
	}

	_, err = Cleanup(d, scratch, false)
	if err == nil || err.Error() != "dispatch cleanup: dispatch dir missing: "+d {
		t.Errorf("missing dir: %v", err)
	}
}

func TestNextSeqBeyond64Bits(t *testing.T) {
	dir := t.TempDir()
	var de *DispatchError
	writeManifest(t, dir, `{"seq":1}`+"\n"+`{"seq":99999999999999999999,"file":"x.md"}`+"\n")
	if _, err := NextSeq(dir); !errors.As(err, &de) ||
		de.Msg != "dispatch seq: seq 99999999999999999999 on line 2 of manifest.jsonl does not fit 64 bits — refusing to allocate" {
		t.Errorf("big seq: %v", err)
	}
	writeManifest(t, dir, `{"seq":9223372036854775807}`+"\n")
	if _, err := NextSeq(dir); !errors.As(err, &de) ||
		de.Msg != "dispatch seq: seq 9223372036854775807 on line 1 of manifest.jsonl is the largest 64-bit seq — no next seq, refusing to allocate" {
		t.Errorf("max seq: %v", err)
	}
	// A torn last line is ignored whatever it holds.
	writeManifest(t, dir, `{"seq":1}`+"\n"+`{"seq":99999999999999999999,"fi`)
	if n, err := NextSeq(dir); n != 2 || err != nil {
		t.Errorf("torn big seq: %d, %v", n, err)
	}
}

func TestAfterMatchesAsPython(t *testing.T) {
	dir := t.TempDir()
	// seq 1.0 matches --seq 1; the repeated status counts by its last value;
	// NaN is copied as Python writes it.
	writeManifest(t, dir, `{"seq":1.0,"file":"1-a.md","role":"r","phase":"2","task":null,"status":"completed","status":"dispatched","duration_s":null,"summary":null,"input_chars":NaN,"output_chars":null,"model_tier":"opus","tool_calls":null,"model_profile":"high"}`+"\n"+
		`{"seq":1,"file":"1-b.md","status":"dispatched","status":"completed"}`+"\n")
	file, err := After(dir, Completion{Seq: 1, Status: "completed"}, nil)
	if err != nil || file != "1-a.md" {
		t.Fatalf("after: %q, %v", file, err)
	}
	lines := readLines(t, dir)
	want := `{"seq":1,"file":"1-a.md","role":"r","phase":"2","task":null,"status":"completed","duration_s":null,"summary":null,"input_chars":NaN,"output_chars":null,"model_tier":"opus","tool_calls":null,"model_profile":"high","actual_model":null}`
	if lines[2] != want {
		t.Errorf("got  %s\nwant %s", lines[2], want)
	}
}

// FuzzSeqScan checks seq allocation on any manifest: it never panics, and a
// seq it hands out is above every seq dispatch.py would read from a whole line.
func FuzzSeqScan(f *testing.F) {
	for _, s := range []string{"", `{"seq":1}` + "\n" + `{"seq":3,"a":NaN}` + "\n", `{"seq":2,"seq":9}` + "\n" + `{"se`,
		`{"seq":true}` + "\n" + `{"seq":1.5}` + "\n" + `[1]` + "\n", `{"seq":99999999999999999999}` + "\n", "x\n{\"seq\":4,\"f\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		next, corrupt, big, err := seqScan(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if corrupt > 0 || big != nil {
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			v, err := parsePy([]byte(line))
			if err != nil {
				continue
			}
			if n, ok, _ := v.get("seq").int64Value(); ok && n >= next {
				t.Fatalf("next seq %d, but line %q has seq %d", next, line, n)
			}
		}
	})
}
