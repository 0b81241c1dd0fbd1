package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The values are what node v20 prints for String(x) / JSON.stringify.
func TestNumberString(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {1, "1"}, {-1.5, "-1.5"}, {100, "100"}, {0.1, "0.1"}, {1e21, "1e+21"}, {1e20, "100000000000000000000"},
		{123e20, "1.23e+22"}, {1e-6, "0.000001"}, {1e-7, "1e-7"}, {1.5e-10, "1.5e-10"}, {5e-324, "5e-324"},
		{-12.5e3, "-12500"}, {1.2345678901234569e+23, "1.2345678901234569e+23"}, {0.000123, "0.000123"},
	} {
		if got := NumberString(c.in); got != c.want {
			t.Errorf("NumberString(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	// U+1F600 is D83D DE00 in UTF-16: before U+FFFF, though its code point is larger.
	ordered := []string{"", "10", "2", "B", "a", "ab", "\u00e4", "\U0001F600", "\uffff"}
	for i := 1; i < len(ordered); i++ {
		if CompareUTF16(ordered[i-1], ordered[i]) >= 0 || CompareUTF16(ordered[i], ordered[i-1]) <= 0 {
			t.Errorf("%q should sort before %q", ordered[i-1], ordered[i])
		}
	}
	if CompareUTF16("x", "x") != 0 {
		t.Error("equal strings")
	}
}

func TestParseJSONErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a"}`, `[1,]`, `01`, `"\x"`, `"a` + "\n" + `"`, `nul`, `1 2`, "\ufeff{}"} {
		if _, err := ParseJSON([]byte(in)); err == nil {
			t.Errorf("ParseJSON(%q) accepted", in)
		}
	}
}

func TestNormalizeString(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/x y":                     "<tmp> y",
		"at 2025-03-01T00:00:01.000Z.": "at <timestamp>.",
		"20250301T000000Z":             "<timestamp>",
		"/home/u/.cw/runs/r1/sub":      "<run-dir>/sub",
		"/home/u/src":                  "/home/u/src",
		"/Users/x/.cw/evals/e/y z":     "<eval-dir>/y z",
	} {
		if got := NormalizeString(in); got != want {
			t.Errorf("NormalizeString(%q) = %q, want %q", in, got, want)
		}
	}
}

// Two replays of one snapshot are byte-identical but for replayedAt.
func TestReplaysDifferOnlyInReplayedAt(t *testing.T) {
	_, run := goldenRun(t)
	snap, err := run.TakeSnapshot(goldenNode, true, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := run.TakeReplay(snap, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b, err := run.TakeReplay(snap, time.Date(2027, 6, 7, 8, 9, 10, 123e6, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if b.ReplayedAt != "2027-06-07T08:09:10.123Z" {
		t.Errorf("replayedAt %s", b.ReplayedAt)
	}
	a.ReplayedAt, b.ReplayedAt = "", ""
	if !bytes.Equal(Pretty(a.Document()), Pretty(b.Document())) {
		t.Errorf("replays differ:\n%s\n%s", Pretty(a.Document()), Pretty(b.Document()))
	}
}

// A stored snapshot of another run, or of a bad shape, is refused when read.
func TestLoadSnapshotChecksShape(t *testing.T) {
	dir, run := goldenRun(t)
	nodeDir := filepath.Join(dir, "nodes", "snapshots", "x")
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"other-run":  `{"schemaVersion":1,"snapshotId":"s","runId":"other","nodeId":"n","capturedAt":"c","sourceFingerprint":"f","body":{"id":"n","kind":"k","status":"s","loopStage":"l","inputs":{},"outputs":{},"artifacts":[],"evidence":[],"errors":[],"parents":[],"children":[]}}`,
		"bad-body":   `{"schemaVersion":1,"snapshotId":"s","runId":"golden-path","nodeId":"n","capturedAt":"c","sourceFingerprint":"f","body":{"id":"n","kind":"k","status":"s","loopStage":"l","inputs":[]}}`,
		"bad-schema": `{"schemaVersion":2}`,
		"not-json":   `{`,
	} {
		if err := os.WriteFile(filepath.Join(nodeDir, name+".json"), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := run.LoadSnapshot(name)
		e, ok := err.(*Error)
		if !ok || e.Code != CodeRecordInvalid || !strings.Contains(e.Message, "invalid persisted NodeSnapshot") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A node whose body cool-workflow could not read back is not snapshotted.
func TestSnapshotRefusesAnInvalidNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"id":"r","nodes":[{"id":"n","kind":"k","status":"s","loopStage":"l","inputs":{},"outputs":{},"artifacts":{},"evidence":[]}]}`), 0o644)
	run, err := Open(dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.TakeSnapshot("n", false, time.Time{})
	if e, ok := err.(*Error); !ok || e.Code != CodeNodeInvalid || !strings.HasSuffix(e.Message, "artifacts must be an array of objects") {
		t.Errorf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nodes")); !os.IsNotExist(err) {
		t.Error("something was written")
	}
}

// A node id that would name the snapshots directory's parent is refused:
// cool-workflow would write its snapshots outside their directory.
func TestSnapshotRefusesADotID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"id":"r","nodes":[{"id":"..","kind":"k","status":"s","loopStage":"l","inputs":{},"outputs":{},"artifacts":[],"evidence":[],"errors":[],"parents":[],"children":[]}]}`), 0o644)
	run, err := Open(dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.TakeSnapshot("..", false, time.Time{}); err == nil || err.(*Error).Code != CodeNodeInvalid {
		t.Errorf("got %v", err)
	}
}

// As statecore-diff-node-snapshots.test.js: metadata missing -> present is
// added, present -> missing removed, present -> other changed; links is one
// unit; identical bodies give eight same sections with no payload.
func TestDiffBodies(t *testing.T) {
	parse := func(s string) *Object {
		v, err := ParseJSON([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return v.(*Object)
	}
	base := parse(`{"status":"completed","parents":["a"],"children":[]}`)
	withMeta := parse(`{"status":"completed","parents":["a"],"children":["b"],"metadata":{"k":1}}`)
	otherMeta := parse(`{"status":"completed","parents":["a"],"children":["b"],"metadata":{"k":2}}`)
	changes := func(d []SectionDiff) map[string]string {
		m := map[string]string{}
		for _, s := range d {
			m[s.Section] = s.Change
		}
		return m
	}
	if c := changes(DiffBodies(base, withMeta, false)); c["metadata"] != Added || c["links"] != Changed || c["status"] != Same || len(c) != 8 {
		t.Errorf("base -> withMeta: %v", c)
	}
	if c := changes(DiffBodies(withMeta, base, false)); c["metadata"] != Removed {
		t.Errorf("withMeta -> base: %v", c)
	}
	if c := changes(DiffBodies(withMeta, otherMeta, true)); c["metadata"] != Changed || len(c) != 11 {
		t.Errorf("withMeta -> otherMeta: %v", c)
	}
	for _, s := range DiffBodies(base, base, false) {
		if s.Change != Same || s.HasBaseline || s.HasCandidate {
			t.Errorf("identical bodies: %+v", s)
		}
	}
}
