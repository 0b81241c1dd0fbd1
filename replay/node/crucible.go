package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rewind-cli/rewind/manifest"
)

// entryInputs and entryOutputs split a manifest entry's known keys between a
// crucible node's inputs and outputs; every other key but seq and status
// (replay_of, replay_session, mutation, keys rewind does not know) goes to
// metadata.
var (
	entryInputs  = []string{"file", "role", "phase", "task", "input_chars", "model_tier", "model_profile"}
	entryOutputs = []string{"summary", "output_chars", "duration_s", "tool_calls", "actual_model"}
)

// outputArtifacts are the files a dispatch leaves beside its dispatch file
// <seq>-<template>.md, by suffix, with the id and kind a node records them
// under.
var outputArtifacts = []struct{ suffix, id, kind string }{
	{"-result.md", "result", "result"},
	{"-stderr.log", "stderr", "log"},
}

// crucibleSeq is what the manifest and the ledger hold for one seq.
type crucibleSeq struct {
	seq     int64
	lines   [][]byte // every line naming the seq, in file order (damaged ones too)
	last    []byte   // the authoritative (last valid) entry's line
	entry   *Object  // last, parsed
	receipt [][]byte // the receipt-ledger lines of its dispatch file
}

// openCrucible reads a dispatch directory's manifest.jsonl (and
// receipt-ledger.jsonl beside it). A node is a seq.
func openCrucible(loc *manifest.Located) (*Run, error) {
	dir, err := filepath.Abs(filepath.Dir(loc.Path))
	if err != nil {
		return nil, err
	}
	src, err := filepath.Abs(loc.Path)
	if err != nil {
		return nil, err
	}
	r := &Run{Kind: KindCrucible, ID: filepath.Base(dir), Dir: dir, Source: src, Notes: loc.Notes, byID: map[string]*Node{}}
	f, err := os.Open(loc.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bySeq := map[int64]*crucibleSeq{}
	var order []*crucibleSeq
	err = manifest.Scan(f, func(l *manifest.Line) error {
		if l.Kind == manifest.Other || !l.SeqOK {
			return nil
		}
		s := bySeq[l.Seq]
		if s == nil {
			s = &crucibleSeq{seq: l.Seq}
			bySeq[l.Seq] = s
			order = append(order, s)
		}
		line := append([]byte(nil), l.Raw...)
		s.lines = append(s.lines, line)
		if l.Kind == manifest.Entry {
			s.last = line
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, s := range order {
		if s.last == nil {
			continue
		}
		// The scanner took it for a JSON object with an integer seq.
		v, err := ParseJSON(s.last)
		if err != nil {
			return nil, fmt.Errorf("%s: seq %d: %w", loc.Path, s.seq, err)
		}
		s.entry = v.(*Object)
	}
	if err := readLedger(filepath.Join(dir, manifest.LedgerName), bySeq); err != nil {
		return nil, err
	}

	// Replay links: an entry's replay_of names an earlier seq it re-dispatches.
	children := map[int64][]int64{}
	parent := map[int64]int64{}
	for _, s := range order {
		if s.entry == nil {
			continue
		}
		if p, ok := replayOf(s); ok {
			parent[s.seq] = p
			children[p] = append(children[p], s.seq)
		}
	}
	for _, s := range order {
		if s.entry == nil {
			continue // only damaged lines: no entry to make a node of
		}
		kids := children[s.seq]
		sort.Slice(kids, func(a, b int) bool { return kids[a] < kids[b] })
		p, hasParent := parent[s.seq]
		r.add(crucibleNode(dir, s, p, hasParent, kids))
	}
	return r, nil
}

// replayOf is the seq an entry re-dispatches: an integer smaller than its own.
func replayOf(s *crucibleSeq) (int64, bool) {
	f, ok := s.entry.Vals["replay_of"].(float64)
	if !ok || f != float64(int64(f)) || int64(f) >= s.seq {
		return 0, false
	}
	return int64(f), true
}

// readLedger files each receipt-ledger line under the seq its dispatch_id
// ("<seq>-<template>") names.
func readLedger(path string, bySeq map[int64]*crucibleSeq) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		line := sc.Bytes()
		v, err := ParseJSON(line)
		if err != nil {
			continue
		}
		o, ok := v.(*Object)
		if !ok {
			continue
		}
		id, _ := o.Vals["dispatch_id"].(string)
		head, _, _ := strings.Cut(id, "-")
		seq, err := strconv.ParseInt(head, 10, 64)
		if err != nil {
			continue
		}
		if s := bySeq[seq]; s != nil && s.entry != nil {
			if file, _ := s.entry.Vals["file"].(string); strings.TrimSuffix(file, ".md") == id {
				s.receipt = append(s.receipt, append([]byte(nil), line...))
			}
		}
	}
	return sc.Err()
}

func crucibleNode(dir string, s *crucibleSeq, parent int64, hasParent bool, children []int64) *Node {
	e := s.entry
	id := strconv.FormatInt(s.seq, 10)
	n := &Node{ID: id, Kind: "dispatch"}
	if role, ok := e.Vals["role"].(string); ok && role != "" {
		n.Kind = role
	}
	n.Status, _ = e.Vals["status"].(string)
	if n.Status == "" {
		n.Status = "unknown"
	}

	inputs, outputs, metadata := NewObject(), NewObject(), NewObject()
	for _, k := range e.Keys {
		switch {
		case k == "seq" || k == "status":
		case contains(entryInputs, k):
			inputs.Set(k, e.Vals[k])
		case contains(entryOutputs, k):
			outputs.Set(k, e.Vals[k])
		default:
			metadata.Set(k, e.Vals[k])
		}
	}
	n.inputs = []string{"node:" + id + ":" + n.Status}
	for _, l := range s.lines {
		n.inputs = append(n.inputs, "line:"+sha256Hex(l))
	}

	// The dispatch file: its hash and audit header. A file name that is not a
	// plain name in the dispatch directory is not followed.
	file, _ := e.Vals["file"].(string)
	plain := file != "" && file == filepath.Base(file) && file != "." && file != ".."
	n.files = map[string]string{}
	if plain {
		n.files["dispatch-file"] = file
		for _, oa := range outputArtifacts {
			n.files[oa.id] = strings.TrimSuffix(file, ".md") + oa.suffix
		}
	}
	var dispatchFile any // null: absent or unreadable
	if plain {
		if data, err := os.ReadFile(filepath.Join(dir, file)); err == nil {
			df := NewObject()
			df.Set("sha256", sha256Hex(data))
			df.Set("sizeBytes", float64(len(data)))
			df.Set("header", dispatchHeader(data))
			dispatchFile = df
			n.inputs = append(n.inputs, "dispatch-file:"+file+":"+sha256Hex(data))
		} else {
			n.inputs = append(n.inputs, "dispatch-file:"+file+":absent")
		}
		inputs.Set("template", templateOf(file, s.seq))
	}
	inputs.Set("dispatchFile", dispatchFile)

	artifacts := []any{}
	if plain {
		base := strings.TrimSuffix(file, ".md")
		for _, oa := range outputArtifacts {
			name := base + oa.suffix
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			a := NewObject()
			a.Set("id", oa.id)
			a.Set("kind", oa.kind)
			a.Set("path", name)
			a.Set("sha256", sha256Hex(data))
			a.Set("sizeBytes", float64(len(data)))
			artifacts = append(artifacts, a)
			n.inputs = append(n.inputs, "artifact:"+oa.id+":"+name+":"+sha256Hex(data))
		}
	}

	evidence := []any{}
	for i, line := range s.receipt {
		v, _ := ParseJSON(line)
		ev := NewObject()
		ev.Set("id", "receipt:"+strconv.Itoa(i+1))
		ev.Set("source", manifest.LedgerName)
		ev.Set("record", v)
		evidence = append(evidence, ev)
		n.inputs = append(n.inputs, "receipt:"+sha256Hex(line))
	}

	errs := []any{}
	if n.Status == "failed" || n.Status == "error" {
		ne := NewObject()
		ne.Set("code", n.Status)
		msg, _ := e.Vals["summary"].(string)
		ne.Set("message", msg)
		errs = append(errs, ne)
	}

	parents, kids := []any{}, []any{}
	if hasParent {
		parents = append(parents, strconv.FormatInt(parent, 10))
	}
	for _, c := range children {
		kids = append(kids, strconv.FormatInt(c, 10))
		n.inputs = append(n.inputs, "child:"+strconv.FormatInt(c, 10))
	}

	p := NewObject()
	p.Set("id", id)
	p.Set("kind", n.Kind)
	p.Set("status", n.Status)
	p.Set("inputs", inputs)
	p.Set("outputs", outputs)
	p.Set("artifacts", artifacts)
	p.Set("evidence", evidence)
	p.Set("errors", errs)
	p.Set("parents", parents)
	p.Set("children", kids)
	p.Set("metadata", metadata)
	n.projection = p
	n.content = "content:" + sha256Hex(sortedCompact(nil, p))
	n.invalid = bodyProblem(n.body(), false)
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// templateOf is the template of a dispatch file "<seq>-<template>.md".
func templateOf(file string, seq int64) string {
	t := strings.TrimSuffix(file, ".md")
	return strings.TrimPrefix(t, strconv.FormatInt(seq, 10)+"-")
}

// dispatchHeader reads the audit header of a dispatch file:
//
//	# Dispatch: <template-name>
//	**Pipeline:** <skill-name> | **Phase:** <phase> | **Task:** <N>
//	**Timestamp:** <ISO-8601>
//	**Dispatch-Dir:** <dispatch directory path>
//
// into {template, pipeline, phase, task, timestamp, dispatchDir}, the fields
// found; null when the file does not start with one.
func dispatchHeader(data []byte) any {
	text := DecodeUTF8(data)
	lines := strings.Split(text, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# Dispatch:") {
		return nil
	}
	h := NewObject()
	h.Set("template", strings.TrimSpace(strings.TrimPrefix(lines[0], "# Dispatch:")))
	names := map[string]string{"Pipeline": "pipeline", "Phase": "phase", "Task": "task", "Timestamp": "timestamp", "Dispatch-Dir": "dispatchDir"}
	for _, line := range lines[1:] {
		line = strings.TrimRight(line, "\r")
		if line == "---" {
			break
		}
		for _, field := range strings.Split(line, " | ") {
			key, value, found := strings.Cut(field, ":**")
			if !found {
				continue
			}
			if name, ok := names[strings.TrimPrefix(key, "**")]; ok {
				h.Set(name, strings.TrimSpace(value))
			}
		}
	}
	return h
}

// crucibleMissing is the first file a snapshot recorded (the dispatch file,
// the output artifacts, by id) that is gone now. The files are named by the
// node's entry as it is now, not by the snapshot's normalized body, whose
// names may have been scrubbed.
func (r *Run) crucibleMissing(n *Node, snapBody *Object) (string, bool) {
	var recorded []string
	if in, ok := snapBody.Vals["inputs"].(*Object); ok {
		if _, ok := in.Vals["dispatchFile"].(*Object); ok {
			recorded = append(recorded, "dispatch-file")
		}
	}
	arts, _ := objectArray(snapBody, "artifacts")
	for _, a := range arts {
		recorded = append(recorded, jsTemplate(a, "id"))
	}
	for _, id := range recorded {
		if name := n.files[id]; name == "" || !isFile(filepath.Join(r.Dir, name)) {
			return id, true
		}
	}
	return "", false
}
