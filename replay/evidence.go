package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// This file holds the output evidence an output-producing dispatch can leave,
// as the conventions of real runs leave it:
//
//   - a result file "<seq>-<template>-result.md" (rewind's own --exec convention);
//   - an entry of receipt-ledger.jsonl whose dispatch_id is "<seq>-<template>"
//     (crucible's return convention: the orchestrator records every receipt it
//     accepts, {dispatch_id, phase, rcpt_sha256, verdict}, in the dispatch
//     directory, and the success cleanup keeps the ledger);
//   - an output file the dispatch file names ("write your report to `PATH`",
//     "**Output:** PATH").
//
// A run whose convention leaves none of the first two for any dispatch cannot be
// judged by them: its output dispatches are taken on their manifest status.

// ReceiptLedger is the name of crucible's receipt ledger in a dispatch directory.
const ReceiptLedger = "receipt-ledger.jsonl"

// LedgerEntry is one receipt the orchestrator accepted.
type LedgerEntry struct {
	DispatchID string `json:"dispatch_id"`
	Phase      string `json:"phase"`
	RcptSHA256 string `json:"rcpt_sha256"`
	Verdict    string `json:"verdict"`
}

// ParseReceiptLedger reads receipt-ledger.jsonl: one JSON object per line. Lines
// that are not JSON objects with a string dispatch_id (a torn last line, a row
// of another schema) are counted in bad and skipped. The last entry for a
// dispatch_id wins, as in the manifest.
func ParseReceiptLedger(r io.Reader) (entries map[string]LedgerEntry, bad int, err error) {
	entries = map[string]LedgerEntry{}
	br := bufio.NewReader(r)
	for {
		line, rerr := br.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			var raw map[string]any
			if json.Unmarshal(t, &raw) != nil {
				bad++
			} else if id, ok := raw["dispatch_id"].(string); !ok || strings.TrimSpace(id) == "" {
				bad++
			} else {
				e := LedgerEntry{DispatchID: id}
				e.Phase, _ = raw["phase"].(string)
				e.RcptSHA256, _ = raw["rcpt_sha256"].(string)
				e.Verdict, _ = raw["verdict"].(string)
				entries[id] = e
			}
		}
		if rerr == io.EOF {
			return entries, bad, nil
		}
		if rerr != nil {
			return entries, bad, rerr
		}
	}
}

// DispatchID is the id crucible's receipt ledger gives a dispatch:
// "<seq>-<template>".
func DispatchID(a Attempt) string {
	return fmt.Sprintf("%d-%s", a.Seq, Template(a))
}

// runEvidence is what a run leaves of per-dispatch output evidence, read once.
type runEvidence struct {
	ledger     map[string]LedgerEntry
	resultSeqs []int // seqs of the "<seq>-<template>-result.md" files there
}

// any reports whether the run's own dispatches leave per-dispatch output
// evidence at all. What a replay left does not count: rewind's --exec writes
// result files for its re-dispatches, which tell nothing of the convention
// of the run it replayed.
func (e *runEvidence) any(replayed map[int]bool) bool {
	for _, seq := range e.resultSeqs {
		if !replayed[seq] {
			return true
		}
	}
	for id := range e.ledger {
		seq, _, _ := strings.Cut(id, "-")
		if n, err := strconv.Atoi(seq); err != nil || !replayed[n] {
			return true
		}
	}
	return false
}

