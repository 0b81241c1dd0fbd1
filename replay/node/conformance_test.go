package node

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const goldenNode = "golden-path:result:golden:prove"

// goldenRun puts the conformance fixture in a run directory of its own.
func goldenRun(t *testing.T) (dir string, run *Run) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), ".cw", "runs", "golden-path")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "testdata/golden-path.state.json", filepath.Join(dir, "state.json"))
	run, err := Open(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir, run
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantFile(t *testing.T, name string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// transition is the conformance's transitionStateNode(node, {status:
// "verified", loopStage: "adjust", outputs: {verdict: "ok"}}, "2025-03-01T00:00:04.000Z").
func transition(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "state.json")
	data, _ := os.ReadFile(path)
	v, err := ParseJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	n := v.(*Object).Vals["nodes"].([]any)[0].(*Object)
	n.Set("status", "verified")
	n.Set("loopStage", "adjust")
	out := NewObject()
	out.Set("verdict", "ok")
	n.Set("outputs", out)
	n.Set("updatedAt", "2025-03-01T00:00:04.000Z")
	if err := os.WriteFile(path, Pretty(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConformanceGoldenPath(t *testing.T) {
	dir, run := goldenRun(t)
	snap, err := run.TakeSnapshot(goldenNode, false, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, "generated.golden-path.snapshot.json", Pretty(snap.Document()))
	stored, err := os.ReadFile(filepath.Join(dir, "nodes", "snapshots", goldenNode, snap.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, "generated.golden-path.snapshot.json", stored)

	now, _ := time.Parse(time.RFC3339, "2025-03-02T00:00:00.000Z")
	loaded, _, err := run.LoadSnapshot(snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := run.TakeReplay(loaded, now)
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, "generated.golden-path.replay.json", Pretty(rp.Document()))

	if v := run.Verify(rp, false); !v.Pass || len(v.Findings) != 0 {
		t.Errorf("verify of an unchanged node: %s", Pretty(v.Document()))
	}

	transition(t, dir)
	run2, err := Open(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	after, err := run2.TakeSnapshot(goldenNode, false, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, "generated.golden-path.snapshot-after-transition.json", Pretty(after.Document()))
	wantFile(t, "generated.golden-path.diff.json", Pretty(DiffSnapshots(loaded, after, false).Document()))
	wantFile(t, "generated.golden-path.verify-drift.json", Pretty(run2.Verify(rp, false).Document()))

	if fr, reason := run2.Freshness(loaded); fr != Stale || reason != "source node "+goldenNode+" changed since capture" {
		t.Errorf("freshness after the transition: %s %q", fr, reason)
	}
	if _, err := run2.TakeReplay(loaded, now); err == nil || err.(*Error).Code != CodeSnapshotStale {
		t.Errorf("replay of a stale snapshot: %v", err)
	}
}

// The fingerprint examples of the reference.
func TestFingerprintStrings(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"a", "b"}, "sha256:0473ef2dc0d324ab659d3580c1134e9d"},
		{[]string{"b", "a"}, "sha256:0473ef2dc0d324ab659d3580c1134e9d"},
		{[]string{}, "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5"},
		{[]string{"evidence:evidence:1:", "node:golden-path:result:golden:prove:completed:2025-03-01T00:00:01.000Z"}, "sha256:20448dc064eadc11e504d99a619ba813"},
	} {
		if got := FingerprintStrings(c.in); got != c.want {
			t.Errorf("FingerprintStrings(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// TestEdgeCasesAsCoolWorkflow replays testdata/edge.gen.js in Go: numbers,
// escapes, lone surrogates, invalid UTF-8, key order, path-like keys, scrubs,
// artifact and evidence paths of every JSON type, duplicate keys.
func TestEdgeCasesAsCoolWorkflow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "edge-run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "testdata/edge.state.json", filepath.Join(dir, "state.json"))
	run, err := Open(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now, _ := time.Parse(time.RFC3339, "2025-03-02T00:00:00.000Z")
	var out []byte
	var prev *Snapshot
	for _, n := range run.Nodes() {
		snap, err := run.snapshot(n.ID, false, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Pretty(snap.Document())...)
		// The replay reads the snapshot back, as cool-workflow's CLI does.
		v, err := ParseJSON(Pretty(snap.Document()))
		if err != nil {
			t.Fatal(err)
		}
		snap.Body = v.(*Object).Vals["body"].(*Object)
		body := Normalize(snap.Body).(*Object)
		bodyJSON, _ := StableString(body, true)
		fp := FingerprintStrings([]string{bodyJSON})
		rp := &Replay{ID: "replay-" + snap.ID + "-" + fp[7:15], RunID: run.ID, NodeID: n.ID, SnapshotID: snap.ID,
			ReplayedAt: ISOTime(now), Freshness: Valid, ContractValidated: truthy(body.Vals["contractId"]), OutputFingerprint: fp, Body: body}
		out = append(out, Pretty(rp.Document())...)
		if prev != nil {
			out = append(out, Pretty(DiffSnapshots(prev, snap, false).Document())...)
		}
		prev = snap
	}
	wantFile(t, "edge.expected.txt", out)
}
