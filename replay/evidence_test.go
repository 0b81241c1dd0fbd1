package replay

import (
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseReceiptLedger(t *testing.T) {
	in := `{"dispatch_id":"2-plan-reviewer","phase":"build:2/1","rcpt_sha256":"ab","verdict":"FAIL"}
not json
{"event":"other schema"}
{"dispatch_id":"2-plan-reviewer","phase":"build:2/2","rcpt_sha256":"cd","verdict":"PASS"}

{"dispatch_id":"5-red-team","verdict":"BLOCKED"}
{"dispatch_id":"6-to`
	entries, bad, err := ParseReceiptLedger(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if bad != 3 {
		t.Errorf("bad = %d, want 3", bad)
	}
	want := map[string]LedgerEntry{
		"2-plan-reviewer": {DispatchID: "2-plan-reviewer", Phase: "build:2/2", RcptSHA256: "cd", Verdict: "PASS"},
		"5-red-team":      {DispatchID: "5-red-team", Verdict: "BLOCKED"},
	}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("entries %+v", entries)
	}
}

func FuzzParseReceiptLedger(f *testing.F) {
	f.Add(`{"dispatch_id":"1-plan-writer","phase":"build:2/1","rcpt_sha256":"00","verdict":"PASS"}` + "\n")
	f.Add("{\"dispatch_id\":1}\n{]\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		entries, bad, err := ParseReceiptLedger(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if bad < 0 || len(entries)+bad > strings.Count(in, "\n")+1 {
			t.Errorf("%d entries and %d bad lines from %d lines", len(entries), bad, strings.Count(in, "\n")+1)
		}
		for id, e := range entries {
			if id != e.DispatchID || strings.TrimSpace(id) == "" {
				t.Errorf("entry %q: %+v", id, e)
			}
		}
	})
}

func TestOutputPaths(t *testing.T) {
	doc := "# Dispatch: investigator\n**Output:** /tmp/crucible-debug-1/investigation-1.md\n\n---\n" +
		"Write your complete report to `docs/reports/error-analysis.md`.\n" +
		"- **Output-File:** `notes.md`\n" +
		"Save the findings to `<findings-root>/round-1.md` and write output to `[PATH]`.\n" +
		"Output file: docs/reports/error-analysis.md\n" +
		"Read `src/main.go` and report.\n"
	got := OutputPaths(doc)
	want := []string{"/tmp/crucible-debug-1/investigation-1.md", "docs/reports/error-analysis.md", "notes.md"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OutputPaths = %q, want %q", got, want)
	}
}

func FuzzOutputPaths(f *testing.F) {
	f.Add("**Output:** a.md\nWrite your report to `b/c.md`.\n")
	f.Add("Output file: `x`\nsave it to `<y>`")
	f.Fuzz(func(t *testing.T, in string) {
		seen := map[string]bool{}
		for _, p := range OutputPaths(in) {
			if p == "" || seen[p] || strings.ContainsAny(p, "<>[]{}$ \t\n`") {
				t.Errorf("bad path %q", p)
			}
			seen[p] = true
		}
	})
}

func TestOutputEvidence(t *testing.T) {
	reviewer := func(seq int) Attempt {
		return Attempt{Seq: seq, File: strconv.Itoa(seq) + "-plan-reviewer.md", Role: "plan-reviewer", Status: "completed"}
	}

	// A run with a receipt ledger: an entry verifies its dispatch, a dispatch
	// without one fails.
	dir := t.TempDir()
	write(t, filepath.Join(dir, ReceiptLedger),
		`{"dispatch_id":"2-plan-reviewer","phase":"build:2/1","rcpt_sha256":"ab","verdict":"PASS"}`+"\n")
	v := &Verification{Kinds: DefaultRoleKinds(), ResultDirs: []string{dir}}
	if f := v.Verify(Dispatch{}, reviewer(2)); !f.OK || f.Detail != "receipt-ledger entry 2-plan-reviewer (verdict PASS)" {
		t.Errorf("ledger entry: %+v", f)
	}
	if f := v.Verify(Dispatch{}, reviewer(3)); f.OK || !strings.Contains(f.Detail, "no receipt-ledger entry 3-plan-reviewer") {
		t.Errorf("missing ledger entry: %+v", f)
	}
	if len(v.NoEvidence) != 0 {
		t.Errorf("no-evidence seqs %v in a run with a ledger", v.NoEvidence)
	}

	// An output file the dispatch file names, written after the dispatch.
	write(t, filepath.Join(dir, "3-plan-reviewer.md"), "# Dispatch: plan-reviewer\n\n---\nWrite your review to `review-3.md`.\n")
	work := t.TempDir()
	v = &Verification{Kinds: DefaultRoleKinds(), ResultDirs: []string{dir}, WorkTree: work}
	a := reviewer(3)
	a.Time = time.Now().Add(-time.Minute)
	write(t, filepath.Join(work, "review-3.md"), "looks good")
	if f := v.Verify(Dispatch{}, a); !f.OK || f.Detail != "output file review-3.md named by the dispatch file present" {
		t.Errorf("named output: %+v", f)
	}
	a.Time = time.Now().Add(time.Hour) // the file predates the dispatch: not its output
	if f := v.Verify(Dispatch{}, a); f.OK {
		t.Errorf("stale named output accepted: %+v", f)
	}

	// A run with no result files and no ledger entries at all: output roles
	// are taken on their manifest status, and listed.
	bare := t.TempDir()
	write(t, filepath.Join(bare, ReceiptLedger), "")
	v = &Verification{Kinds: DefaultRoleKinds(), ResultDirs: []string{bare, filepath.Join(bare, "missing")}}
	for _, seq := range []int{1, 4} {
		if f := v.Verify(Dispatch{}, reviewer(seq)); !f.OK || !strings.Contains(f.Detail, "accepted on its manifest status") {
			t.Errorf("no evidence, seq %d: %+v", seq, f)
		}
	}
	if !reflect.DeepEqual(v.NoEvidence, []int{1, 4}) {
		t.Errorf("NoEvidence %v", v.NoEvidence)
	}

	// One result file in the run makes a missing one count against its dispatch.
	write(t, filepath.Join(bare, "1-plan-reviewer-result.md"), "ok")
	v = &Verification{Kinds: DefaultRoleKinds(), ResultDirs: []string{bare}}
	if f := v.Verify(Dispatch{}, reviewer(1)); !f.OK {
		t.Errorf("result file: %+v", f)
	}
	if f := v.Verify(Dispatch{}, reviewer(4)); f.OK {
		t.Errorf("missing result file in a run that has them: %+v", f)
	}
}