var resultFileName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d+)-.+-result\.md$`) })

// loadEvidence reads the receipt ledgers and looks for result files in dirs
// (the dispatch directory and its scratch copy).
func loadEvidence(dirs []string) *runEvidence {
	ev := &runEvidence{ledger: map[string]LedgerEntry{}}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		if f, err := os.Open(filepath.Join(dir, ReceiptLedger)); err == nil {
			entries, _, _ := ParseReceiptLedger(f)
			f.Close()
			for id, e := range entries {
				ev.ledger[id] = e
			}
		}
		if des, err := os.ReadDir(dir); err == nil {
			for _, de := range des {
				if m := resultFileName().FindStringSubmatch(de.Name()); m != nil && de.Type().IsRegular() {
					if n, err := strconv.Atoi(m[1]); err == nil {
						ev.resultSeqs = append(ev.resultSeqs, n)
					}
				}
			}
		}
	}
	return ev
}

// outputEvidence verifies an output-producing attempt by the evidence its run
// leaves: a result file, a receipt-ledger entry, or an output file its dispatch
// file names. A run that leaves no per-dispatch evidence at all has its output
// dispatches taken on their manifest status (collected in NoEvidence).
func (v *Verification) outputEvidence(a Attempt) (bool, string) {
	if v.evidence == nil {
		v.evidence = loadEvidence(v.ResultDirs)
	}
	name := ResultFile(a)
	for _, dir := range v.ResultDirs {
		if dir == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			return true, "result file " + name + " present"
		}
	}
	id := DispatchID(a)
	if e, ok := v.evidence.ledger[id]; ok {
		detail := "receipt-ledger entry " + id
		if e.Verdict != "" {
			detail += " (verdict " + e.Verdict + ")"
		}
		return true, detail
	}
	if path := v.namedOutput(a); path != "" {
		return true, "output file " + path + " named by the dispatch file present"
	}
	if v.CleanedUp {
		v.Unkept = append(v.Unkept, a.Seq)
		return true, "result file " + name + " not kept by the cleanup of the finished pipeline"
	}
	if !v.evidence.any(v.Replayed) {
		v.NoEvidence = append(v.NoEvidence, a.Seq)
		return true, "accepted on its manifest status (the run leaves no result files or receipt-ledger entries)"
	}
	return false, "no result file " + name + ", no receipt-ledger entry " + id + ", no output file named by the dispatch file"
}

// namedOutput is the first output file the attempt's dispatch file names that
// exists and was written no earlier than the dispatch, or "".
func (v *Verification) namedOutput(a Attempt) string {
	file := FindDispatchFile(v.ResultDirs, a.File)
	if file == "" {
		return ""
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	for _, p := range OutputPaths(string(data)) {
		candidates := []string{p}
		if !filepath.IsAbs(p) {
			candidates = candidates[:0]
			if v.WorkTree != "" {
				candidates = append(candidates, filepath.Join(v.WorkTree, p))
			}
			for _, dir := range v.ResultDirs {
				if dir != "" {
					candidates = append(candidates, filepath.Join(dir, p))
				}
			}
		}
		for _, c := range candidates {
			fi, err := os.Stat(c)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			// A file older than the dispatch is not its output.
			if !a.Time.IsZero() && fi.ModTime().Before(a.Time.Truncate(1e9)) {
				continue
			}
			return p
		}
	}
	return ""
}

var (
	// "**Output:** PATH", "Output file: `PATH`", "- **Output-Path:** PATH"
	outputField = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("(?i)^\\s*(?:[-*]\\s+)?(?:\\*\\*)?output(?:[ _-](?:file|path))?:(?:\\*\\*)?\\s*(.+?)\\s*$")
	})
	// "Write your report to `PATH`", "save the findings to `PATH`"
	writeTo = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("(?i)\\b(?:write|save)\\b[^`\\n]{0,80}?\\bto\\s+`([^`\\n]+)`")
	})
)

// OutputPaths lists the output files a dispatch file names, in order of
// appearance, without duplicates. Values holding template placeholders
// ("<findings-root>/...", "[PATH]", "{{dir}}", "$DIR") are not paths yet and are
// left out, as are values with spaces, backquotes or control characters (prose,
// not a path).
func OutputPaths(content string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		p = strings.Trim(strings.TrimSpace(p), "`\"'")
		p = strings.TrimRight(p, ".,;:)")
		if p == "" || strings.ContainsAny(p, "<>[]{}$ `") || seen[p] ||
			strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return
		}
		seen[p] = true
		out = append(out, p)
	}
	for _, line := range strings.Split(content, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := outputField().FindStringSubmatch(line); m != nil {
			v := m[1]
			if i := strings.Index(v, "`"); i >= 0 {
				if j := strings.Index(v[i+1:], "`"); j >= 0 {
					v = v[i+1 : i+1+j]
				}
			}
			add(v)
			continue
		}
		for _, m := range writeTo().FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
	}
	return out
}
