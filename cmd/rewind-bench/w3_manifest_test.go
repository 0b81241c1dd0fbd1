package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// W3: reading a large dispatch manifest. A generated manifest of 1,000,000 lines
// (about 300 MB; 500,000 seqs as dispatched+completed pairs in parallel waves
// completing out of order; 0.1% of the lines torn), read by `rewind manifest
// show --json`, beside jq and a short Python reader doing the same
// last-entry-per-seq reduction, and cat and wc -l as the floor of reading the
// file at all. Then one `dispatch before` + `dispatch after` pair on a
// 10,000-line manifest, beside the same pair done by a Python script in
// dispatch.py's way.
func init() {
	register(workload{name: "w3-manifest", run: w3Manifest})
}

// w3Reduce is the Python baseline: a json-lines reader that skips bad lines
// and keeps the last entry per seq, grouped by phase, printed as one document.
const w3Reduce = `import json, sys
last = {}
phases = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if not isinstance(e, dict) or not isinstance(e.get("seq"), int):
        continue
    p = e.get("phase")
    if p not in phases:
        phases.append(p)
    last[e["seq"]] = e
out = [{"phase": p, "entries": [e for e in last.values() if e.get("phase") == p]} for p in phases]
json.dump({"phases": out}, sys.stdout, ensure_ascii=False, separators=(",", ":"))
`

// w3Jq is the same reduction in jq: raw lines, fromjson? skipping bad ones.
const w3Jq = `reduce (inputs | fromjson? | select(type == "object" and (.seq | type) == "number")) as $e ({}; .[$e.seq | tostring] = $e) | [.[]] | group_by(.phase) | map({phase: .[0].phase, entries: .})`

// w3Dispatch is the Python baseline of the before+after pair: what dispatch.py
// does (before appends; after reads every row to find the dispatched entry,
// then appends the completion).
const w3Dispatch = `import json, os, sys
cmd, d, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = os.path.join(d, "manifest.jsonl")
def dumps(e): return json.dumps(e, ensure_ascii=False, separators=(",", ":"))
if cmd == "before":
    f = sys.argv[4]
    try:
        n = len(open(f, encoding="utf-8").read())
    except (OSError, UnicodeDecodeError):
        n = None
    e = {"seq": seq, "file": os.path.basename(f), "role": "implementer", "phase": "3", "task": None,
         "status": "dispatched", "duration_s": None, "summary": None, "input_chars": n,
         "output_chars": None, "model_tier": "opus", "tool_calls": None, "model_profile": "high"}
    open(p, "a").write(dumps(e) + "\n")
    print("dispatched seq %d (%s, %s chars)" % (seq, e["file"], n))
else:
    rows = []
    for line in open(p).read().split("\n"):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    prev = None
    for r in rows:
        if r.get("seq") == seq and r.get("status") == "dispatched":
            prev = r
    if prev is None:
        sys.exit(1)
    e = {"seq": seq, "file": prev.get("file"), "role": prev.get("role"), "phase": prev.get("phase"),
         "task": prev.get("task"), "status": "completed", "duration_s": 5, "summary": "done",
         "input_chars": prev.get("input_chars"), "output_chars": 100, "model_tier": prev.get("model_tier"),
         "tool_calls": 3, "model_profile": prev.get("model_profile"), "actual_model": None}
    open(p, "a").write(dumps(e) + "\n")
    print("completed seq %d (%s)" % (seq, e["file"]))
`

