package node

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// addSeeds seeds with each node of the test fixtures, one at a time: small
// inputs keep the fuzzer's minimization (up to a minute per new input) short.
func addSeeds(f *testing.F) {
	for _, name := range []string{"testdata/golden-path.state.json", "testdata/edge.state.json"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		v, err := ParseJSON(data)
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range v.(*Object).Vals["nodes"].([]any) {
			f.Add(AppendCompact(nil, n))
		}
	}
	for _, s := range []string{
		`{"a":"/tmp/x","createdAt":1,"xPath":{"b":2},"__proto__":{"c":3},"10":1,"2":2}`,
		`["\ud800","\ud83d\ude00","2025-01-01T00:00:00Z","/h/.cw/runs/r/tmp/z"]`,
		`{"cwd":[1,[2,null],{}],"path":1e21,"runDir":-0}`,
		"\"\xff\xed\xa0\x80\"", `1e400`, `[[[[]]]]`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzNormalize checks the normalizer on any JSON: it never panics, leaves
// its input alone, is idempotent (a replay normalizes a snapshot body that is
// already normalized, and verify compares the two), sorts keys and drops the
// timestamp keys at every depth, and writes JSON that reads back to itself.
func FuzzNormalize(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if len(data) < 4096 {
			if valid := json.Valid([]byte(DecodeUTF8(data))); valid != (err == nil) {
				t.Fatalf("ParseJSON error %v, encoding/json valid %v", err, valid)
			}
		}
		if err != nil {
			return
		}
		before := AppendCompact(nil, v)
		n := Normalize(v)
		if after := AppendCompact(nil, v); !bytes.Equal(before, after) {
			t.Fatalf("Normalize changed its input: %s -> %s", before, after)
		}
		out := AppendCompact(nil, n)
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		back, err := ParseJSON(out)
		if err != nil {
			t.Fatalf("reading %s back: %v", out, err)
		}
		if again := AppendCompact(nil, back); !bytes.Equal(again, out) {
			t.Fatalf("round trip: %s -> %s", out, again)
		}
		if twice := AppendCompact(nil, Normalize(n)); !bytes.Equal(twice, out) {
			t.Fatalf("not idempotent: %s -> %s", out, twice)
		}
		checkNormalized(t, n)
	})
}

func checkNormalized(t *testing.T, v any) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			checkNormalized(t, e)
		}
	case *Object:
		for i, k := range x.Keys {
			if droppedKeys[k] || k == "__proto__" {
				t.Fatalf("key %q kept", k)
			}
			if i > 0 && CompareUTF16(x.Keys[i-1], k) >= 0 {
				t.Fatalf("keys out of order: %q, %q", x.Keys[i-1], k)
			}
			if isPathKey(k) {
				if _, ok := x.Vals[k].(string); !ok {
					t.Fatalf("path-like key %q holds %T", k, x.Vals[k])
				}
			}
			checkNormalized(t, x.Vals[k])
		}
	}
}

var fingerprintRE = regexp.MustCompile(`^sha256:[0-9a-f]{32}$`)

// FuzzFingerprintInputs checks the source-fingerprint input builder on any
// node object: one node: string, one string per artifact and evidence entry,
// an order-free fingerprint of the documented form, and a strict fingerprint
// that differs from the plain one.
func FuzzFingerprintInputs(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"id":"n","status":"done","updatedAt":"t","artifacts":[{"id":"a","path":null},{"path":{}}],"evidence":[{"id":1,"path":0},{"id":"e","path":"p"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil {
			return
		}
		raw, ok := v.(*Object)
		if !ok {
			return
		}
		if nodes, ok := raw.Vals["nodes"].([]any); ok && len(nodes) > 0 {
			if first, ok := nodes[0].(*Object); ok {
				raw = first
			}
		}
		id, _ := raw.Vals["id"].(string)
		n := coolWorkflowNode(id, raw)
		if want := "node:" + id + ":" + jsTemplate(raw, "status") + ":" + jsTemplate(raw, "updatedAt"); n.inputs[0] != want {
			t.Fatalf("first input %q, want %q", n.inputs[0], want)
		}
		arts, aok := objectArray(raw, "artifacts")
		evs, eok := objectArray(raw, "evidence")
		if aok && eok && len(n.inputs) != 1+len(arts)+len(evs) {
			t.Fatalf("%d inputs for %d artifacts and %d evidence", len(n.inputs), len(arts), len(evs))
		}
		for _, in := range n.inputs[1:] {
			if !strings.HasPrefix(in, "artifact:") && !strings.HasPrefix(in, "evidence:") {
				t.Fatalf("input %q", in)
			}
		}
		fp := n.fingerprint(false)
		if !fingerprintRE.MatchString(fp) {
			t.Fatalf("fingerprint %q", fp)
		}
		reversed := make([]string, len(n.inputs))
		for i, s := range n.inputs {
			reversed[len(n.inputs)-1-i] = s
		}
		if FingerprintStrings(reversed) != fp {
			t.Fatal("the fingerprint depends on the inputs' order")
		}
		if strict := n.fingerprint(true); strict == fp || !fingerprintRE.MatchString(strict) {
			t.Fatalf("strict fingerprint %q, plain %q", strict, fp)
		}
		if again := coolWorkflowNode(id, raw); again.fingerprint(true) != n.fingerprint(true) {
			t.Fatal("not deterministic")
		}
	})
}

// FuzzCrucibleManifest checks the crucible node builder on any manifest: it
// never fails on a damaged line, every node it makes can be snapshotted, and
// reading the same directory twice gives the same fingerprints.
func FuzzCrucibleManifest(f *testing.F) {
	f.Add([]byte(`{"seq":1,"file":"1-a.md","role":"r","status":"completed","summary":"/tmp/x"}` + "\n" + `{"seq":2,"replay_of":1,"status":"failed"}` + "\n{\"seq\":3,"))
	f.Add([]byte(`{"seq":1,"file":"../x","status":null}` + "\n" + `{"seq":1,"file":"1-a.md","status":"dispatched","x":{"createdAt":1}}`))
	// One directory for every input: a fresh one per input makes the fuzzer
	// crawl.
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "manifest.jsonl"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "1-a.md"), []byte("# Dispatch: a\n**Task:** 1\n---\nbody"), 0o644)
		r1, err := Open(dir, dir)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		r2, _ := Open(dir, dir)
		for _, n := range r1.Nodes() {
			if n.invalid != "" {
				t.Fatalf("node %s: %s", n.ID, n.invalid)
			}
			s, err := r1.snapshot(n.ID, true, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if fr, why := r2.Freshness(s); fr != Valid {
				t.Fatalf("node %s read twice: %s %s", n.ID, fr, why)
			}
		}
	})
}
