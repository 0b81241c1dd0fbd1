package report

import (
	"strings"
	"testing"
)

func TestParseDiffRecords(t *testing.T) {
	in := strings.Join([]string{
		`{"type":"replay-diff","original_session":"100","replay_session":"m1","control_session":"c1","arm":"mutated","repeat":2,"mutations":["a.md -> b.md",7],"metrics":{"original_dispatches":4,"replayed_dispatches":3,"control_gate_rounds":3,"mutated_gate_rounds":1,"wall":"x"},"outcome":{"replayed":"PASS","original":"FAIL"},"artifact_diff":{"files_changed":2,"insertions":10,"deletions":1.5}}`,
		`{"type":"event"}`,
		``,
		`not json`,
		`{"type":"replay-diff","replay_session":"r2","repeat":"3","metrics":[1]}`,
		`{"type":"replay-diff","replay_session":"torn`,
	}, "\n")
	recs, bad, err := ParseDiffRecords(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if bad != 3 || len(recs) != 2 {
		t.Fatalf("got %d records, %d bad; want 2 and 3", len(recs), bad)
	}
	d := recs[0]
	if d.Line != 1 || d.OriginalSession != "100" || d.ReplaySession != "m1" || d.ControlSession != "c1" || d.Arm != "mutated" || d.Repeat == nil || *d.Repeat != 2 {
		t.Errorf("fields: %+v", d)
	}
	if len(d.Mutations) != 1 || d.Mutations[0] != "a.md -> b.md" {
		t.Errorf("mutations %q: the number is not a mutation", d.Mutations)
	}
	var names []string
	for _, m := range d.Metrics {
		names = append(names, m.Metric)
	}
	if strings.Join(names, ",") != "dispatches,gate_rounds,wall" {
		t.Errorf("metric rows %v", names)
	}
	if got := d.Metrics[0].Delta(); got != "-1" {
		t.Errorf("dispatches delta %q, want -1 (replayed - original)", got)
	}
	if got := d.Metrics[1].Delta(); got != "-2" {
		t.Errorf("gate rounds delta %q, want -2 (mutated - control)", got)
	}
	if v := d.Metrics[2].Values["value"]; v != nil {
		t.Errorf("a string metric reads as %v, want missing", *v)
	}
	if d.ReplayOutcome() != "PASS" || d.Outcome[0].Key != "original" {
		t.Errorf("outcome %+v", d.Outcome)
	}
	a := d.Artifact
	if a == nil || a.FilesChanged == nil || *a.FilesChanged != 2 || *a.Insertions != 10 || a.Deletions != nil {
		t.Errorf("artifact diff %+v: 1.5 lines is not a count", a)
	}
	if r := recs[1]; r.Line != 5 || r.Repeat != nil || r.Metrics != nil || r.Artifact != nil {
		t.Errorf("second record %+v: wrong types read as missing", r)
	}
}

func FuzzParseDiffRecords(f *testing.F) {
	f.Add(`{"type":"replay-diff","original_session":"1","replay_session":"2","metrics":{"original_dispatches":1,"replayed_dispatches":2},"outcome":{"replayed":"PASS"},"artifact_diff":{"files_changed":1}}`)
	f.Add("{\"type\":\"replay-diff\",\"repeat\":1e308,\"metrics\":{\"original_\":null}}\n{")
	f.Fuzz(func(t *testing.T, in string) {
		recs, bad, err := ParseDiffRecords(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(in, "\n") + 1
		if len(recs)+bad > lines {
			t.Fatalf("%d records and %d bad lines from %d lines", len(recs), bad, lines)
		}
		for _, r := range recs {
			for _, m := range r.Metrics {
				_ = m.Delta()
			}
			_ = r.ReplayOutcome()
		}
	})
}