func w3Manifest(b *bench) {
	lines := 1_000_000
	switch b.scale {
	case "quick":
		lines = 100_000
	case "large":
		lines = 3_000_000
	}
	big := filepath.Join(b.dir, "big", "manifest.jsonl")
	size, corrupt := w3Generate(b, big, lines)
	b.note("manifest: %d lines, %d seqs, %d torn lines, %.0f MB", lines, lines/2, corrupt, float64(size)/1e6)

	rw := b.measure("rewind manifest show --json", nil, b.dir, nil, b.rewind, "manifest", "show", "--json", big)
	cat := b.measure("cat (reading floor)", nil, b.dir, nil, "cat", big)
	wc := b.measure("wc -l (reading floor)", nil, b.dir, nil, "wc", "-l", big)
	b.ratio(rw, cat, "")
	b.ratio(rw, wc, "")

	if jq := w3FindJq(b); jq != "" {
		r := b.measure("jq, same reduction", nil, b.dir, nil, jq, "-c", "-n", "-R", w3Jq, big)
		b.ratio(rw, r, "≥ 10x faster")
	}
	py, pyErr := exec.LookPath("python3")
	if pyErr != nil {
		b.note("python3 not found: the Python baselines are skipped")
	} else {
		script := filepath.Join(b.dir, "reduce.py")
		w3Write(b, script, w3Reduce)
		r := b.measure("python3 json-lines reader, same reduction", nil, b.dir, nil, py, script, big)
		b.ratio(rw, r, "≥ 8x faster")
	}
	b.note("peak memory of rewind: %s (goal ≤ 256 MiB)", mib(rw.peak))

	// The before+after pair on a 10,000-line manifest.
	small := filepath.Join(b.dir, "small")
	smallManifest := filepath.Join(small, "manifest.jsonl")
	w3Generate(b, smallManifest, 10_000)
	pristine, err := os.ReadFile(smallManifest)
	if err != nil {
		b.t.Fatal(err)
	}
	task := filepath.Join(b.dir, "task.md")
	w3Write(b, task, strings.Repeat("Implement the task as planned.\n", 200))
	reset := func() {
		if err := os.WriteFile(smallManifest, pristine, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	const next = "5001"
	pair := fmt.Sprintf("%s dispatch before --dir %s --seq %s --file %s --role implementer --phase 3 --model-tier opus >/dev/null && "+
		"%s dispatch after --dir %s --seq %s --status completed --summary done --output-chars 100 --tool-calls 3 --duration 5 >/dev/null",
		b.rewind, small, next, task, b.rewind, small, next)
	rp := b.measure("rewind dispatch before+after (10,000 lines)", reset, b.dir, nil, "sh", "-c", pair)
	if pyErr == nil {
		script := filepath.Join(b.dir, "dispatch.py")
		w3Write(b, script, w3Dispatch)
		pyPair := fmt.Sprintf("%s %s before %s %s %s >/dev/null && %s %s after %s %s >/dev/null",
			py, script, small, next, task, py, script, small, next)
		r := b.measure("python3 before+after, dispatch.py's way", reset, b.dir, nil, "sh", "-c", pyPair)
		b.ratio(rp, r, "≥ 5x faster")
	}
}

// w3FindJq returns jq's path, installing it from Debian's packages when it is
// missing and apt-get is there; "" (with a note) when it cannot be had.
func w3FindJq(b *bench) string {
	if p, err := exec.LookPath("jq"); err == nil {
		return p
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		b.note("jq not installed and no apt-get: the jq baseline is skipped")
		return ""
	}
	b.note("jq not installed: installing it with apt-get install -y jq")
	install := b.cmd(b.dir, []string{"DEBIAN_FRONTEND=noninteractive"}, "sh", "-c", "apt-get install -y jq >/dev/null 2>&1 || (apt-get update >/dev/null 2>&1 && apt-get install -y jq >/dev/null 2>&1)")
	if out, err := install.CombinedOutput(); err != nil {
		b.note("could not install jq (%v %s): the jq baseline is skipped", err, strings.TrimSpace(string(out)))
		return ""
	}
	p, err := exec.LookPath("jq")
	if err != nil {
		b.note("jq still not found after apt-get: the jq baseline is skipped")
		return ""
	}
	return p
}

func w3Write(b *bench, path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// w3Generate writes a manifest of n lines: waves of 8 dispatches, each
// dispatched in order and completed out of order, with summaries of varied
// length (about 300 bytes a line on average), and one line in a thousand torn
// (cut in the middle, as a crash leaves it). It returns the size and the number
// of torn lines.
func w3Generate(b *bench, path string, n int) (int64, int) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		b.t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	torn, lineNo := 0, 0
	emit := func(s string) {
		lineNo++
		if lineNo%1000 == 500 {
			s = s[:len(s)/2]
			torn++
		}
		k, _ := io.WriteString(w, s+"\n")
		size += int64(k)
	}
	roles := []string{"implementer", "reviewer", "red-team", "plan-writer", "test-writer"}
	tiers := []string{"opus", "sonnet", "haiku"}
	const wave = 8
	seq := 1
	words := strings.Repeat("implemented the task, ran the tests, all green; ", 4)
	for lineNo < n {
		k := wave
		if remaining := (n - lineNo) / 2; remaining < k {
			k = remaining
		}
		if k == 0 {
			break
		}
		phase := fmt.Sprint(2 + seq/50_000)
		for i := 0; i < k; i++ {
			s := seq + i
			emit(fmt.Sprintf(`{"seq":%d,"file":"%d-%s.md","role":"%s","phase":"%s","task":%d,"status":"dispatched","duration_s":null,"summary":null,"input_chars":%d,"output_chars":null,"model_tier":"%s","tool_calls":null,"model_profile":null}`,
				s, s, roles[s%len(roles)], roles[s%len(roles)], phase, s%40, 1000+s%9000, tiers[s%3]))
		}
		for i := k - 1; i >= 0; i-- { // completed in reverse order
			s := seq + i
			status := "completed"
			if s%97 == 0 {
				status = "failed"
			}
			emit(fmt.Sprintf(`{"seq":%d,"file":"%d-%s.md","role":"%s","phase":"%s","task":%d,"status":"%s","duration_s":%d,"summary":"%s","input_chars":%d,"output_chars":%d,"model_tier":"%s","tool_calls":%d,"model_profile":null,"actual_model":null}`,
				s, s, roles[s%len(roles)], roles[s%len(roles)], phase, s%40, status, 10+s%300, words[:40+s%120], 1000+s%9000, 500+s%5000, tiers[s%3], s%20))
		}
		seq += k
	}
	if err := w.Flush(); err != nil {
		b.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.t.Fatal(err)
	}
	return size, torn
}
